"""``UpstreamConnection.relay_login``: a client's SCRAM exchange relayed to a real SCRAM server (``kafkaguard serve``
as the upstream, which speaks SCRAM as Kafka does) logs that upstream connection in as the client; a refusal is the
server's, and leaves the connection failed; once a passed-through login's link is gone, the connection never dials
again (no service login stands in for the client); a broker that is not there raises ``LoginUnavailable``; and a
logged-in connection re-authenticates (KIP-368) on the same link."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import build_request
from kafkaguard.protocol.codec import request_schema
from kafkaguard.protocol.passthrough import LoginUnavailable
from kafkaguard.proxy.upstream import (
    Address,
    ScramLogin,
    UpstreamConnection,
    UpstreamProtocol,
    UpstreamSecurity,
    UpstreamUnavailable,
)
from kafkaguard.scram import ScramMechanism
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server

#: The proxy's own service credential: never used by a relayed connection (the password is wrong on purpose).
SERVICE = UpstreamSecurity(
    UpstreamProtocol.SASL_PLAINTEXT,
    ScramLogin(ScramMechanism.SCRAM_SHA_512, ADMIN, "not-the-service-password"),
)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[ServerHandle]:
    handle = start_server(tmp_path, TlsFiles(tmp_path / "unused.pem", tmp_path / "unused.key"),
                          listeners=["SASL_PLAINTEXT://127.0.0.1:0"], ssl_certfile=None, ssl_keyfile=None,
                          connections_max_reauth_ms=60_000)  # fmt: skip
    try:
        yield handle
    finally:
        handle.stop()


async def relayed_login(connection: UpstreamConnection, password: str, *, first: bool = True) -> list[int]:
    """A SCRAM-SHA-256 exchange as a client would send it through the proxy: each answer's error code."""
    client = scramp.ScramClient(["SCRAM-SHA-256"], ADMIN, password)
    answer = await connection.relay_login("SCRAM-SHA-256", client.get_client_first().encode(), first=first)
    codes = [answer.error_code]
    if answer.error_code == 0:
        client.set_server_first(answer.auth_bytes.decode())
        answer = await connection.relay_login("SCRAM-SHA-256", client.get_client_final().encode(), first=False)
        codes.append(answer.error_code)
        if answer.error_code == 0:
            client.set_server_final(answer.auth_bytes.decode())  # the server's proof checks out
            assert answer.session_lifetime_ms == 60_000
    return codes


async def metadata_call(connection: UpstreamConnection) -> Any:
    body = build_request(request_schema(ApiKey.METADATA, 12), topics=(), allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)  # fmt: skip
    return await connection.call(ApiKey.METADATA, 12, body)


def test_a_relayed_login_is_the_client_s_and_is_never_replaced(upstream: ServerHandle) -> None:
    async def scenario() -> None:
        connection = UpstreamConnection([Address(*upstream.sasl)], SERVICE, timeout=10)
        try:
            assert await relayed_login(connection, ADMIN_PASSWORD) == [0, 0]
            assert connection.connected
            await metadata_call(connection)  # a request after login rides on the client's own login
            # KIP-368: the same link re-authenticates, then still answers
            assert await relayed_login(connection, ADMIN_PASSWORD, first=True) == [0, 0]
            await metadata_call(connection)
            _close_link(connection)
            with pytest.raises(UpstreamUnavailable, match="closed the client's passed-through login"):
                await metadata_call(connection)  # no dial with the service credential
        finally:
            connection.close()

    asyncio.run(scenario())


def test_a_refused_relayed_login_is_the_server_s_and_fails_the_connection(upstream: ServerHandle) -> None:
    async def scenario() -> None:
        connection = UpstreamConnection([Address(*upstream.sasl)], SERVICE, timeout=10)
        try:
            codes = await relayed_login(connection, "wrong-password")
            assert codes[-1] == 58  # SASL_AUTHENTICATION_FAILED, as the server answered it
            with pytest.raises(UpstreamUnavailable, match="refused the client's login"):
                await metadata_call(connection)
        finally:
            connection.close()

    asyncio.run(scenario())


def test_a_broker_that_is_not_there_cannot_be_asked() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario() -> None:
        connection = UpstreamConnection([Address("127.0.0.1", port)], SERVICE, timeout=5)
        with pytest.raises(LoginUnavailable, match="could not be asked about a login: ConnectionRefusedError"):
            await connection.relay_login("PLAIN", b"\x00bob\x00bob-secret", first=True)
        connection.close()

    asyncio.run(scenario())


def _close_link(connection: UpstreamConnection) -> None:
    """The broker went away under a logged-in connection: its link is closed."""
    state = connection._state
    link = getattr(state, "link", None)
    assert link is not None
    link.close()

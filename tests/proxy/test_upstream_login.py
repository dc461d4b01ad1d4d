"""The proxy's upstream login derives its salted password (PBKDF2: up to ~1 s at the iteration counts a broker may
ask for) on a worker thread, never on the event loop; tried against a real ``kafkaguard serve`` as the upstream,
which speaks SCRAM as Kafka does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.proxy.upstream import (
    Address,
    ScramLogin,
    UpstreamConnection,
    UpstreamProtocol,
    UpstreamSecurity,
    UpstreamUnavailable,
)
from kafkaguard.scram import ScramMechanism
from kafkaguard.scram.client import ScramClientSession
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, sasl_server


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[ServerHandle]:
    """A kafkaguard server with only a SASL_PLAINTEXT listener, as the proxy's upstream (it must log no error)."""
    with sasl_server(tmp_path) as handle:
        yield handle


def test_the_salted_password_is_derived_off_the_loop(upstream: ServerHandle, monkeypatch: pytest.MonkeyPatch):
    threads: list[str] = []
    original = ScramClientSession.final_message

    def recording(self: ScramClientSession, server_first: bytes) -> bytes:
        threads.append(threading.current_thread().name)
        return original(self, server_first)

    monkeypatch.setattr(ScramClientSession, "final_message", recording)

    async def login() -> str:
        security = UpstreamSecurity(UpstreamProtocol.SASL_PLAINTEXT,
                                    ScramLogin(ScramMechanism.SCRAM_SHA_256, ADMIN, ADMIN_PASSWORD))  # fmt: skip
        connection = UpstreamConnection([Address(*upstream.sasl)], security, timeout=10)
        try:
            await connection.connect()
            assert connection.connected
        finally:
            connection.close()
        return threading.current_thread().name

    loop_thread = asyncio.run(login())
    assert len(threads) == 1
    assert threads[0] != loop_thread


def test_a_sasl_upstream_without_a_login_is_refused_with_why(upstream: ServerHandle) -> None:
    async def connect() -> None:
        connection = UpstreamConnection([Address(*upstream.sasl)], UpstreamSecurity(UpstreamProtocol.SASL_PLAINTEXT),
                                        timeout=10)  # fmt: skip
        try:
            await connection.connect()
        finally:
            connection.close()

    with pytest.raises(UpstreamUnavailable, match="no login for a SASL_PLAINTEXT upstream"):
        asyncio.run(connect())

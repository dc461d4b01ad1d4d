"""KIP-368 re-authentication against a real server (``connections_max_reauth_ms``), with raw connections and real
clients (kafka-python and confluent-kafka re-authenticate; Java's client is in ``tests/kafka/test_reauthentication``).

Before this change SaslAuthenticate always answered ``session_lifetime_ms`` 0, a session never expired and a
SaslHandshake after login closed the connection ("re-authentication is not supported"): every test here failed on
that code, except the ones marked as keeping today's behaviour.
"""

from __future__ import annotations

import logging
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]
from confluent_kafka.admin import AdminClient
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as SaslAuthenticateRequestV0
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest as SaslAuthenticateRequestV1
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.audit.records.logins import LoginResult
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.server.session_clients import answers, login_lifetime, reauthenticate, seconds_until_closed
from tests.serving import ServerHandle, sasl_server
from tests.wire import Wire

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11 (as in test_e2e_kafka_python)
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]

pytestmark = pytest.mark.integration

LIFETIME_MS = 2000
LIFETIME = LIFETIME_MS / 1000
PASSWORD = "reauth-secret"  # noqa: S105 - a test password


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with sasl_server(tmp_path_factory.mktemp("reauth"), connections_max_reauth_ms=LIFETIME_MS) as handle:
        yield handle


def new_user(handle: ServerHandle, prefix: str = "user") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    handle.add_user(name, PASSWORD)
    return name


def logged_in(handle: ServerHandle, user: str) -> Wire:
    wire = Wire(handle.sasl)
    assert login_lifetime(wire, user, PASSWORD) == timedelta(milliseconds=LIFETIME_MS)
    return wire


# ---------------------------------------------------------------------------------------------- the lifetime


def test_sasl_authenticate_v1_and_later_carry_the_session_lifetime(served: ServerHandle, tmp_path: Path) -> None:
    user = new_user(served)
    with Wire(served.sasl) as wire:  # v2
        assert login_lifetime(wire, user, PASSWORD) == timedelta(milliseconds=LIFETIME_MS)
    with Wire(served.sasl) as wire:  # v1
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 0
        client = scramp.ScramClient(["SCRAM-SHA-256"], user, PASSWORD)
        first = wire.request(SaslAuthenticateRequestV1(auth_bytes=client.get_client_first().encode()))
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = wire.request(SaslAuthenticateRequestV1(auth_bytes=client.get_client_final().encode()))
        assert (final.error_code.value, final.session_lifetime) == (0, timedelta(milliseconds=LIFETIME_MS))
        assert first.session_lifetime == timedelta(0)  # only the answer that completes the login carries it
    # Off (0, Kafka's default): no lifetime, and the session lasts (keeps today's behaviour).
    with sasl_server(tmp_path / "off") as off:
        off.add_user(user, PASSWORD)
        with Wire(off.sasl) as wire:
            assert login_lifetime(wire, user, PASSWORD) == timedelta(0)
            time.sleep(0.3)
            assert answers(wire)


def test_a_connection_that_does_not_reauthenticate_is_closed_at_its_first_request_after_expiry(
    served: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's rule: nothing happens to an idle expired connection; its next request closes it, unanswered."""
    caplog.set_level(logging.DEBUG, logger="kafkaguard.protocol.connection")
    with logged_in(served, new_user(served)) as wire:
        assert answers(wire)
        time.sleep(LIFETIME + 0.3)
        assert seconds_until_closed(wire, timeout=0.2) is None  # expired but idle: still open
        assert not answers(wire)  # the request after expiry: closed instead of answered
    assert any(f"session expired: not re-authenticated within {LIFETIME_MS} ms" in r.getMessage()
               for r in caplog.records)  # fmt: skip


@pytest.mark.parametrize("login", ["sasl-authenticate-v0", "raw-tokens"])
def test_a_login_that_cannot_be_told_its_lifetime_expires_all_the_same(served: ServerHandle, login: str) -> None:
    """SaslAuthenticate v0 has no ``session_lifetime_ms`` and a v0 handshake none at all: as Kafka (KAFKA-9241),
    such a session expires anyway, so that an old client logs in anew, against the current credentials."""
    user = new_user(served)
    with Wire(served.sasl) as wire:
        client = scramp.ScramClient(["SCRAM-SHA-256"], user, PASSWORD)
        if login == "raw-tokens":
            assert wire.request(SaslHandshakeRequestV0(mechanism="SCRAM-SHA-256")).error_code.value == 0
            wire.send_frame(client.get_client_first().encode())
            server_first = wire.recv_frame()
            assert server_first is not None
            client.set_server_first(server_first.decode())
            wire.send_frame(client.get_client_final().encode())
            server_final = wire.recv_frame()
            assert server_final is not None
            client.set_server_final(server_final.decode())
        else:
            assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 0
            first = wire.request(SaslAuthenticateRequestV0(auth_bytes=client.get_client_first().encode()))
            client.set_server_first(bytes(first.auth_bytes).decode())
            final = wire.request(SaslAuthenticateRequestV0(auth_bytes=client.get_client_final().encode()))
            assert final.error_code.value == 0 and not hasattr(final, "session_lifetime")
        assert answers(wire)
        time.sleep(LIFETIME + 0.3)
        assert not answers(wire)


# ------------------------------------------------------------------------------------------- re-authentication


def test_reauthenticating_keeps_the_connection_across_several_lifetimes(served: ServerHandle) -> None:
    user = new_user(served)
    logins = served.services.logins
    with logged_in(served, user) as wire:
        started = time.monotonic()
        ok_logins = logins.total(LoginResult.OK)
        for _ in range(3):
            time.sleep(LIFETIME * 0.7)
            assert answers(wire)
            final = reauthenticate(wire, user, PASSWORD)
            assert (final.error_code.value, final.session_lifetime) == (0, timedelta(milliseconds=LIFETIME_MS))
        time.sleep(LIFETIME * 0.7)
        assert answers(wire)  # 2.8 lifetimes after the login: each re-authentication renewed the session
        assert time.monotonic() - started > 2.5 * LIFETIME
        assert logins.total(LoginResult.OK) == ok_logins  # re-authentications are not new logins
        assert served.server.sessions.sessions_of(user) != frozenset()


def test_reauthenticating_as_another_user_is_refused_and_closes_the_connection(
    served: ServerHandle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafkaguard.protocol.sasl")
    alice, bob = new_user(served, "alice"), new_user(served, "bob")
    with logged_in(served, alice) as wire:
        final = reauthenticate(wire, bob, PASSWORD)  # bob's password is right: the principal is what is refused
        assert final.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
        assert final.error_message == f"Cannot change principals during re-authentication from User.{alice}: User.{bob}"
        assert wire.recv_frame() is None
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Failed re-authentication with")]
    assert f"user '{bob}'" in line and "Cannot change principals" in line


def test_reauthenticating_with_a_wrong_password_or_another_mechanism_is_refused(served: ServerHandle) -> None:
    user = new_user(served)
    with logged_in(served, user) as wire:
        final = reauthenticate(wire, user, "wrong-password")
        assert final.error_code.value == 58
        assert final.error_message == (
            "Authentication failed during re-authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256"
        )
        assert wire.recv_frame() is None
    with logged_in(served, user) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert handshake.error_code.value == 33  # UNSUPPORTED_SASL_MECHANISM: a session keeps its mechanism
        assert wire.recv_frame() is None


def test_only_sasl_authenticate_may_come_during_a_reauthentication(served: ServerHandle) -> None:
    with logged_in(served, new_user(served)) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 0
        assert not answers(wire)


def test_reauthenticating_again_within_a_second_is_refused(served: ServerHandle) -> None:
    """Kafka's ``KafkaChannel``: at most one re-authentication a second."""
    user = new_user(served)
    with logged_in(served, user) as wire:
        assert reauthenticate(wire, user, PASSWORD).error_code.value == 0
        handshake = wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        assert handshake.error_code.value == 34  # ILLEGAL_SASL_STATE
        assert wire.recv_frame() is None


def test_without_a_lifetime_a_handshake_after_login_is_refused(tmp_path: Path) -> None:
    """Re-authentication off (Kafka's default): a second SaslHandshake gets ILLEGAL_SASL_STATE, then the connection
    closes (keeps today's closing; the answer is new)."""
    with sasl_server(tmp_path / "off") as off:
        off.add_user("alice", PASSWORD)
        with Wire(off.sasl) as wire:
            wire.login("alice", PASSWORD)
            assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 34
            assert wire.recv_frame() is None


def test_a_password_changed_between_client_first_and_client_final_fails_the_login(served: ServerHandle) -> None:
    """The proof of a credential replaced meanwhile is refused like a wrong password: no session starts with a
    credential that is already gone."""
    user = new_user(served)
    with Wire(served.sasl) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code.value == 0
        client = scramp.ScramClient(["SCRAM-SHA-256"], user, PASSWORD)
        first = wire.request(SaslAuthenticateRequestV1(auth_bytes=client.get_client_first().encode()))
        client.set_server_first(bytes(first.auth_bytes).decode())
        assert served.services.credentials.upsert_password(
            user, ScramMechanism.SCRAM_SHA_256, "other", 4096, actor=ACTOR
        ).succeeded
        final = wire.request(SaslAuthenticateRequestV1(auth_bytes=client.get_client_final().encode()))
        assert final.error_code.value == 58
        assert wire.recv_frame() is None


# ------------------------------------------------------------------------------------------------ real clients


def kafka_python_client(handle: ServerHandle, user: str) -> tuple[Any, Any]:
    host, port = handle.sasl
    client = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user, sasl_plain_password=PASSWORD,
                              request_timeout_ms=5000)  # fmt: skip
    return client.describe_cluster, client.close


def confluent_client(handle: ServerHandle, user: str) -> tuple[Any, Any]:
    host, port = handle.sasl
    client = AdminClient({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                          "sasl.password": PASSWORD})  # fmt: skip
    return (lambda: client.list_topics(timeout=5)), (lambda: None)


@pytest.mark.parametrize("make_client", [kafka_python_client, confluent_client], ids=["kafka-python", "confluent"])
def test_real_clients_reauthenticate_and_keep_working(
    served: ServerHandle, caplog: pytest.LogCaptureFixture, make_client: Any
) -> None:
    """kafka-python (3.0) and librdkafka (confluent-kafka) re-authenticate on their connections: requests every
    250 ms for 3.5 lifetimes all succeed, the server sees re-authentications, and no connection expires."""
    caplog.set_level(logging.DEBUG, logger="kafkaguard.protocol")
    user = new_user(served, "client")
    call, close = make_client(served, user)
    try:
        started = time.monotonic()
        calls = 0
        while time.monotonic() - started < 3.5 * LIFETIME:
            call()
            calls += 1
            time.sleep(0.25)
    finally:
        close()
    messages = [r.getMessage() for r in caplog.records]
    reauthenticated = [m for m in messages if m.startswith("Successfully re-authenticated") and f"'{user}'" in m]
    logins = [m for m in messages if m.startswith("Successfully authenticated") and f"'{user}'" in m]
    expired = [m for m in messages if f"(User:{user}) closed: session expired" in m]
    assert calls >= 10 and len(reauthenticated) >= 2 and expired == []
    assert len(logins) <= 2  # its bootstrap connection and its broker connection: no reconnection

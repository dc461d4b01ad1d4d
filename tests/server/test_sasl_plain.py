"""SASL/PLAIN against the stored SCRAM credentials (no plaintext stored), offered on TLS listeners only unless
``sasl_plain_without_tls``: Kafka's PlainSaslServer's token format, checks and messages, with real clients
(confluent-kafka, kafka-python) and on the wire."""

from __future__ import annotations

import ssl
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.config import SecurityProtocol
from tests.serving import ServerHandle, TlsFiles, start_server
from tests.wire import Wire

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka.errors import KafkaError as KafkaPythonError  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

PASSWORD = "plain-secret-1"  # noqa: S105 - a test password
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    handle = start_server(
        tmp_path_factory.mktemp("plain"),
        tls_files,
        sasl_mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"],
        login_failures_per_address_burst=10_000,  # confluent-kafka retries a refused login every 50 ms
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def new_user(server: ServerHandle) -> str:
    user = f"plain-{uuid.uuid4().hex[:8]}"
    server.add_user(user, PASSWORD)
    return user


def tls_context(server: ServerHandle) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(server.tls.certfile))


def plain_login(wire: Wire, token: bytes) -> tuple[ErrorCode, str | None]:
    handshake = wire.request(SaslHandshakeRequest(mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.none
    answer = wire.request(SaslAuthenticateRequest(auth_bytes=token))
    return answer.error_code, answer.error_message


def test_confluent_kafka_logs_in_with_plain_over_tls_as_the_stored_user(plain_server: ServerHandle) -> None:
    user = new_user(plain_server)
    admin = AdminClient(
        {
            "bootstrap.servers": plain_server.bootstrap(SecurityProtocol.SASL_SSL),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(plain_server.tls.certfile),
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": PASSWORD,
        }
    )
    topic = f"plain-topic-{uuid.uuid4().hex[:6]}"
    metadata = admin.list_topics(topic, timeout=TIMEOUT)
    # no ACL: the topic is refused to this user, and the audit names the principal PLAIN logged in
    assert metadata.topics[topic].error is not None
    principals = {r["principal"] for r in plain_server.audit_records() if r["resource_name"] == topic}
    assert principals == {f"User:{user}"}


def test_a_wrong_password_fails_with_kafkas_message(plain_server: ServerHandle) -> None:
    user = new_user(plain_server)
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        code, message = plain_login(wire, f"\0{user}\0wrong-password".encode())
        assert (code, message) == (ErrorCode.sasl_authentication_failed,
                                   "Authentication failed: Invalid username or password")  # fmt: skip
        assert wire.closed()
    # an unknown user: the same answer
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        assert plain_login(wire, b"\0nobody-here\0" + PASSWORD.encode())[1] == (
            "Authentication failed: Invalid username or password"
        )


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\0" + PASSWORD.encode(), "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"\0\0" + PASSWORD.encode(), "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    ],
)
def test_malformed_plain_tokens_get_kafkas_messages(plain_server: ServerHandle, token: bytes, message: str) -> None:
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        assert plain_login(wire, token) == (ErrorCode.sasl_authentication_failed, message)


def test_another_authorization_id_is_refused_after_the_password(plain_server: ServerHandle) -> None:
    user = new_user(plain_server)
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        _, message = plain_login(wire, f"admin\0{user}\0{PASSWORD}".encode())
        assert message == "Authentication failed: Client requested an authorization id that is different from username"
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:  # the same name is fine
        assert plain_login(wire, f"{user}\0{user}\0{PASSWORD}".encode()) == (ErrorCode.none, None)


def test_plain_is_not_offered_without_tls(plain_server: ServerHandle) -> None:
    with Wire(plain_server.sasl) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.unsupported_sasl_mechanism
        assert "PLAIN" not in handshake.mechanisms
        assert set(handshake.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        assert "PLAIN" in handshake.mechanisms


def test_a_changed_password_takes_effect_at_once(plain_server: ServerHandle) -> None:
    """The cache of recent successes is keyed to the stored credential: a new password ends the old one's use."""
    user = new_user(plain_server)
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        assert plain_login(wire, f"\0{user}\0{PASSWORD}".encode()) == (ErrorCode.none, None)
    plain_server.add_user(user, "a-new-password")
    with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
        assert plain_login(wire, f"\0{user}\0{PASSWORD}".encode())[0] == ErrorCode.sasl_authentication_failed


def test_kafka_python_logs_in_with_plain_when_allowed_without_tls(tmp_path: Path, tls_files: TlsFiles) -> None:
    handle = start_server(tmp_path, tls_files, sasl_mechanisms=["SCRAM-SHA-256", "PLAIN"], sasl_plain_without_tls=True)
    try:
        user = new_user(handle)
        admin = KafkaAdminClient(
            bootstrap_servers=handle.bootstrap(SecurityProtocol.SASL_PLAINTEXT),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=user,
            sasl_plain_password=PASSWORD,
            request_timeout_ms=10_000,
        )
        try:
            assert isinstance(admin.list_topics(), list)
        finally:
            admin.close()
        with pytest.raises(KafkaPythonError):
            KafkaAdminClient(
                bootstrap_servers=handle.bootstrap(SecurityProtocol.SASL_PLAINTEXT),
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="PLAIN",
                sasl_plain_username=user,
                sasl_plain_password="not-it",  # noqa: S106 - a wrong test password
                request_timeout_ms=5_000,
            )
    finally:
        handle.stop()
    assert handle.errors == []


def test_confluent_kafka_reports_the_refusal(plain_server: ServerHandle) -> None:
    errors: list[KafkaError] = []
    conf: dict[str, Any] = {
        "bootstrap.servers": plain_server.bootstrap(SecurityProtocol.SASL_SSL),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(plain_server.tls.certfile),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "nobody",
        "sasl.password": "nothing",
        "error_cb": errors.append,
    }
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2.0)
    admin.poll(1.0)
    assert any("Invalid username or password" in error.str() for error in errors), errors


def test_a_burst_of_first_logins_of_one_client_all_succeed(plain_server: ServerHandle) -> None:
    """40 connections of one user at once, nothing cached yet: one derivation answers them all, and no login is
    refused for the pool or the budget (they are for wrong passwords, not for a client's burst)."""
    import concurrent.futures

    user = new_user(plain_server)
    token = f"\0{user}\0{PASSWORD}".encode()

    def login() -> tuple[ErrorCode, str | None]:
        with Wire(plain_server.sasl_ssl, tls=tls_context(plain_server)) as wire:
            return plain_login(wire, token)

    with concurrent.futures.ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(lambda _: login(), range(40)))
    assert answers == [(ErrorCode.none, None)] * 40

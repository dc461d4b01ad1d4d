"""SASL/OAUTHBEARER on ``serve``: tokens checked as Kafka's OAuthBearerValidatorCallbackHandler checks them (the
validation rules themselves: ``tests/identity``, and against Kafka's own validator: ``tests/kafka``), the
``{"status":"invalid_token"}`` challenge, groups from a token claim, and a session that ends with its token —
with confluent-kafka, kafka-python and on the wire."""

from __future__ import annotations

import time
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
from tests.identity.tokens import AUDIENCE, ISSUER, claims, jwks_document, session_keys, sign, write_jwks
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import Wire, create_acl, metadata

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka.net.sasl.oauth import AbstractTokenProvider  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def oauth_server(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    directory = tmp_path_factory.mktemp("oauth")
    jwks = write_jwks(directory / "jwks.json", jwks_document())
    handle = start_server(
        directory,
        tls_files,
        sasl_mechanisms=["SCRAM-SHA-256", "OAUTHBEARER"],
        sasl_oauthbearer_jwks_endpoint_url=jwks.as_uri(),
        sasl_oauthbearer_expected_audience=[AUDIENCE],
        sasl_oauthbearer_expected_issuer=ISSUER,
        sasl_oauthbearer_groups_claim_name="realm_access.groups",
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def token_for(subject: str, lifetime: int = 3600, **changes: Any) -> str:
    now = int(time.time())
    return sign(claims(now, sub=subject, exp=now + lifetime, **changes), session_keys().rsa_1)


def oauth_login(wire: Wire, token: str, authzid: str = "") -> Any:
    assert wire.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == ErrorCode.none
    message = f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()
    return wire.request(SaslAuthenticateRequest(auth_bytes=message))


def confluent(server: ServerHandle, token: str, protocol: SecurityProtocol, **extra: Any) -> AdminClient:
    conf: dict[str, Any] = {
        "bootstrap.servers": server.bootstrap(protocol),
        "security.protocol": protocol.value,
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": lambda _config: (token, time.time() + 3600),
        "socket.timeout.ms": 5000,
    }
    if protocol.uses_tls:
        conf["ssl.ca.location"] = str(server.tls.certfile)
    return AdminClient(conf | extra)


def principals_asking(server: ServerHandle, topic: str) -> set[str]:
    return {r["principal"] for r in server.audit_records() if r["resource_name"] == topic}


@pytest.mark.parametrize("protocol", [SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL])
def test_confluent_kafka_logs_in_with_a_token_as_its_subject(
    oauth_server: ServerHandle, protocol: SecurityProtocol
) -> None:
    subject = f"svc-{uuid.uuid4().hex[:6]}"
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    confluent(oauth_server, token_for(subject), protocol).list_topics(topic, timeout=TIMEOUT)
    assert principals_asking(oauth_server, topic) == {f"User:{subject}"}


def test_kafka_python_logs_in_with_a_token(oauth_server: ServerHandle) -> None:
    subject = f"kp-{uuid.uuid4().hex[:6]}"

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return token_for(subject)

    admin = KafkaAdminClient(
        bootstrap_servers=oauth_server.bootstrap(SecurityProtocol.SASL_PLAINTEXT),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
        request_timeout_ms=10_000,
    )
    try:
        assert isinstance(admin.list_topics(), list)
    finally:
        admin.close()


def test_a_bad_token_gets_kafkas_challenge_then_fails(oauth_server: ServerHandle) -> None:
    now = int(time.time())
    expired = sign(claims(now, iat=now - 7200, exp=now - 3600), session_keys().rsa_1)
    with Wire(oauth_server.sasl) as wire:
        first = oauth_login(wire, expired)
        assert (first.error_code, bytes(first.auth_bytes)) == (ErrorCode.none, b'{"status":"invalid_token"}')
        final = wire.request(SaslAuthenticateRequest(auth_bytes=b"\x01"))
        assert (final.error_code, final.error_message) == (
            ErrorCode.sasl_authentication_failed,
            '{"status":"invalid_token"}',
        )
        assert wire.closed()


def test_confluent_kafka_reports_a_refused_token(oauth_server: ServerHandle) -> None:
    errors: list[KafkaError] = []
    forged = sign(claims(int(time.time())), session_keys().rsa_other)  # a key the JWKS does not hold
    admin = confluent(oauth_server, forged, SecurityProtocol.SASL_PLAINTEXT, error_cb=errors.append)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2.0)
    admin.poll(1.0)
    assert any("invalid_token" in error.str() for error in errors), errors


def test_another_authorization_id_is_refused(oauth_server: ServerHandle) -> None:
    with Wire(oauth_server.sasl) as wire:
        answer = oauth_login(wire, token_for("carol"), authzid="admin")
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == (
            "Authentication failed: Client requested an authorization id (admin) that is different from the "
            "token's principal name (carol)"
        )


def test_token_groups_grant_what_group_acls_allow_until_a_token_without_them(oauth_server: ServerHandle) -> None:
    topic = f"gbac-{uuid.uuid4().hex[:8]}"
    subject = f"dave-{uuid.uuid4().hex[:4]}"
    with Wire(oauth_server.sasl) as admin:
        admin.login(ADMIN, ADMIN_PASSWORD)
        metadata(admin, [topic])  # the admin auto-creates it
        code = create_acl(admin, resource_type=2, name=topic, pattern_type=3, principal="Group:payments", operation=8)
        assert code == 0  # ALLOW DESCRIBE on the topic for Group:payments

    def sees_topic(token: str) -> bool:
        with Wire(oauth_server.sasl) as wire:
            assert oauth_login(wire, token).error_code == ErrorCode.none
            answer = metadata(wire, [topic], allow_auto_topic_creation=False)
            return bool(answer.topics[0].error_code == ErrorCode.none)

    with_group = token_for(subject, realm_access={"groups": ["payments", "ops"]})
    assert sees_topic(with_group)
    records = [r for r in oauth_server.audit_records() if r["resource_name"] == topic and subject in r["principal"]]
    assert records and records[-1]["login_groups"] == ["Group:payments", "Group:ops"]
    assert "principal=Group:payments" in records[-1]["rule"]
    # the next login's token no longer carries the group: the same user loses what the group granted
    assert not sees_topic(token_for(subject, realm_access={"groups": ["ops"]}))
    assert not sees_topic(token_for(subject))


def test_the_session_ends_with_its_token(oauth_server: ServerHandle) -> None:
    """Told in session_lifetime_ms (KIP-368), and the first request after the token's expiry closes the connection,
    as Kafka does even with connections.max.reauth.ms at 0 (its ReauthInfo takes the token's expiry)."""
    with Wire(oauth_server.sasl) as wire:
        answer = oauth_login(wire, token_for("erin", lifetime=2))
        assert answer.error_code == ErrorCode.none
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        assert 0 < lifetime_ms <= 2000
        assert metadata(wire, [], allow_auto_topic_creation=False).topics == ()  # logged in, answered
        time.sleep(lifetime_ms / 1000 + 0.3)
        wire.send_frame(b"\x00\x03\x00\x01\x00\x00\x00\x63\xff\xff\x00\x00\x00\x00")  # Metadata v1, no topics
        assert wire.recv_frame() is None


def test_the_jwks_must_be_readable_at_start(tmp_path: Path, tls_files: TlsFiles) -> None:
    from kafkaguard.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="JWKS"):
        start_server(
            tmp_path,
            tls_files,
            sasl_mechanisms=["OAUTHBEARER"],
            sasl_oauthbearer_jwks_endpoint_url=(tmp_path / "missing.json").as_uri(),
        )


def test_serve_needs_a_jwks_even_with_the_proxy_s_passthrough_settings(tmp_path: Path, tls_files: TlsFiles) -> None:
    """The settings let a proxy that passes OAUTHBEARER through go without a JWKS (its broker checks tokens); serve
    has no broker behind it and says so rather than start unable to check a token."""
    from kafkaguard.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="kafkaguard serve checks tokens itself"):
        start_server(tmp_path, tls_files, sasl_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"],
                     upstream_authentication="passthrough")  # fmt: skip

"""Mutual TLS: on an SSL listener the principal is the client certificate's subject in Java's RFC 2253 form, mapped
by ``ssl_principal_mapping_rules`` as Kafka maps it; on SASL_SSL the SASL login wins. ``ssl_client_auth``
required / requested, a CA bundle and a revocation list, with confluent-kafka and kafka-python."""

from __future__ import annotations

import datetime
import ssl
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from kafkaguard.audit.records.cloudevents import unwrap
from kafkaguard.audit.records.logins import LoginResult
from kafkaguard.config import SecurityProtocol
from kafkaguard.identity.x500 import rfc2253_name
from tests.identity.certs import CertificateSet, write_certificates
from tests.serving import ServerHandle, TlsFiles, start_server
from tests.wire import Wire

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

RULES = "RULE:^CN=([^,]*),OU=ServiceUsers,.*$/svc-$1/L,RULE:^CN=([^,]*)$/$1/,RULE:^UID=(.*)$/uid-$1/U"
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return write_certificates(tmp_path_factory.mktemp("mtls-certs"))


def _server(directory: Path, certs: CertificateSet, client_auth: str, **overrides: Any) -> ServerHandle:
    return start_server(
        directory,
        TlsFiles(certs.server.cert, certs.server.key),
        listeners=["SSL://127.0.0.1:0", "SASL_SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"],
        ssl_client_auth=client_auth,
        sasl_ssl_client_auth=client_auth,
        ssl_cafile=certs.ca,
        ssl_principal_mapping_rules=RULES,
        **overrides,
    )


@pytest.fixture(scope="module")
def required(tmp_path_factory: pytest.TempPathFactory, certs: CertificateSet) -> Iterator[ServerHandle]:
    handle = _server(tmp_path_factory.mktemp("mtls-required"), certs, "required")
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def confluent(server: ServerHandle, certs: CertificateSet, client: str | None, **extra: Any) -> AdminClient:
    conf: dict[str, Any] = {
        "bootstrap.servers": server.bootstrap(SecurityProtocol.SSL),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "socket.timeout.ms": 5000,
    }
    if client is not None:
        conf |= {
            "ssl.certificate.location": str(certs.clients[client].cert),
            "ssl.key.location": str(certs.clients[client].key),
        }
    return AdminClient(conf | extra)


def principal_seen(server: ServerHandle, topic: str) -> set[str]:
    """The principals the audit log saw ask about ``topic`` (no ACL on it: each ask is a denial, recorded)."""
    return {r["principal"] for r in server.audit_records() if r["resource_name"] == topic}


def ask(admin: AdminClient) -> str:
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    admin.list_topics(topic, timeout=TIMEOUT)
    return topic


@pytest.mark.parametrize(
    ("client", "principal"),
    [
        ("duke", "User:svc-duke"),  # the first rule: CN=Duke,OU=ServiceUsers,O=Org,C=US, lower-cased
        ("plain", "User:alice"),  # the second rule
        ("uid", "User:UID-U-42"),  # the third, upper-cased (the whole result, as Kafka's /U)
    ],
)
def test_the_certificate_subject_mapped_by_kafkas_rules_is_the_principal(
    required: ServerHandle, certs: CertificateSet, client: str, principal: str
) -> None:
    topic = ask(confluent(required, certs, client))
    assert principal_seen(required, topic) == {principal}


def test_kafka_python_gets_the_same_principal(required: ServerHandle, certs: CertificateSet) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=required.bootstrap(SecurityProtocol.SSL),
        security_protocol="SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(certs.clients["duke"].cert),
        ssl_keyfile=str(certs.clients["duke"].key),
        request_timeout_ms=10_000,
    )
    try:
        topic = f"mtls-kp-{uuid.uuid4().hex[:8]}"
        admin.describe_topics([topic])
    except Exception:  # noqa: BLE001,S110 - the denial is what is looked at, not the client's error
        pass
    finally:
        admin.close()
    assert principal_seen(required, topic) == {"User:svc-duke"}


def test_no_matching_rule_closes_the_connection(required: ServerHandle, certs: CertificateSet) -> None:
    """'comma' (CN=Tkac\\, Adam,OU=ITZ,DC=cz) matches none of the rules and there is no DEFAULT: Kafka gives such
    a client no principal and closes its connection; so does kafkaguard, at once, and counts a failed login."""
    assert rfc2253_name(certs.clients["comma"].der) == "CN=Tkac\\, Adam,OU=ITZ,DC=cz"
    before = required.services.logins.total(LoginResult.FAILED, mechanism="SSL")
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(certs.clients["comma"].cert, certs.clients["comma"].key)
    with Wire(required.address(SecurityProtocol.SSL), tls=context) as wire:
        wire.send_raw(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")  # ApiVersions v0
        assert wire.recv_frame() is None
    assert required.services.logins.total(LoginResult.FAILED, mechanism="SSL") == before + 1


def test_required_refuses_a_client_without_a_certificate(required: ServerHandle, certs: CertificateSet) -> None:
    context = ssl.create_default_context(cafile=str(certs.ca))
    with pytest.raises(OSError), Wire(required.address(SecurityProtocol.SSL), tls=context) as wire:  # SSLError too
        wire.send_raw(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
        if wire.recv_frame() is None:  # TLS 1.3: the alert arrives after the handshake "completed"
            raise ConnectionError("closed")


def test_on_sasl_ssl_the_sasl_login_wins_over_the_certificate(required: ServerHandle, certs: CertificateSet) -> None:
    required.add_user("scram-over-mtls", "scram-over-mtls-secret")
    admin = AdminClient(
        {
            "bootstrap.servers": required.bootstrap(SecurityProtocol.SASL_SSL),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.clients["duke"].cert),
            "ssl.key.location": str(certs.clients["duke"].key),
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "scram-over-mtls",
            "sasl.password": "scram-over-mtls-secret",
        }
    )
    assert principal_seen(required, ask(admin)) == {"User:scram-over-mtls"}


def test_requested_without_a_certificate_is_anonymous(tmp_path: Path, certs: CertificateSet) -> None:
    handle = _server(tmp_path, certs, "requested")
    try:
        anonymous = ask(confluent(handle, certs, None))
        assert principal_seen(handle, anonymous) == {"User:ANONYMOUS"}
        named = ask(confluent(handle, certs, "plain"))
        assert principal_seen(handle, named) == {"User:alice"}
    finally:
        handle.stop()
    assert handle.errors == []


def _revoke(certs: CertificateSet, directory: Path, name: str) -> Path:
    """A revocation list from the test CA revoking ``name``'s certificate."""
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    revoked = x509.load_der_x509_certificate(certs.clients[name].der)
    now = datetime.datetime.now(datetime.UTC)
    crl = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.subject)
        .last_update(now - datetime.timedelta(minutes=5))
        .next_update(now + datetime.timedelta(days=1))
        .add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(revoked.serial_number).revocation_date(now).build()
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    path = directory / "revoked.pem"
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    return path


def test_a_revoked_certificate_is_refused(tmp_path: Path, certs: CertificateSet) -> None:
    crl = _revoke(certs, tmp_path, "plain")
    handle = _server(tmp_path / "server", certs, "required", ssl_crlfile=crl)
    try:
        errors: list[KafkaError] = []
        revoked = confluent(handle, certs, "plain", error_cb=errors.append)
        with pytest.raises(KafkaException):
            revoked.list_topics(timeout=3.0)
        still_good = ask(confluent(handle, certs, "duke"))
        assert principal_seen(handle, still_good) == {"User:svc-duke"}
    finally:
        handle.stop()


def test_certificate_logins_are_audited_with_their_principal_or_why_none(
    required: ServerHandle, certs: CertificateSet
) -> None:
    ask(confluent(required, certs, "duke"))
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(certs.clients["comma"].cert, certs.clients["comma"].key)
    with Wire(required.address(SecurityProtocol.SSL), tls=context) as wire:
        wire.send_raw(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")  # ApiVersions v0
        assert wire.recv_frame() is None
    events = [found for found in map(unwrap, required.audit_envelopes(end_windows=True)) if found is not None]
    ssl_logins = [data for category, data in events if category == "authentication" and data["mechanism"] == "SSL"]
    succeeded = [data for data in ssl_logins if data["result"] == "SUCCESS"]
    failed = [data for data in ssl_logins if data["result"] == "FAILURE"]
    assert {data["principal"] for data in succeeded} >= {"User:svc-duke"}
    assert all(data["error"] is None for data in succeeded)
    assert failed and all(data["principal"] is None and data["error"] for data in failed)

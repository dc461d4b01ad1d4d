"""Certificate hot reload (issue 39): a SASL_SSL listener's certificate and key replaced by ones from a NEW CA while
a confluent-kafka client keeps asking through its open connection; a broken replacement keeps the old certificate and
says why.

The clients trust a bundle of both CAs (what a rotation to a new CA looks like: the bundle first, then the
certificates), so the open connection (old certificate) and new ones (new certificate) both verify; which certificate
a new connection gets is read from a raw ``ssl`` handshake's peer certificate.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kafkaguard.config import SecurityProtocol
from kafkaguard.node.tls_reload import ReloadingContext
from tests.kafka.pki import CertificateAuthority, Issued
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server

pytestmark = pytest.mark.integration

TIMEOUT = 20.0
#: The test servers look at their TLS files this often (the default is 5 s).
INTERVAL = 0.2


@dataclass(frozen=True)
class Pki:
    old: CertificateAuthority
    new: CertificateAuthority
    bundle: Path  # both CAs: what the clients trust


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("reload-pki")
    old, new = CertificateAuthority.create("old CA"), CertificateAuthority.create("new CA")
    bundle = directory / "bundle.pem"
    bundle.write_text(old.certificate_pem + new.certificate_pem)
    return Pki(old, new, bundle)


def server_certificate(ca: CertificateAuthority) -> Issued:
    return ca.issue("CN=kafkaguard", hosts=("127.0.0.1", "localhost"))


def install(issued: Issued, tls: TlsFiles) -> None:
    """Replace the server's files as a renewal tool does: each written beside it, then renamed over it (the
    certificate first: for one look the key does not match it, which must keep the old pair)."""
    for path, text in ((tls.certfile, issued.certificate_pem), (tls.keyfile, issued.key_pem)):
        staged = path.with_suffix(".new")
        staged.write_text(text)
        os.replace(staged, path)


@pytest.fixture
def server(tmp_path: Path, pki: Pki) -> Iterator[ServerHandle]:
    tls = TlsFiles(tmp_path / "tls" / "server.pem", tmp_path / "tls" / "server.key")
    server_certificate(pki.old).write(tmp_path / "tls", "server")
    pki.old.write(tmp_path, "old-ca")
    handle = start_server(tmp_path / "data", tls, tls_reload_interval_seconds=INTERVAL)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


def listener_tls(server: ServerHandle) -> ReloadingContext:
    (context,) = [c for c in server.server.tls_contexts if c.name == "SASL_SSL listener"]
    return context


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {TIMEOUT:g} s: {what}")
        time.sleep(0.05)  # polling, bounded by the deadline


def peer_issuer(server: ServerHandle, cafile: Path) -> str:
    """The issuer CN of the certificate a NEW connection to the SASL_SSL listener is shown."""
    context = ssl.create_default_context(cafile=str(cafile))
    with (
        socket.create_connection(server.sasl_ssl, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        certificate: Any = tls.getpeercert()
    return str(dict(pair[0] for pair in certificate["issuer"])["commonName"])


def admin(server: ServerHandle, cafile: Path) -> AdminClient:
    """A confluent-kafka client of the SASL_SSL listener (``kafkaguard serve`` answers the metadata, ACL, user and
    topic APIs; Produce is the proxy's, in front of a real broker)."""
    return AdminClient(
        {
            "bootstrap.servers": server.bootstrap(SecurityProtocol.SASL_SSL),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": ADMIN,
            "sasl.password": ADMIN_PASSWORD,
            "ssl.ca.location": str(cafile),
        }
    )


def ask(client: AdminClient, topic: str, count: int) -> list[str]:
    """``count`` Metadata requests for ``topic`` (auto-created), each answered; the failures."""
    failures: list[str] = []
    for _ in range(count):
        try:
            answer = client.list_topics(topic, timeout=TIMEOUT)
        except KafkaException as e:
            failures.append(str(e))
            continue
        if topic not in answer.topics or answer.topics[topic].error is not None:
            failures.append(f"no {topic} in {answer.topics}")
    return failures


def test_a_client_keeps_working_while_the_certificate_moves_to_a_new_ca(server: ServerHandle, pki: Pki) -> None:
    topic = f"reload-{uuid.uuid4().hex[:8]}"
    client = admin(server, pki.bundle)
    failures = ask(client, topic, 50)
    assert peer_issuer(server, pki.bundle) == "old CA"

    install(server_certificate(pki.new), server.tls)
    wait_for(lambda: listener_tls(server).reloads == 1, "the new certificate and key reloaded")
    failures += ask(client, topic, 50)  # the open connection, still on the old certificate

    assert failures == []
    assert peer_issuer(server, pki.bundle) == "new CA"
    # a new client that trusts only the new CA gets in: the new certificate serves whole connections
    pki.new.write(server.tls.certfile.parent, "new-ca")
    assert ask(admin(server, server.tls.certfile.parent / "new-ca.pem"), topic, 5) == []
    # and one that trusts only the old CA no longer does
    with pytest.raises(ssl.SSLCertVerificationError):
        peer_issuer(server, server.tls.certfile.parent.parent / "old-ca.pem")


@pytest.mark.parametrize(
    "breakage",
    ["not a certificate", "the key of another certificate", "a half-written certificate"],
)
def test_a_broken_replacement_keeps_the_old_certificate_and_says_why(
    server: ServerHandle, pki: Pki, breakage: str, caplog: pytest.LogCaptureFixture
) -> None:
    tls = server.tls
    context = listener_tls(server)
    replacement = server_certificate(pki.new)
    with caplog.at_level(logging.INFO, logger="kafkaguard.node.tls_reload"):
        if breakage == "not a certificate":
            tls.certfile.write_text(
                "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
            )
        elif breakage == "the key of another certificate":
            tls.certfile.write_text(replacement.certificate_pem)
            tls.keyfile.write_text(server_certificate(pki.new).key_pem)
        else:
            tls.certfile.write_text(replacement.certificate_pem[: len(replacement.certificate_pem) // 2])
        wait_for(lambda: context.refused >= 1, "the broken files refused")
        assert peer_issuer(server, pki.bundle) == "old CA"
        refusals = [r.getMessage() for r in caplog.records if "do not load" in r.getMessage()]
        assert len(refusals) == 1, refusals  # one line, not one per look
        assert "SASL_SSL listener" in refusals[0]
        assert "still serving the previous certificate" in refusals[0]
        assert "PRIVATE KEY" not in refusals[0]

        install(replacement, tls)  # fixed: taken at the next look
        wait_for(lambda: context.reloads == 1, "the fixed files reloaded")
    assert peer_issuer(server, pki.bundle) == "new CA"
    reloaded = [r.getMessage() for r in caplog.records if "TLS files reloaded" in r.getMessage()]
    assert len(reloaded) == 1
    assert "certificate CN=kafkaguard, issuer CN=new CA, notAfter 20" in reloaded[0]

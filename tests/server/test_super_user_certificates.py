"""The start-up warning of super users a client certificate can log in as (issue 36 item 6), on real ``kafkaguard
serve`` processes: with the README's rule (``RULE:^CN=([^,]*),OU=ServiceUsers,.*$/$1/L``) a certificate
``CN=ADMIN,OU=ServiceUsers,O=Example`` is ``User:admin``, a super user — the warning names it, and the certificate
really is one; with a rule that maps to ``cert-…`` names the same certificate is ``User:cert-admin``, nobody is
warned of, and it is no super user. a1dee34 warned of nothing."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.static.primitive import i8

from tests.identity.certs import CN, OU, CertificateSet, Issued, _attr, _issue, _key, _name, _write, write_certificates
from tests.identity.certs import O as ORG
from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration

README_RULES = "RULE:^CN=([^,]*),OU=ServiceUsers,.*$/$1/L,DEFAULT"
PREFIXED_RULES = "RULE:^CN=([^,]*),OU=ServiceUsers,.*$/cert-$1/L"
WARNING = "super user User:admin can log in with a client certificate"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return write_certificates(tmp_path_factory.mktemp("super-user-certs"))


@pytest.fixture(scope="module")
def admin_certificate(certs: CertificateSet) -> Issued:
    """``CN=ADMIN,OU=ServiceUsers,O=Example`` (Java's form), signed by the test CA: what anyone the CA serves could
    ask for."""
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), password=None)
    subject = _name(_attr(ORG, "Example"), _attr(OU, "ServiceUsers"), _attr(CN, "ADMIN"))
    key = _key()
    leaf = (x509.BasicConstraints(ca=False, path_length=None), True)
    return _write(certs.directory, "service-admin", _issue(subject, key, ca.subject, ca_key, leaf), key)  # type: ignore[arg-type]


class Served:
    """``kafkaguard serve`` with one SSL listener, ``rules`` and super user User:admin; its log in ``log``."""

    def __init__(self, tmp_path: Path, certs: CertificateSet, rules: str, client_auth: str = "required") -> None:
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
        self.port = free_port()
        self.log = tmp_path / "serve.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(KAFKAGUARD), "serve", "--data-dir", str(tmp_path / "data"),
                 "--listener", f"SSL://127.0.0.1:{self.port}", "--super-users", "User:admin",
                 "--ssl-certfile", str(certs.server.cert), "--ssl-keyfile", str(certs.server.key),
                 "--ssl-client-auth", client_auth, "--ssl-cafile", str(certs.ca),
                 "--ssl-principal-mapping-rules", rules],
                stdout=subprocess.DEVNULL, stderr=out, env=env,
            )  # fmt: skip
        try:
            wait_until_listening(self.process, self.port)
        except BaseException:
            self.stop()
            raise

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def describe_acls_error(self, certs: CertificateSet, client: Issued) -> int:
        """DescribeAcls of everything over TLS with ``client``'s certificate: its error code (0 for a super user:
        nobody else holds an ACL here)."""
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.load_cert_chain(str(client.cert), str(client.key))
        everything = DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None,
                                         pattern_type_filter=i8(1), principal_filter=None, host_filter=None,
                                         operation=i8(1), permission_type=i8(1))  # fmt: skip
        with Wire(("127.0.0.1", self.port), tls=context, timeout=10) as wire:
            answer = wire.request(everything)
        return int(answer.error_code.value)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)
        assert "Traceback" not in self.text(), self.text()[-3000:]


def test_the_readme_rule_warns_of_admin_and_the_certificate_it_names_is_a_super_user(
    tmp_path: Path, certs: CertificateSet, admin_certificate: Issued
):
    served = Served(tmp_path, certs, README_RULES)
    try:
        assert served.describe_acls_error(certs, admin_certificate) == 0  # the risk is real: a super user's answer
    finally:
        served.stop()
    log = served.text()
    assert WARNING in log
    assert "the subject 'CN=admin,OU=ServiceUsers,O=Example'" in log  # a subject that maps to it, to try
    assert "(rule RULE:^CN=([^,]*),OU=ServiceUsers,.*$/$1/L)" in log
    assert "Keeping super users off certificate logins" in log  # where to read what to do


def test_a_rule_that_cannot_make_admin_warns_of_nobody_and_the_certificate_is_no_super_user(
    tmp_path: Path, certs: CertificateSet, admin_certificate: Issued
):
    served = Served(tmp_path, certs, PREFIXED_RULES)
    try:
        assert served.describe_acls_error(certs, admin_certificate) == 31  # CLUSTER_AUTHORIZATION_FAILED: cert-admin
    finally:
        served.stop()
    assert "super user" not in served.text()


def test_no_warning_when_the_ssl_listener_asks_for_no_certificate(tmp_path: Path, certs: CertificateSet):
    """ssl_client_auth none: the rules never run, every client is User:ANONYMOUS."""
    served = Served(tmp_path, certs, README_RULES, client_auth="none")
    served.stop()
    assert "listening on SSL" in served.text()
    assert "super user" not in served.text()

"""Certificates for the test broker's TLS listeners and their clients, made with ``cryptography`` (EC P-256: fast).

::

    ca = CertificateAuthority.create("kafkaguard test CA")
    server = ca.issue("CN=broker", hosts=("127.0.0.1", "localhost"))   # SAN IP 127.0.0.1, SAN DNS localhost
    client = ca.issue("CN=proxy,OU=kafkaguard,O=Example")             # a client certificate (clientAuth)
    certfile, keyfile = client.write(tmp_path, "proxy")

Keys are unencrypted PKCS#8 PEM, what Kafka's ``ssl.keystore.type=PEM`` reads without ``ssl.key.password``.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_ATTRIBUTES = {
    "CN": NameOID.COMMON_NAME,
    "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
    "O": NameOID.ORGANIZATION_NAME,
    "L": NameOID.LOCALITY_NAME,
    "C": NameOID.COUNTRY_NAME,
}
_VALIDITY = datetime.timedelta(days=2)


def parse_name(text: str) -> x509.Name:
    """``CN=proxy,OU=kafkaguard,O=Example`` (written most specific first, as RFC 2253 and Java print it)."""
    pairs = [part.split("=", 1) for part in text.split(",")]
    return x509.Name([x509.NameAttribute(_ATTRIBUTES[key.strip()], value.strip()) for key, value in reversed(pairs)])


@dataclass(frozen=True)
class Issued:
    """A certificate (PEM) and its key (unencrypted PKCS#8 PEM)."""

    certificate_pem: str
    key_pem: str = field(repr=False)

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """``name.pem`` and ``name.key`` in ``directory``: (certfile, keyfile)."""
        directory.mkdir(parents=True, exist_ok=True)
        certfile, keyfile = directory / f"{name}.pem", directory / f"{name}.key"
        certfile.write_text(self.certificate_pem)
        keyfile.write_text(self.key_pem)
        keyfile.chmod(0o600)
        return certfile, keyfile


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA that issues server and client certificates."""

    key: ec.EllipticCurvePrivateKey = field(repr=False)
    certificate: x509.Certificate

    @classmethod
    def create(cls, common_name: str = "kafkaguard test CA") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    @property
    def certificate_pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def write(self, directory: Path, name: str = "ca") -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.pem"
        path.write_text(self.certificate_pem)
        return path

    def issue(self, subject: str, *, hosts: tuple[str, ...] = ()) -> Issued:
        """A certificate for ``subject``; with ``hosts`` (IP addresses and DNS names) a server certificate for them,
        else a client certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(parse_name(subject))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        else:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        return Issued(certificate.public_bytes(serialization.Encoding.PEM).decode(), key_pem)

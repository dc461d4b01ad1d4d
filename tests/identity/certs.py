"""Certificates for identity tests: one CA, a server certificate for 127.0.0.1/localhost, and client certificates
whose subjects exercise every rule of Java's RFC 2253 writer (``kafkaguard.identity.x500``).

::

    certs = write_certificates(tmp_path)
    certs.ca                     # ca.pem: the CA that signed everything below
    certs.clients["comma"].cert  # comma.pem, comma.key: usable by confluent-kafka and kafka-python
    certs.server.cert            # server.pem, server.key: SAN IP:127.0.0.1, DNS:localhost
    certs.clients["comma"].der   # the certificate's DER, for rfc2253_name
    write_java_stores(certs, directory, "changeit")  # PKCS12 keystore + truststore for a Java broker

Keys are EC P-256 (fast to make); the PEM keys are unencrypted PKCS#8. A subject is a list of RDNs in DER order
(the first RDN written first in the certificate; Java prints them in reverse).
"""

from __future__ import annotations

import datetime
import ipaddress
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

_NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
_LIFETIME = datetime.timedelta(days=3650)


def _attr(oid: ObjectIdentifier, value: str, asn1: _ASN1Type | None = None) -> x509.NameAttribute[str]:
    """An attribute as given: no length checks (a 200-character CN, an empty one), and no warning about them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return x509.NameAttribute(oid, value, asn1, _validate=False)


def _name(*rdns: list[x509.NameAttribute[str]] | x509.NameAttribute[str]) -> x509.Name:
    """A Name from RDNs in DER order; a list is one multi-valued RDN."""
    return x509.Name([x509.RelativeDistinguishedName(r if isinstance(r, list) else [r]) for r in rdns])


CN, OU, O, C = NameOID.COMMON_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME, NameOID.ORGANIZATION_NAME, NameOID.COUNTRY_NAME  # noqa: E741 - the attribute keywords
UTF8, PRINTABLE, BMP = _ASN1Type.UTF8String, _ASN1Type.PrintableString, _ASN1Type.BMPString

#: name → subject. The names are file names (``<name>.pem``, ``<name>.key``) and test ids.
SUBJECTS: dict[str, x509.Name] = {
    "plain": _name(_attr(CN, "alice")),
    "duke": _name(_attr(C, "US"), _attr(O, "Org"), _attr(OU, "ServiceUsers"), _attr(CN, "Duke")),
    "full": _name(
        _attr(C, "US"),
        _attr(NameOID.STATE_OR_PROVINCE_NAME, "MD"),
        _attr(NameOID.LOCALITY_NAME, "Fulton"),
        _attr(O, "mycp"),
        _attr(OU, "SME"),
        _attr(CN, "Duke"),
    ),
    "comma": _name(_attr(NameOID.DOMAIN_COMPONENT, "cz"), _attr(OU, "ITZ"), _attr(CN, "Tkac, Adam")),
    "plus": _name(_attr(CN, "a+b")),
    "quote": _name(_attr(CN, 'say "hi"')),
    "backslash": _name(_attr(CN, "back\\slash")),
    "equals": _name(_attr(CN, "a=b")),
    "hash_leading": _name(_attr(CN, "#hash")),
    "hash_inside": _name(_attr(CN, "a#b")),
    "angles_semicolon": _name(_attr(CN, "<tag>;x")),
    "all_specials": _name(_attr(CN, ',=+<>#;"\\')),
    "spaces": _name(_attr(O, " lead"), _attr(CN, "  both  ")),
    "space_only": _name(_attr(CN, " ")),
    "space_runs": _name(_attr(O, " \r \x00 x \r "), _attr(CN, "a\\ \t ")),
    "control": _name(_attr(CN, "nul\x00cr\r"), _attr(OU, "\rtab\tnewline\n")),
    "multi_valued": _name(_attr(O, "Org"), [_attr(CN, "bob"), _attr(NameOID.USER_ID, "b123"), _attr(OU, "x+y")]),
    "email": _name(_attr(CN, "mail"), _attr(NameOID.EMAIL_ADDRESS, "m@example.com")),
    "uid": _name(_attr(NameOID.USER_ID, "u-42")),
    "dc": _name(_attr(NameOID.DOMAIN_COMPONENT, "com"), _attr(NameOID.DOMAIN_COMPONENT, "example"), _attr(CN, "svc")),
    "serial_title": _name(_attr(NameOID.SERIAL_NUMBER, "12345"), _attr(NameOID.TITLE, "Boss"), _attr(CN, "titled")),
    "street_others": _name(
        _attr(NameOID.STREET_ADDRESS, "1 Main St"),
        _attr(NameOID.SURNAME, "Smith"),
        _attr(NameOID.GIVEN_NAME, "Jo"),
        _attr(NameOID.DN_QUALIFIER, "q"),
        _attr(NameOID.PSEUDONYM, "ps"),
        _attr(NameOID.POSTAL_CODE, "12345"),
    ),
    "accented": _name(_attr(O, "Société"), _attr(CN, "José")),
    "japanese": _name(_attr(O, "日本"), _attr(CN, "山田")),
    "bmp": _name(_attr(O, "Bmp", BMP), _attr(CN, "José", BMP)),
    "printable": _name(_attr(C, "DE", PRINTABLE), _attr(CN, "print able", PRINTABLE)),
    "teletex": _name(_attr(O, "tele", _ASN1Type.T61String), _attr(CN, "télé", _ASN1Type.T61String)),
    # a BMPString's UTF-16 bytes, which Java decodes as UTF-8: an emoji (F0 9F 98 80), an overlong NUL (C0 80),
    # an encoded surrogate (ED A0 80), a cut sequence (E2 82 41) and a code point above U+10FFFF (F4 90 80 80)
    "bmp_bytes": _name(_attr(CN, "\uf09f\u9880\uc080\ueda0\u80e2\u8241\uf490\u8080", BMP)),
    "ia5_cn": _name(_attr(CN, "ia5", _ASN1Type.IA5String)),
    "visible_cn": _name(_attr(CN, "visible", _ASN1Type.VisibleString)),
    "universal_cn": _name(_attr(CN, "uni", _ASN1Type.UniversalString)),
    "numeric_ou": _name(_attr(OU, "0123", _ASN1Type.NumericString), _attr(CN, "numeric")),
    "unknown_oid": _name(_attr(ObjectIdentifier("1.2.3.4.5"), "odd, value"), _attr(CN, "unknown")),
    "empty": _name(),
    "empty_cn": _name(_attr(CN, "")),
    "long_cn": _name(_attr(CN, "long-" + "x" * 195)),
    "rfc2253_example": _name(_attr(C, "GB"), _attr(O, "Sue, Grabbit and Runn"), _attr(CN, "L. Eagle")),
}


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its key on disk (PEM), with the certificate's DER."""

    cert: Path
    key: Path
    der: bytes


@dataclass(frozen=True, slots=True)
class CertificateSet:
    directory: Path
    ca: Path
    ca_der: bytes
    server: Issued
    clients: dict[str, Issued]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Issued(cert_path, key_path, cert.public_bytes(serialization.Encoding.DER))


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *extensions: tuple[x509.ExtensionType, bool],
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(days=1))
        .not_valid_after(_NOW + _LIFETIME)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical)
    return builder.sign(issuer_key, hashes.SHA256())


def write_certificates(directory: Path) -> CertificateSet:
    """A CA (``ca.pem``), ``server.pem``/``server.key`` and ``<name>.pem``/``<name>.key`` for every SUBJECTS entry."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name(_attr(O, "kafkaguard tests"), _attr(CN, "kafkaguard test CA"))
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, (x509.BasicConstraints(ca=True, path_length=None), True))
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    # ca.key: for tests that sign more with this CA (a revocation list)
    (directory / "ca.key").write_bytes(
        ca_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    leaf = (x509.BasicConstraints(ca=False, path_length=None), True)
    server_key = _key()
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    server_cert = _issue(_name(_attr(CN, "localhost")), server_key, ca_name, ca_key, leaf, (san, False))
    server = _write(directory, "server", server_cert, server_key)
    clients = {}
    for name, subject in SUBJECTS.items():
        key = _key()
        # RFC 5280: an empty subject needs a subjectAltName (Java refuses the certificate without one)
        extra = [] if len(subject) else [(x509.SubjectAlternativeName([x509.DNSName(name)]), True)]
        clients[name] = _write(directory, name, _issue(subject, key, ca_name, ca_key, leaf, *extra), key)
    return CertificateSet(directory, ca_path, ca_cert.public_bytes(serialization.Encoding.DER), server, clients)


@dataclass(frozen=True, slots=True)
class JavaStores:
    keystore: Path  # PKCS12: the server key and certificate chain
    truststore: Path  # PKCS12 with the CA as a trusted certificate
    password: str

    def broker_properties(self, prefix: str = "") -> dict[str, str]:
        """Kafka's ssl.* settings for these stores (``prefix`` e.g. ``listener.name.ssl.``)."""
        return {
            f"{prefix}ssl.keystore.type": "PKCS12",
            f"{prefix}ssl.keystore.location": str(self.keystore),
            f"{prefix}ssl.keystore.password": self.password,
            f"{prefix}ssl.key.password": self.password,
            f"{prefix}ssl.truststore.type": "PKCS12",
            f"{prefix}ssl.truststore.location": str(self.truststore),
            f"{prefix}ssl.truststore.password": self.password,
        }


def write_java_stores(certs: CertificateSet, directory: Path, password: str) -> JavaStores:
    """PKCS12 stores a Java broker reads: the server's key and chain, and the CA as a trusted certificate
    (``serialize_java_truststore`` marks it with Java's trusted-certificate attribute, as keytool would)."""
    key = serialization.load_pem_private_key(certs.server.key.read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    server = x509.load_der_x509_certificate(certs.server.der)
    ca = x509.load_der_x509_certificate(certs.ca_der)
    encryption = serialization.BestAvailableEncryption(password.encode())
    keystore, truststore = directory / "server.keystore.p12", directory / "truststore.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(b"server", key, server, [ca], encryption))
    truststore.write_bytes(pkcs12.serialize_java_truststore([pkcs12.PKCS12Certificate(ca, b"ca")], encryption))
    return JavaStores(keystore, truststore, password)

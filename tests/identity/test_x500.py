"""``rfc2253_name``: hand-checked names for the subjects of ``tests/identity/certs.py`` (the same names JDK 17
prints: ``tests/kafka/test_identity_java.py`` compares every one with Java), and the escaping rules as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.identity.x500 import ESCAPED, escape_value, java_utf8, rfc2253_name
from tests.identity.certs import CertificateSet, write_certificates

EXPECTED = {
    "plain": "CN=alice",
    "duke": "CN=Duke,OU=ServiceUsers,O=Org,C=US",
    "comma": "CN=Tkac\\, Adam,OU=ITZ,DC=cz",
    "all_specials": 'CN=\\,\\=\\+\\<\\>\\#\\;\\"\\\\',
    "hash_leading": "CN=\\#hash",
    "spaces": "CN=\\ \\ both\\ \\ ,O=\\ lead",
    "space_runs": "CN=a\\\\ \t\\ ,O=\\ \\\r\\ \\00 x\\ \\\r\\ ",
    "control": "OU=\\\rtab\tnewline\n,CN=nul\\00cr\\\r",
    "multi_valued": "CN=bob+OU=x\\+y+UID=b123,O=Org",
    "email": "1.2.840.113549.1.9.1=#160d6d406578616d706c652e636f6d,CN=mail",
    "serial_title": "CN=titled,2.5.4.12=#0c04426f7373,2.5.4.5=#13053132333435",
    "japanese": "CN=山田,O=日本",
    "bmp": "CN=\\00J\\00o\\00s\\00\ufffd,O=\\00B\\00m\\00p",
    "bmp_bytes": "CN=😀\ufffd\ufffd\ufffd\ufffdA\ufffd\ufffd\ufffd\ufffd",
    "teletex": "CN=télé,O=tele",
    "visible_cn": "CN=#1a0776697369626c65",
    "numeric_ou": "CN=numeric,OU=#120430313233",
    "unknown_oid": "CN=unknown,1.2.3.4.5=#0c0a6f64642c2076616c7565",
    "empty": "",
    "empty_cn": "CN=",
    "space_only": "CN=\\ ",
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return write_certificates(tmp_path_factory.mktemp("certs"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_names_as_java_writes_them(certs: CertificateSet, name: str) -> None:
    assert rfc2253_name(certs.clients[name].der) == EXPECTED[name]


def test_the_fixture_has_enough_tricky_subjects(certs: CertificateSet) -> None:
    assert len(certs.clients) >= 24
    for issued in certs.clients.values():
        assert issued.cert.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
        assert b"PRIVATE KEY" in issued.key.read_bytes()


def test_server_and_ca(certs: CertificateSet) -> None:
    assert rfc2253_name(certs.server.der) == "CN=localhost"
    assert rfc2253_name(certs.ca_der) == "CN=kafkaguard test CA,O=kafkaguard tests"


def test_not_a_certificate() -> None:
    with pytest.raises(ValueError):
        rfc2253_name(b"\x30\x03\x02\x01\x01")


def test_java_utf8_differs_from_python_for_encoded_surrogates() -> None:
    assert java_utf8(b"\xed\xa0\x80") == "\ufffd"
    assert b"\xed\xa0\x80".decode("utf-8", "replace") == "\ufffd" * 3
    assert java_utf8(b"\xed\xa0A") == "\ufffdA"
    assert java_utf8(b"\xe2\x82") == "\ufffd"
    assert java_utf8(b"\xf0\x9f\x98A") == "\ufffdA"
    assert java_utf8("é日😀".encode()) == "é日😀"


@given(st.binary(max_size=12))
def test_java_utf8_agrees_with_python_on_valid_and_ascii_input(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        assert "\ufffd" in java_utf8(data)
    else:
        assert java_utf8(data) == text


@given(st.text())
def test_escaping_can_be_undone(text: str) -> None:
    escaped = escape_value(text)
    out, i = [], 0
    while i < len(escaped):
        if escaped.startswith("\\00", i):
            out.append("\x00")
            i += 3
        elif escaped[i] == "\\":
            assert escaped[i + 1] in ESCAPED or escaped[i + 1] in " \r"
            out.append(escaped[i + 1])
            i += 2
        else:
            assert escaped[i] not in ESCAPED and escaped[i] != "\x00"
            out.append(escaped[i])
            i += 1
    assert "".join(out) == text


@given(st.text(alphabet=" \rab,"))
def test_ends_are_never_a_bare_space(text: str) -> None:
    escaped = escape_value(text)
    if escaped:
        assert escaped[0] not in " \r"
        assert escaped[-1] not in " \r" or escaped[-2] == "\\"

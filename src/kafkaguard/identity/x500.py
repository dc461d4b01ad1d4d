"""A certificate's subject as Java writes it: ``X509Certificate.getSubjectX500Principal().getName()``, the RFC 2253
string Kafka's ``DefaultKafkaPrincipalBuilder`` gives ``ssl.principal.mapping.rules`` (``ssl_mapping``).

::

    rfc2253_name(der)  # a subject of three RDNs, in DER order: C=GB, O="Sue, Grabbit and Runn", CN="L. Eagle"
    # → 'CN=L. Eagle,O=Sue\\, Grabbit and Runn,C=GB'

Java's rules (``sun.security.x509.X500Name``/``RDN``/``AVA``, ``toRFC2253String`` with no extra keywords), checked
against JDK 17 by ``tests/kafka/test_identity_java.py``:

* RDNs in the reverse of their DER order, joined by ``,``; the attributes of a multi-valued RDN in their DER order,
  joined by ``+``. An empty subject is the empty string.
* Only ``CN C L ST O OU STREET DC UID`` have keywords. Any other attribute (emailAddress, serialNumber, title, an
  unknown OID …) is written ``<dotted OID>=#<hex>``: the lowercase hex of the value's whole DER (tag, length,
  content). So is a keyword attribute whose value is not one of Java's "DER strings" (PrintableString, T61String,
  IA5String, GeneralString, BMPString, UTF8String): ``CN=#1a0776697369626c65`` for a VisibleString.
* A string value's *content bytes are decoded as UTF-8 whatever the string type* (Java's
  ``new String(getDataBytes(), "UTF8")``): a BMPString ``Bob`` is ``\\00B\\00o\\00b``, malformed bytes become U+FFFD.
  Then ``, = + < > # ; " \\`` get a backslash, U+0000 becomes ``\\00``, everything else (control characters,
  non-ASCII) stays as it is; finally every space or carriage return of the run that starts the value, and of the
  run that ends it, gets a backslash.

Worked example, one value: the UTF8String ``"  a+b "`` → ``"  a\\+b "`` (escapes) → ``"\\ \\ a\\+b\\ "`` (ends).
"""

from __future__ import annotations

# asn1crypto ships no type information; its classes are Any to mypy (hence the ignores on the subclasses below).
from asn1crypto import core  # type: ignore[import-untyped]
from asn1crypto import x509 as asn1_x509
from cryptography import x509

#: Java's RFC 2253 keywords (``AVAKeyword``, RFC2253 column), by OID.
KEYWORDS: dict[str, str] = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}

#: Universal tags of the values Java writes as strings (``AVA.isDerString``, non-canonical): PrintableString,
#: T61String, IA5String, GeneralString, BMPString, UTF8String.
DER_STRING_TAGS = frozenset({19, 20, 22, 27, 30, 12})

#: Characters that get a backslash wherever they are (``AVA.escapedDefault`` for RFC 2253).
ESCAPED = frozenset(',=+<>#;"\\')
#: Characters that get a backslash wherever they start or end a value (every one of a run, after the escapes above).
ESCAPED_AT_ENDS_TEXT = " \r"


class _AttributeTypeAndValue(core.Sequence):  # type: ignore[misc]  # subclasses untyped asn1crypto
    """An AVA whose value is kept as it is (``Any``): its DER is written as hex, so it must not be re-encoded."""

    _fields = [("type", core.ObjectIdentifier), ("value", core.Any)]  # noqa: RUF012 - asn1crypto's schema


class _RelativeDistinguishedName(core.SetOf):  # type: ignore[misc]  # subclasses untyped asn1crypto
    _child_spec = _AttributeTypeAndValue


class _RDNSequence(core.SequenceOf):  # type: ignore[misc]  # subclasses untyped asn1crypto
    _child_spec = _RelativeDistinguishedName


def rfc2253_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` writes it.

    :raises ValueError: the bytes are not a certificate (cryptography's error).
    """
    certificate = x509.load_der_x509_certificate(certificate_der)
    tbs = asn1_x509.TbsCertificate.load(certificate.tbs_certificate_bytes)
    return rfc2253_from_name_der(tbs["subject"].chosen.dump())


def rfc2253_from_name_der(rdn_sequence_der: bytes) -> str:
    """An X.501 ``RDNSequence`` (a certificate's subject or issuer, DER) in Java's RFC 2253 form."""
    rdns = _RDNSequence.load(rdn_sequence_der)
    return ",".join("+".join(_ava(ava) for ava in rdn) for rdn in reversed(list(rdns)))


def _ava(ava: _AttributeTypeAndValue) -> str:
    oid: str = ava["type"].dotted
    der: bytes = ava["value"].dump()
    keyword = KEYWORDS.get(oid)
    value = core.load(der)  # the value as its own tag says (a universal string type, or whatever else it is)
    if keyword is None or value.class_ != 0 or value.tag not in DER_STRING_TAGS:
        return f"{keyword or oid}=#{der.hex()}"
    contents: bytes = value.contents
    return f"{keyword}={escape_value(java_utf8(contents))}"


def escape_value(text: str) -> str:
    """A string value escaped as Java's ``AVA.toRFC2253String`` escapes it (see the module docstring)."""
    escaped = "".join("\\" + c if c in ESCAPED else "\\00" if c == "\x00" else c for c in text)
    body = escaped.lstrip(ESCAPED_AT_ENDS_TEXT)
    lead = escaped[: len(escaped) - len(body)]
    core_text = body.rstrip(ESCAPED_AT_ENDS_TEXT)
    trail = body[len(core_text) :]
    return "".join("\\" + c for c in lead) + core_text + "".join("\\" + c for c in trail)


_REPLACEMENT = "\ufffd"


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def java_utf8(data: bytes) -> str:
    """``new String(data, "UTF8")`` of JDK 17: UTF-8 with U+FFFD for malformed input, counted as Java counts.

    Python's ``decode("utf-8", "replace")`` differs in one family: an encoded surrogate (``ED A0 80``) is one U+FFFD
    in Java and three in Python, ``ED A0 41`` is one plus ``A`` (Python: two), ``ED A0`` at the end one (Python: two).
    Everything else is the same; this follows JDK 17's ``String.decodeUTF8_UTF16`` step by step anyway.
    """
    out: list[str] = []
    n, i = len(data), 0
    while i < n:
        b1 = data[i]
        i += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif b1 >> 5 == 0b110 and b1 & 0x1E:  # 2 bytes (C0 and C1 are never leads)
            if i < n and _continuation(data[i]):
                out.append(chr((b1 & 0x1F) << 6 | data[i] & 0x3F))
                i += 1
            else:
                out.append(_REPLACEMENT)  # the next byte, if any, is read again
        elif b1 >> 4 == 0b1110:  # 3 bytes
            if i + 1 < n:
                b2, b3 = data[i], data[i + 1]
                if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2) or not _continuation(b3):
                    out.append(_REPLACEMENT)
                    # Java's malformed3: the replacement covers b1, or b1 and b2 when b2 could continue b1
                    i += 0 if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2) else 1
                else:
                    code = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | b3 & 0x3F
                    out.append(_REPLACEMENT if 0xD800 <= code <= 0xDFFF else chr(code))
                    i += 2
            elif i < n and ((b1 == 0xE0 and data[i] & 0xE0 == 0x80) or not _continuation(data[i])):
                out.append(_REPLACEMENT)  # b1 alone; data[i] is read again
            else:
                out.append(_REPLACEMENT)  # a cut sequence at the end: one replacement
                break
        elif b1 >> 3 == 0b11110:  # 4 bytes (F5 … F7 included: Java finds them out of range)
            if i + 2 < n:
                b2, b3, b4 = data[i], data[i + 1], data[i + 2]
                code = (b1 & 0x07) << 18 | (b2 & 0x3F) << 12 | (b3 & 0x3F) << 6 | b4 & 0x3F
                if all(map(_continuation, (b2, b3, b4))) and 0x10000 <= code <= 0x10FFFF:
                    out.append(chr(code))
                    i += 3
                else:
                    out.append(_REPLACEMENT)
                    i += _malformed4(b1, b2, b3) - 1
            elif b1 > 0xF4 or (i < n and _malformed4_2(b1, data[i])):
                out.append(_REPLACEMENT)
            else:
                out.append(_REPLACEMENT)
                i += 1
                if i < n and not _continuation(data[i]):
                    continue
                break
        else:
            out.append(_REPLACEMENT)
    return "".join(out)


def _malformed4_2(b1: int, b2: int) -> bool:
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _continuation(b2)


def _malformed4(b1: int, b2: int, b3: int) -> int:
    """How many bytes Java's one replacement covers for a bad 4-byte sequence (``malformedN(src, sp, 4)``)."""
    if b1 > 0xF4 or _malformed4_2(b1, b2):
        return 1
    return 2 if not _continuation(b3) else 3

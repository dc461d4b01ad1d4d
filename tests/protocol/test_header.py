"""Request headers v1/v2, including unknown tagged fields (which kio would refuse) and hostile input."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioHeaderV2
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from kafkaguard.protocol.errors import HeaderError
from kafkaguard.protocol.header import decode_header, peek_header


def kio_bytes(flexible: bool, client_id: str | None) -> bytes:
    cls = KioHeaderV2 if flexible else KioHeaderV1
    header = cls(request_api_key=i16(29), request_api_version=i16(3), correlation_id=i32(42), client_id=client_id)
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, header)
    return buffer.getvalue()


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("client_id", [None, "", "rdkafka", "ünïcode-client"])
def test_decodes_what_kio_encodes(flexible: bool, client_id: str | None):
    data = kio_bytes(flexible, client_id) + b"BODY"
    header, offset = decode_header(data, flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (29, 3, 42, client_id)
    assert data[offset:] == b"BODY"


def test_unknown_tagged_fields_are_skipped():
    fixed = struct.pack(">hhih", 29, 3, 7, 3) + b"cli"
    tagged = bytes([2]) + bytes([5, 3]) + b"abc" + bytes([9, 0])
    header, offset = decode_header(fixed + tagged + b"BODY", flexible=True)
    assert header.client_id == "cli"
    assert offset == len(fixed + tagged)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x1d\x00",  # shorter than the fixed part
        struct.pack(">hhih", 29, 3, 7, 50) + b"short",  # client id past the end
        struct.pack(">hhih", 29, 3, 7, -2),  # invalid length
        struct.pack(">hhih", 29, 3, 7, 2) + b"\xff\xfe",  # not UTF-8
        struct.pack(">hhih", 29, 3, 7, -1) + b"\x01\x05\x30",  # tagged field past the end
        struct.pack(">hhih", 29, 3, 7, -1) + b"\xff\xff\xff\xff\xff\xff",  # overlong varint
        struct.pack(">hhih", 29, 3, 7, -1) + b"\x7f",  # absurd tagged-field count
    ],
)
def test_malformed_headers_raise_header_error(data: bytes):
    with pytest.raises(HeaderError):
        decode_header(data, flexible=True)


def test_peek_header_reads_key_version_and_correlation_id():
    assert peek_header(struct.pack(">hhi", 18, 99, 1234)) == (18, 99, 1234)
    with pytest.raises(HeaderError):
        peek_header(b"\x00")


@given(st.binary(max_size=64), st.booleans())
def test_arbitrary_bytes_decode_or_raise_header_error(data: bytes, flexible: bool):
    try:
        header, offset = decode_header(data, flexible)
    except HeaderError:
        return
    assert 0 < offset <= len(data)
    assert header.client_id is None or isinstance(header.client_id, str)

"""``protocol.varint``: Kafka's unsigned varints, read and written (moved here from ``test_header`` with the reader,
which header, lengths and the proxy's answer walks now share)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.protocol.errors import TaggedFieldsError, VarintTooLong
from kafkaguard.protocol.varint import skip_tagged_fields, uvarint, uvarint_bytes


@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_uvarint_round_trip(value: int):
    out = bytearray()
    v = value
    while True:
        byte = v & 0x7F
        v >>= 7
        out.append(byte | (0x80 if v else 0))
        if not v:
            break
    assert uvarint(bytes(out), 0) == (value, len(out))


def test_the_worked_example_of_the_docstring():
    assert uvarint(b"\x81\xde\xa0\xcb\x05", 0) == (1_500_000_001, 5)
    assert uvarint_bytes(1_500_000_001) == b"\x81\xde\xa0\xcb\x05"


def test_past_the_end_is_an_index_error_and_beyond_5_bytes_too_long():
    with pytest.raises(IndexError):
        uvarint(b"\x81\xde", 0)
    with pytest.raises(VarintTooLong, match="a varint longer than 5 bytes"):
        uvarint(b"\xff\xff\xff\xff\xff\x01", 0)


def test_tagged_fields_are_skipped_to_the_end_of_their_section():
    section = b"\x02" + b"\x00\x03abc" + b"\x07\x00"  # two fields: tag 0 of 3 bytes, tag 7 empty
    assert skip_tagged_fields(section + b"rest", 0, len(section), most=2) == len(section)
    assert skip_tagged_fields(b"\x00", 0, 1, most=0) == 1


def test_too_many_tagged_fields_or_one_past_the_end_is_refused():
    with pytest.raises(TaggedFieldsError, match="3 tagged fields in one section"):
        skip_tagged_fields(b"\x03", 0, 1, most=2)
    with pytest.raises(TaggedFieldsError, match="runs past its end"):
        skip_tagged_fields(b"\x01\x00\x05ab", 0, 5, most=2)
    with pytest.raises(IndexError):  # a count cut off
        skip_tagged_fields(b"\x01\x00", 0, 2, most=2)

"""The length check agrees with kio on every honest request and refuses hostile ones before kio allocates.

Agreement is checked on every request schema kio generates (every API and version, not only those the server
offers today: the proxy will decode more), with kio's own hypothesis strategies and kio's writer: the check must
walk exactly to the end of what kio wrote, so it never refuses a request kio would read.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.static.primitive import Records

from kafkaguard.protocol.lengths import MAX_TAGGED_FIELDS, LengthError, TooManyItemsError, check_body
from tests.server.hostile import HOSTILE, encode_length, first_length, hostile_bodies, uvarint

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))  # kio ships no strategy for record batches


def every_request_schema() -> list[type[Any]]:
    schemas = []
    for api_key in range(100):
        for version in range(30):
            try:
                schemas.append(load_request_schema(api_key, version))
            except Exception:  # noqa: BLE001, S112 - kio raises several types for "no such API or version"
                continue
    return schemas


SCHEMAS = every_request_schema()


def test_every_schema_is_covered():
    assert len(SCHEMAS) > 250  # every API and version kio knows


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.__api_key__}v{s.__version__}")
@settings(max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_check_walks_exactly_what_kio_writes(schema: type[Any], data: st.DataObject):
    body = data.draw(st.from_type(schema))
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, body)
    encoded = buffer.getvalue()
    check_body(schema, encoded, 0)
    check_body(schema, b"header" + encoded + b"trailing", 6)  # offsets and trailing bytes are honoured
    if encoded:
        with pytest.raises(LengthError):
            check_body(schema, encoded[:-1], 0)  # every body ends with a field the check needs


def test_the_worked_example_of_the_docstring():
    schema = load_request_schema(3, 12)
    assert uvarint(1_500_000_001) == b"\x81\xde\xa0\xcb\x05"
    with pytest.raises(LengthError, match=r"topics: 1500000000 elements of at least 18 bytes, 0 bytes left"):
        check_body(schema, b"\x81\xde\xa0\xcb\x05", 0)


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.__api_key__}v{s.__version__}")
def test_hostile_first_lengths_are_refused(schema: type[Any]):
    for label, body in hostile_bodies(schema):
        if label == "empty body":
            continue
        with pytest.raises(LengthError):
            check_body(schema, body, 0)


def test_fixed_size_arrays_are_checked_in_one_step():
    """DeleteTopics v1's topic names are strings, CreateTopics' broker ids int32: a count of int32s larger than
    the bytes left is refused although each element is fixed-size."""
    schema = load_request_schema(19, 4)  # CreateTopics v4: topics[assignments[broker_ids: int32[]]]
    prefix, encoding = first_length(schema) or (b"", "")
    assert encoding == "int32"
    topic = b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x01"  # name "t", 1 partition, replication factor 1
    assignment = b"\x00\x00\x00\x00" + encode_length(1_000_000, "int32")  # partition 0, 1M broker ids
    body = prefix + encode_length(1, "int32") + topic + encode_length(1, "int32") + assignment
    with pytest.raises(LengthError, match="broker_ids: 1000000 elements of at least 4 bytes"):
        check_body(schema, body, 0)


@pytest.mark.parametrize("value", HOSTILE)
def test_tagged_field_sizes_are_checked(value: int):
    schema = load_request_schema(18, 3)  # ApiVersions v3: two compact strings, then tagged fields
    body = b"\x01\x01" + b"\x01" + b"\x05" + uvarint(value % 2**32)  # one unknown tag 5 of a hostile size
    with pytest.raises(LengthError, match="tag 5"):
        check_body(schema, body, 0)


def test_null_in_a_non_nullable_field_is_refused_as_kafka_refuses_it():
    """DeleteTopics v6's topics array is not nullable: kio would hand the handler None (found by the fuzz test)."""
    schema = load_request_schema(20, 6)
    with pytest.raises(LengthError, match="topics: non-nullable field was serialized as null"):
        check_body(schema, b"\x00" + b"\x00\x00\x00\x00" + b"\x00", 0)  # compact null, timeout_ms, no tags
    metadata = load_request_schema(3, 12)  # its topics array is nullable (null = all topics)
    check_body(metadata, b"\x00" + b"\x01" + b"\x00" + b"\x00", 0)


def test_items_beyond_the_limit_are_refused_before_they_are_walked():
    """DescribeGroups v5 with ~1 million empty names in 1 MiB froze every other client for 10-21 s (issue 24): the
    count is refused before the first element is walked, whatever the bytes hold (fails without the item budget)."""
    schema = load_request_schema(15, 5)  # DescribeGroups v5: groups (compact string array), include_ops, tags
    names = 200_000
    body = uvarint(names + 1) + b"\x01" * names + b"\x00" + b"\x00"
    check_body(schema, body, 0, max_items=names)  # honest at the limit
    with pytest.raises(TooManyItemsError, match=r"groups: more than 10000 items in one request"):
        check_body(schema, body, 0, max_items=10_000)
    with pytest.raises(TooManyItemsError):
        check_body(schema, body, 0)  # the default limit


def test_items_of_every_array_count_together():
    """Nested arrays share one budget: OffsetFetch v7's 2 topics of 6,000 int32 partitions each are 12,002 items."""
    schema = load_request_schema(9, 7)  # OffsetFetch v7: group_id, topics[name, partition_indexes int32[]], stable
    topic = b"\x02t" + uvarint(6_000 + 1) + b"\x00\x00\x00\x01" * 6_000 + b"\x00"
    body = b"\x02g" + uvarint(2 + 1) + topic + topic + b"\x00" + b"\x00"
    check_body(schema, body, 0, max_items=12_002)
    with pytest.raises(TooManyItemsError):
        check_body(schema, body, 0, max_items=12_001)


def test_tagged_fields_beyond_the_limit_are_refused():
    """135k empty unknown tagged fields in a 512 KiB ApiVersions v3 cost 0.2 s to walk before login (issue 24)."""
    schema = load_request_schema(18, 3)
    fields = b"".join(uvarint(100 + i) + b"\x00" for i in range(MAX_TAGGED_FIELDS))
    check_body(schema, b"\x01\x01" + uvarint(MAX_TAGGED_FIELDS) + fields, 0)
    many = 135_000
    body = b"\x01\x01" + uvarint(many) + b"\x05\x00" * many
    with pytest.raises(LengthError, match=rf"{many} tagged fields, more than the {MAX_TAGGED_FIELDS} allowed"):
        check_body(schema, body, 0)

"""``proxy.produce_request``: the walk reads what kio's decoding reads — transactional id, acks, each topic's name and
partition indexes, the first batches' transactional bit — for every offered version, and refuses what kio refuses
(truncated and corrupted requests), bounded by ``max_items`` whatever the counts claim."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import build, nested
from kafkaguard.protocol.codec import decode_request, decode_request_head, request_schema
from kafkaguard.protocol.errors import ProtocolError
from kafkaguard.protocol.lengths import TooManyItemsError
from kafkaguard.proxy.produce_request import MalformedProduce, walk_produce_request
from kafkaguard.proxy.versions import CAPS
from kafkaguard.proxy.wire import encode_request

LOW, HIGH = CAPS[ApiKey.PRODUCE]
VERSIONS = {ApiKey.PRODUCE: (LOW, HIGH)}
MAX_ITEMS = 1_000
MS = datetime.timedelta(milliseconds=1)


def batch(*, transactional: bool, magic: int = 2, size: int = 61) -> bytes:
    """A record batch's first bytes as the walk reads them: magic at 16, attributes (int16) at 21."""
    head = bytearray(max(size, 0))
    if size > 23:
        head[16] = magic
        struct.pack_into(">h", head, 21, 0x10 if transactional else 0)
    return bytes(head)


records = st.one_of(
    st.none(),
    st.builds(batch, transactional=st.booleans(), magic=st.sampled_from([1, 2]), size=st.integers(0, 80)),
)
topic_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)


@st.composite
def produce_requests(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.integers(LOW, HIGH))
    cls = request_schema(ApiKey.PRODUCE, version)
    topic_cls, partition_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    topics = tuple(
        build(topic_cls, name=draw(topic_names), partition_data=tuple(
            build(partition_cls, index=draw(st.integers(-(2**31), 2**31 - 1)), records=draw(records))
            for _ in range(draw(st.integers(0, 4)))))
        for _ in range(draw(st.integers(0, 4)))
    )  # fmt: skip
    body = build(cls, transactional_id=draw(st.none() | topic_names), acks=draw(st.sampled_from([-1, 0, 1])),
                 timeout=datetime.timedelta(seconds=30), topic_data=topics)  # fmt: skip
    return version, encode_request(ApiKey.PRODUCE, version, 7, "client", body)


def kio_view(payload: bytes) -> tuple[Any, ...]:
    """What the handler read of kio's decoding before the walk (``has_transactional_records`` included)."""
    body: Any = decode_request(payload, VERSIONS, max_items=MAX_ITEMS).body
    transactional = False
    for topic in body.topic_data:
        for partition in topic.partition_data:
            r = partition.records
            if r and len(r) > 22 and r[16] >= 2 and struct.unpack_from(">h", r, 21)[0] & 0x10:
                transactional = True
    topics = tuple((t.name, tuple(p.index for p in t.partition_data)) for t in body.topic_data)
    return body.transactional_id, body.acks, topics, transactional


def walked_view(payload: bytes) -> tuple[Any, ...]:
    head = decode_request_head(payload, VERSIONS)
    view = walk_produce_request(payload, head.body_at, head.header.api_version, max_items=MAX_ITEMS)
    return view.transactional_id, view.acks, tuple((t.name, t.partitions) for t in view.topics), view.transactional


@settings(max_examples=300, deadline=None)
@given(produce_requests())
def test_the_walk_reads_what_kio_decodes(request: tuple[int, bytes]) -> None:
    _version, payload = request
    assert walked_view(payload) == kio_view(payload)


@settings(max_examples=300, deadline=None)
@given(produce_requests(), st.data())
def test_a_truncated_or_corrupted_request_the_walk_accepts_is_one_kio_reads_alike(
    request: tuple[int, bytes], data: st.DataObject
) -> None:
    _version, payload = request
    head = decode_request_head(payload, VERSIONS).body_at
    if data.draw(st.booleans()):
        damaged = payload[: data.draw(st.integers(head, len(payload) - 1))]
    else:
        at = data.draw(st.integers(head, len(payload) - 1))
        damaged = payload[:at] + bytes([data.draw(st.integers(0, 255))]) + payload[at + 1 :]
    try:
        expected = kio_view(damaged)
    except ProtocolError:
        with pytest.raises(ProtocolError):
            walked_view(damaged)
        return
    try:
        walked = walked_view(damaged)
    except ProtocolError:
        return  # stricter than kio (a null topic name, a tagged-field bound): refusing closes the connection
    assert walked == expected


def test_counts_beyond_the_bytes_or_the_item_limit_are_refused_without_work() -> None:
    version = HIGH
    empty = build(request_schema(ApiKey.PRODUCE, version), transactional_id=None, acks=-1, timeout=MS, topic_data=())
    payload = encode_request(ApiKey.PRODUCE, version, 7, "c", empty)
    head = decode_request_head(payload, VERSIONS).body_at
    # the topic count (compact: n + 1) claims 2^28 topics in a request of a few bytes
    claims = payload[: head + 1 + 6] + b"\x80\x80\x80\x80\x01"
    with pytest.raises(TooManyItemsError):
        walk_produce_request(claims, head, version, max_items=MAX_ITEMS)
    with pytest.raises(MalformedProduce):
        walk_produce_request(claims, head, version, max_items=2**30)


def test_the_whole_request_is_decoded_on_demand() -> None:
    version = 9
    cls = request_schema(ApiKey.PRODUCE, version)
    topic = build(nested(cls, "TopicProduceData"), name="t", partition_data=(
        build(nested(cls, "PartitionProduceData"), index=3, records=batch(transactional=False)),))  # fmt: skip
    body = build(cls, transactional_id=None, acks=-1, timeout=MS, topic_data=(topic,))
    payload = encode_request(ApiKey.PRODUCE, version, 7, "c", body)
    head = decode_request_head(payload, VERSIONS)
    view = walk_produce_request(payload, head.body_at, version, max_items=MAX_ITEMS)
    whole = asyncio.run(view.decoded())
    assert whole == decode_request(payload, VERSIONS).body
    assert bytes(whole.topic_data[0].partition_data[0].records or b"") == batch(transactional=False)

"""``proxy.fetch_walk``, the streaming walk of a Fetch v13-v17 answer, held to kio and to the generic walk
(``lengths.tagged_fields_at``): for every answer hypothesis makes, fed in random windows, it finds the top-level
tagged section where they do, passes every other byte on unchanged (records of ``OPAQUE_FROM`` bytes or more
unread), and its rewrite of ``node_endpoints`` reads back, with kio, as the proxy's addresses in the same number of
bytes — or as none when they cannot fit. Truncated and corrupted answers are ``UpstreamProtocolError``, never
another exception."""

from __future__ import annotations

import dataclasses
import gc
import random
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.protocol.lengths import tagged_fields_at
from kafkaguard.proxy.fetch_walk import (
    OPAQUE_FROM,
    FetchAnswerWalk,
    NodeEndpoint,
    node_endpoints_in,
    tail_with,
)
from kafkaguard.proxy.messages import FETCH
from kafkaguard.proxy.walks import NEED, PASS, TAIL
from kafkaguard.proxy.wire import UpstreamProtocolError, decode_response
from tests.proxy.fetch_answers import readable, tags_of
from tests.proxy.memory_upstream import entity
from tests.server.hostile import hostile_bodies

st.register_type_strategy(Records, st.binary(max_size=16).map(Records))
HEADER = 5  # correlation id, then an empty tag section
SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
#: The walk's layout is every version from v13 (topics by id; v16 added ``node_endpoints``): passthrough walks them.
VERSIONS = [13, 14, 15, 16, 17]
ENDPOINT_VERSIONS = [16, 17]
REFUSED = 29  # TOPIC_AUTHORIZATION_FAILED


@st.composite
def answers(draw: st.DrawFn, version: int) -> bytes:
    """A response payload (correlation id first); some partitions' records are large enough to pass opaque, and
    some are the broker's refusal (TOPIC_AUTHORIZATION_FAILED)."""
    body = draw(st.from_type(response_schema(ApiKey.FETCH, version)))
    sizes = st.one_of(st.none(), st.integers(0, 40), st.integers(OPAQUE_FROM - 2, OPAQUE_FROM + 300))
    topics = []
    for topic in body.responses:
        partitions = []
        for partition in topic.partitions:
            size = draw(sizes)
            records = None if size is None else Records(bytes([draw(st.integers(0, 255))]) * size)
            code = ErrorCode(REFUSED) if draw(st.booleans()) else partition.error_code
            partitions.append(dataclasses.replace(partition, records=records, error_code=code))
        topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
    body = dataclasses.replace(body, responses=tuple(topics))
    return encode_response(ApiKey.FETCH, version, 7, body)[4:]


def drive(
    payload: bytes, version: int, rng: random.Random, refused: list[tuple[bytes, int]] | None = None
) -> tuple[bytes, int, int]:
    """Walk ``payload`` as a relay does, windows of random sizes (at least what is asked); returns the bytes passed
    on (structure and opaque), where the tail begins, and how many bytes passed opaque."""
    body = payload[4:]
    walk, at, passed, opaque = FetchAnswerWalk(len(body), version, refused), 0, bytearray(), 0
    step = walk.step(body[: rng.choice([0, 0, rng.randrange(64)])])
    while True:
        kind, a, b = step
        if kind == NEED:
            assert 0 < a <= len(body) - at, "never past the answer's end"
            step = walk.step(body[at : at + a + rng.choice([0, rng.randrange(100)])])
        elif kind == PASS:
            assert a + b > 0
            passed += body[at : at + a + b]
            at += a + b
            opaque += b
            step = walk.step(body[at : at + rng.choice([0, rng.randrange(100)])])
        else:
            assert kind == TAIL and at + a + b == len(body)
            passed += body[at : at + a]
            return bytes(passed), 4 + at + a, opaque


def opaque_records(payload: bytes, version: int) -> int:
    answer = FETCH.response(decode_response(ApiKey.FETCH, version, payload))
    sizes = (len(p.records) for t in answer.responses for p in t.partitions if p.records is not None)
    return sum(size for size in sizes if size >= OPAQUE_FROM)


def test_the_worked_example_of_the_docstring():
    cls = response_schema(ApiKey.FETCH, 16)
    partition = entity(nested(cls, "PartitionData"), records=Records(b"r" * 1048576))
    topic = entity(nested(cls, "FetchableTopicResponse"), partitions=(partition,))
    payload = encode_response(ApiKey.FETCH, 16, 7, entity(cls, responses=(topic,)))[4:]
    walk = FetchAnswerWalk(len(payload) - 4, 16)
    assert walk.step(b"") == (NEED, 64, 0)
    assert walk.step(payload[4 : 4 + 4096]) == (PASS, 67, 1048576)
    assert walk.step(b"") == (NEED, 3, 0)
    assert walk.step(b"\x00\x00\x00") == (TAIL, 2, 1)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data())
def test_the_tail_where_the_generic_walk_finds_it_and_every_byte_passed_unchanged(version: int, data: st.DataObject):
    payload = data.draw(answers(version))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    passed, tail, opaque = drive(payload, version, rng)
    schema = response_schema(ApiKey.FETCH, version)
    assert tail == tagged_fields_at(schema, payload, HEADER)
    assert passed == payload[4:tail]
    assert opaque == opaque_records(payload, version), "large records pass unread, small ones in the window"


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data())
def test_the_partitions_the_broker_refused_are_collected_as_kio_reads_them(version: int, data: st.DataObject):
    payload = data.draw(answers(version))
    refused: list[tuple[bytes, int]] = []
    drive(payload, version, random.Random(data.draw(st.integers(0, 2**32))), refused)
    answer: Any = decode_response(ApiKey.FETCH, version, payload)  # v13+: topics by id
    ids = [bytes(16) if t.topic_id is None else t.topic_id.bytes for t in answer.responses]  # kio: zeros are None
    expected = [(i, REFUSED) for i, t in zip(ids, answer.responses, strict=True) for p in t.partitions
                if p.error_code == REFUSED]  # fmt: skip
    assert refused == expected


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data())
def test_every_truncation_before_the_tail_is_an_error(version: int, data: st.DataObject):
    payload = data.draw(answers(version))
    cut = data.draw(st.integers(4, tagged_fields_at(response_schema(ApiKey.FETCH, version), payload, HEADER)))
    with pytest.raises(UpstreamProtocolError, match=f"malformed Fetch v{version} response"):
        drive(payload[:cut], version, random.Random(cut))


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data())
def test_a_corrupted_answer_is_an_error_or_a_tail_inside_it(version: int, data: st.DataObject):
    payload = bytearray(data.draw(answers(version)))
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(4, len(payload) - 1))] = data.draw(st.integers(0, 255))
    try:
        _passed, tail, _opaque = drive(bytes(payload), version, random.Random(len(payload)))
        endpoints = node_endpoints_in(bytes(payload[tail:]))
    except UpstreamProtocolError:
        return
    assert HEADER <= tail < len(payload)
    if endpoints is not None:
        rewritten = tail_with(bytes(payload[tail:]), [dataclasses.replace(e, host="proxy") for e in endpoints])
        assert len(rewritten) == len(payload) - tail


@pytest.mark.parametrize("version", ENDPOINT_VERSIONS)
@SETTINGS
@given(data=st.data(), host=st.text(min_size=1, max_size=30))
def test_rewritten_endpoints_read_back_as_the_proxys_or_as_none(version: int, data: st.DataObject, host: str):
    """The same length; everything before the tail unchanged; kio reads the proxy's endpoints, or none when they
    could not fit — never an upstream host."""
    payload = data.draw(answers(version))
    tail = tagged_fields_at(response_schema(ApiKey.FETCH, version), payload, HEADER)
    upstream = node_endpoints_in(payload[tail:])
    if upstream is None:
        assert payload[tail] == 0
        return
    proxied = [NodeEndpoint(e.node_id, host, 20000 + i, e.rack) for i, e in enumerate(upstream)]
    rewritten = payload[:tail] + tail_with(payload[tail:], proxied)
    assert len(rewritten) == len(payload)
    before: Any = decode_response(ApiKey.FETCH, version, payload)  # v16+, which has node_endpoints
    after: Any = decode_response(ApiKey.FETCH, version, readable(rewritten, version))
    assert dataclasses.replace(after, node_endpoints=()) == dataclasses.replace(before, node_endpoints=())
    read_back = [(int(e.node_id), e.host, int(e.port), e.rack) for e in after.node_endpoints]
    gap = len(payload) - tail - len(tail_of(proxied))
    if 0 in [t for t, _ in tags_of(rewritten[tail:])]:
        assert read_back == [(e.node_id, e.host, e.port, e.rack) for e in proxied]
    else:  # blanked (``readable`` checked its bytes are zeros): only when they cannot fit
        assert gap < 0 or gap == 1


def tail_of(endpoints: list[NodeEndpoint]) -> bytes:
    """The smallest section naming ``endpoints`` (one tag, no filler)."""
    cls = response_schema(ApiKey.FETCH, 16)
    endpoint_cls = nested(cls, "NodeEndpoint")
    body = entity(cls, node_endpoints=tuple(entity(endpoint_cls, node_id=e.node_id, host=e.host, port=e.port,
                                                   rack=e.rack) for e in endpoints))  # fmt: skip
    payload = encode_response(ApiKey.FETCH, 16, 7, body)[4:]
    return payload[tagged_fields_at(cls, payload, HEADER) :]


@pytest.mark.parametrize(
    ("gap", "fits"), [(0, True), (1, False), (2, True), (3, True), (129, True), (130, True), (131, True), (500, True)]
)
def test_every_gap_but_one_byte_is_filled(gap: int, fits: bool):
    proxied = [NodeEndpoint(2, "proxy", 19095, None)]
    section = tail_of(proxied)
    upstream = tail_of([NodeEndpoint(2, "p" * (5 + gap), 9092, None)])
    rewritten = tail_with(upstream, proxied)
    assert len(rewritten) == len(upstream)
    tags = tags_of(rewritten)
    if fits:
        assert tags[0] == (0, section[3:]), "the proxy's endpoints as kio writes them"
        assert all(value == bytes(len(value)) for _, value in tags[1:]), "then zeros"
    else:
        assert [t for t, _ in tags] != [0] and 0 not in [t for t, _ in tags]
        assert all(value == bytes(len(value)) for _, value in tags)


def test_longer_endpoints_are_blanked():
    upstream = tail_of([NodeEndpoint(2, "k2", 9092, "rack-a")])
    rewritten = tail_with(upstream, [NodeEndpoint(2, "proxy.example", 19095, "rack-a")])
    assert len(rewritten) == len(upstream)
    assert b"k2" not in rewritten and b"rack-a" not in rewritten
    (tag,) = tags_of(rewritten)
    assert tag[0] != 0 and tag[1] == bytes(len(tag[1]))


MALFORMED = {
    "a varint over 5 bytes": bytes.fromhex("00") + bytes(10) + bytes.fromhex("ffffffffff01"),
    "responses is null": bytes.fromhex("00") + bytes(10) + b"\x00" + b"\x00",
    "partitions is null": bytes.fromhex("00") + bytes(10) + b"\x02" + bytes(16) + b"\x00" + b"\x00\x00",
    "records overrunning the answer": bytes.fromhex("00")
    + bytes(10)
    + b"\x02"
    + bytes(16)
    + b"\x02"
    + bytes(30)
    + b"\x00"
    + bytes(4)
    + bytes.fromhex("ffff03")
    + b"\x00\x00\x00",
    "a count of a billion": bytes.fromhex("00") + bytes(10) + bytes.fromhex("80a8d6b907") + bytes(16),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_answers_are_errors(body: bytes):
    with pytest.raises(UpstreamProtocolError, match="malformed Fetch v16 response"):
        drive(bytes(4) + body, 16, random.Random(0))


@pytest.mark.parametrize(
    "tail",
    [b"\x01\x00\x05\x02", b"\x01", b"\x01\x00\x01\x00", b"\x01\x00\x0b\x02\x00\x00\x00\x02\x09k2", b"\x02\x00\x01\x01"],
)
def test_a_malformed_tagged_section_is_an_error(tail: bytes):
    with pytest.raises(UpstreamProtocolError, match="malformed Fetch response tagged fields"):
        node_endpoints_in(tail)


def test_a_walk_is_done_after_its_tail():
    walk = FetchAnswerWalk(1 + 10 + 1 + 1, 16)
    assert walk.step(bytes(11) + b"\x01\x00") == (TAIL, 12, 1)
    with pytest.raises(TypeError):
        walk.step(b"")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_hostile_upstream_answer_is_a_protocol_error_not_an_allocation(version: int):
    """Hostile first lengths (``tests.server.hostile``) in an answer walked as it streams: refused when the walk
    reaches them, whatever they claim — the walk allocates nothing a length asks for."""
    bodies = hostile_bodies(response_schema(ApiKey.FETCH, version))
    assert len(bodies) > 3
    for label, body in bodies:
        payload = bytes(4) + b"\x00" + body  # correlation id, the flexible header's empty tag section
        try:
            drive(payload, version, random.Random(0))
        except UpstreamProtocolError as e:
            assert f"malformed Fetch v{version} response" in str(e)
            continue
        pytest.fail(f"Fetch v{version} {label}: walked")


def test_a_walk_leaves_no_garbage_cycle_done_or_abandoned():
    """The proxy's collector freezes what is alive every 0.1 s (``node.collector``), so a garbage cycle is a leak
    until the hourly reclaim. The walk's generator was started on the walk itself (walk → generator → frame → walk):
    every walked Fetch answer was such a cycle, with the answer's bytes in it (bench_proxy's soak: 311 MiB a minute
    at 5,000 messages/s). Done or given up half-way, a walk is now freed by its reference counts alone."""
    cls = response_schema(ApiKey.FETCH, 16)
    partition = entity(nested(cls, "PartitionData"), records=Records(b"r" * 100_000))
    topic = entity(nested(cls, "FetchableTopicResponse"), partitions=(partition, partition))
    payload = encode_response(ApiKey.FETCH, 16, 7, entity(cls, responses=(topic,)))[8:]
    gc.collect()
    gc.disable()
    try:
        done = FetchAnswerWalk(len(payload), 16)
        at, step = 0, done.step(payload)
        while step[0] == PASS:
            at += step[1] + step[2]
            step = done.step(memoryview(payload)[at:])
        assert step[0] == TAIL
        abandoned = FetchAnswerWalk(len(payload), 16)
        assert abandoned.step(payload)[0] == PASS  # suspended inside the answer
        del done, abandoned, step
        kinds = (FetchAnswerWalk, types.GeneratorType)
        left = [o for o in gc.get_objects() if isinstance(o, kinds) and "walk" in repr(o)]
        assert left == []  # freed already, no collection needed
    finally:
        gc.enable()

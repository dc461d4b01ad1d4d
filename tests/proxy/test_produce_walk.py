"""``proxy.produce_walk``, the hand-written walk of a Produce v10/v11 answer, held to the generic one
(``lengths.tagged_fields_at``, generated from kio's schema): the same offset on every valid answer, an error on every
truncation, and on any corruption either an error or an offset inside the bytes — never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, response_schema
from kafkaguard.protocol.lengths import tagged_fields_at
from kafkaguard.proxy.produce_walk import ProduceAnswerWalk, names_brokers, top_level_tags_at
from kafkaguard.proxy.walks import NEED, TAIL
from kafkaguard.proxy.wire import UpstreamProtocolError
from tests.proxy.memory_upstream import entity

st.register_type_strategy(Records, st.binary(max_size=16).map(Records))
HEADER = 5  # a v1 response header with no tagged fields: correlation id, then a zero count
SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def generic(version: int, payload: bytes) -> int:
    return tagged_fields_at(response_schema(ApiKey.PRODUCE, version), payload, HEADER)


def answers(version: int) -> st.SearchStrategy[bytes]:
    return st.from_type(response_schema(ApiKey.PRODUCE, version)).map(
        lambda body: encode_response(ApiKey.PRODUCE, version, 7, body)[4:]
    )


def test_the_worked_example_of_the_docstring():
    cls = response_schema(ApiKey.PRODUCE, 11)
    partition = entity(nested(cls, "PartitionProduceResponse"), index=0, base_offset=0, log_start_offset=0)
    topic = entity(nested(cls, "TopicProduceResponse"), name="t", partition_responses=(partition,))
    payload = encode_response(ApiKey.PRODUCE, 11, 7, entity(cls, responses=(topic,)))[4:]
    assert payload[:9] == bytes.fromhex("000000070002027402")
    assert top_level_tags_at(payload, 11) == 47 == generic(11, payload)
    assert payload[47] == 0 and len(payload) == 48
    assert ProduceAnswerWalk(44, 11).step(payload[4:]) == (TAIL, 44, 0)


@pytest.mark.parametrize("version", [10, 11])
@SETTINGS
@given(data=st.data())
def test_the_same_offset_as_the_generic_walk_on_every_valid_answer(version: int, data: st.DataObject):
    payload = data.draw(answers(version))
    assert top_level_tags_at(payload, version) == generic(version, payload)


@pytest.mark.parametrize("version", [10, 11])
@SETTINGS
@given(data=st.data())
def test_every_truncation_before_the_section_is_an_error(version: int, data: st.DataObject):
    payload = data.draw(answers(version))
    cut = data.draw(st.integers(0, generic(version, payload)))
    with pytest.raises(UpstreamProtocolError, match=f"malformed Produce v{version} response"):
        top_level_tags_at(payload[:cut], version)


@pytest.mark.parametrize("version", [10, 11])
@SETTINGS
@given(data=st.data())
def test_a_corrupted_answer_is_an_error_or_an_offset_inside_it(version: int, data: st.DataObject):
    payload = bytearray(data.draw(answers(version)))
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    try:
        at = top_level_tags_at(bytes(payload), version)
    except UpstreamProtocolError:
        return
    assert HEADER <= at < len(payload)


def test_a_count_claiming_more_than_the_bytes_hold_ends_at_the_end():
    """A billion topics in a few bytes: the walk reads a byte per element, so it stops where the bytes do."""
    payload = bytes.fromhex("0000000700") + bytes.fromhex("80a8d6b907") + b"\x02t"
    with pytest.raises(UpstreamProtocolError, match="malformed Produce v10 response"):
        top_level_tags_at(payload, 10)


@pytest.mark.parametrize("version", [10, 11])
@SETTINGS
@given(data=st.data())
def test_the_held_walk_asks_for_the_whole_answer_and_hands_it_over_iff_it_names_brokers(
    version: int, data: st.DataObject
):
    """Under the answer-edit contract (``walks``): the whole answer first, then nothing to rewrite, or all of it."""
    payload = data.draw(answers(version))
    body, walk = payload[4:], ProduceAnswerWalk(len(payload) - 4, version)
    assert walk.step(body[: data.draw(st.integers(0, len(body) - 1))]) == (NEED, len(body), 0)
    expected = (TAIL, 0, len(body)) if names_brokers(version, payload) else (TAIL, len(body), 0)
    assert walk.step(memoryview(body)) == expected

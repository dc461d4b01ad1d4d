"""``proxy.relay.AnswerRelay``, one relayed answer in flight: it prints as what it waits for, and a failure on the
way back names its steps (no partials)."""

from __future__ import annotations

import asyncio
import functools
import traceback

import pytest

from kafkaguard.protocol.replies import ClientWriter
from kafkaguard.proxy.fetch_walk import FetchAnswerWalk
from kafkaguard.proxy.relay import AnswerRelay
from kafkaguard.proxy.upstream import UpstreamUnavailable
from kafkaguard.proxy.walks import AnswerEdit
from tests.proxy.memory_upstream import CollectingWriter, MemoryUpstream


async def _proxied_tail(tail: bytes) -> bytes:
    return tail


def metering(client: ClientWriter) -> ClientWriter:
    return client


def test_a_relay_prints_as_the_request_it_waits_for():
    upstream = MemoryUpstream()
    assert repr(AnswerRelay(upstream, 7)) == "AnswerRelay(correlation_id=7, upstream=kafka-1.internal:9092)"
    edit = AnswerEdit(walk=functools.partial(FetchAnswerWalk, api_version=16), tail=_proxied_tail)
    assert repr(AnswerRelay(upstream, 8, edit, metering)) == (
        "AnswerRelay(correlation_id=8, upstream=kafka-1.internal:9092, edit=AnswerEdit(FetchAnswerWalk, "
        "_proxied_tail), through=metering)"
    )


def test_a_failure_on_the_way_back_names_its_steps():
    relay = AnswerRelay(MemoryUpstream(), 7)  # nothing was sent: the upstream has no answer to pass on
    with pytest.raises(UpstreamUnavailable) as failure:
        asyncio.run(relay.pass_on(CollectingWriter()))
    steps = [frame.name for frame in traceback.extract_tb(failure.value.__traceback__)]
    assert steps[-3:] == ["pass_on", "pass_answer_on", "_next_answer"]

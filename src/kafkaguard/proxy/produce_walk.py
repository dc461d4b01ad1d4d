"""Walking a Produce v10/v11 answer: where its top-level tagged fields begin — the one question the proxy's Produce
fast path asks of every answer (does it carry KIP-951 ``node_endpoints``, tag 0?) — answered by a walk written for
this one layout. ``ProduceAnswerWalk`` is that walk under the answer-edit contract of ``walks`` (as
``fetch_walk.FetchAnswerWalk`` is Fetch's), for an edit that holds the answer whole (``AnswerEdit.held``: a Produce
answer is a few dozen bytes a partition, never records): it answers ``(TAIL, count, 0)`` — nothing to rewrite, the
answer passes on as it came — when that section is empty, else ``(TAIL, 0, count)``: the whole answer after its
correlation id is the edit's to rewrite (``handlers.produce``: decoded, its ``node_endpoints`` at the proxy's
addresses, re-encoded).

Why by hand: ``lengths.tagged_fields_at`` answers the same for any schema, one compiled closure per field, a call
per fixed-size field — on the fast path of every Produce, the largest share of what offering v10+ added to the
proxy's CPU (``bench_upgrade``; see docs/benchmarks.md, "Figures from the code"). This walk does the
same in one loop per level with no call per fixed-size field. ``test_produce_walk`` holds it to
``tagged_fields_at``: the same offset for every valid answer hypothesis makes, and an error wherever that one
raises, on truncated and corrupted answers.

The layout (``ProduceResponse`` v10–v11; both are the same bytes, v11 only widened what a request may be):

    header      correlation_id int32, tagged fields
    responses   compact array of
      name                compact string
      partitions          compact array of
        index int32, error_code int16, base_offset int64, log_append_time_ms int64, log_start_offset int64 (30 bytes)
        record_errors     compact array of (batch_index int32, message compact nullable string, tagged fields)
        error_message     compact nullable string
        tagged fields     (current_leader, tag 0)
      tagged fields
    throttle_time_ms int32
    tagged fields       (node_endpoints, tag 0)  <- returned

Worked example — one topic ``"t"``, one partition, no error, correlation id 7::

    00 00 00 07 00 | 02 | 02 74 | 02 | <30 bytes> | 01 00 00 | 00 | 00 00 00 00 | 00
    header (5)       1 topic "t"    1 partition     no record errors, null message, no tags;
                                                    then the topic's tags, throttle -> offset 47, count 0

    ProduceAnswerWalk(44, 11).step(<the 44 bytes after the correlation id>)  -> (TAIL, 44, 0): nothing to rewrite

Cost model: one Python step per topic, partition, record error and tagged field actually present, a few hundred ns
each; independent of what a count claims (every element reads a byte at a growing offset, so a false count ends
at the payload's end).

In passthrough (each client upstream as itself) the broker's own ACLs decide too, and a partition it refused says
so in the answer (``proxy.broker_refusals``). ``PassthroughProduceAnswerWalk`` gives the handler any answer of any
version that might say so: one whose bytes hold an authorization error's code (29 or 53, as int16) anywhere. That
search is C's (``bytes.__contains__``, about 50 ns for a one-partition answer); a false match (an offset holding
``00 1d``: about one answer in a thousand) costs the handler a decode, never a changed answer.
"""

from __future__ import annotations

from kafkaguard.protocol.errors import VarintTooLong
from kafkaguard.protocol.varint import uvarint
from kafkaguard.proxy.walks import NEED, TAIL, Malformed, Step
from kafkaguard.proxy.wire import UpstreamProtocolError

#: The first version whose answer may name brokers (KIP-951 ``node_endpoints``).
ENDPOINTS_FROM = 10
#: A partition's fixed-size head: index, error_code, base_offset, log_append_time_ms, log_start_offset.
_PARTITION_HEAD = 4 + 2 + 8 + 8 + 8
_BATCH_INDEX = 4
_HEADER = 4  # correlation_id, in a payload
_THROTTLE = 4


class ProduceAnswerWalk:
    """The walk of one Produce v10/v11 answer whose ``count`` bytes follow its correlation id, held whole (see the
    module docstring). ``step`` raises ``UpstreamProtocolError`` for an answer that does not fit its layout."""

    __slots__ = ("_count", "_version")

    def __init__(self, count: int, api_version: int) -> None:
        self._count = count
        self._version = api_version

    def step(self, window: bytes | memoryview) -> Step:
        count = self._count
        if len(window) < count:
            return NEED, count, 0
        if _names_brokers(window, 0, self._version):
            return TAIL, 0, count
        return TAIL, count, 0


#: The authorization errors a broker answers a Produce partition with, as their int16 bytes: TOPIC_AUTHORIZATION_FAILED
#: (29) and TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53, every partition of a refused transactional request).
REFUSAL_CODES = (29, 53)
_REFUSALS = tuple(code.to_bytes(2, "big") for code in REFUSAL_CODES)


class PassthroughProduceAnswerWalk:
    """The walk of a Produce answer of any version relayed in passthrough, held whole: ``(TAIL, 0, count)`` — the
    handler's to read — when it may hold the broker's refusal (module docstring) or (v10+) names brokers, else
    ``(TAIL, count, 0)``, passed on as it came. Raises ``UpstreamProtocolError`` as ``ProduceAnswerWalk``."""

    __slots__ = ("_count", "_version")

    def __init__(self, count: int, api_version: int) -> None:
        self._count = count
        self._version = api_version

    def step(self, window: bytes | memoryview) -> Step:
        count = self._count
        if len(window) < count:
            return NEED, count, 0
        whole = window if isinstance(window, bytes) else bytes(window)  # a held answer comes as bytes
        if any(code in whole for code in _REFUSALS):
            return TAIL, 0, count
        if self._version >= ENDPOINTS_FROM and _names_brokers(whole, 0, self._version):
            return TAIL, 0, count
        return TAIL, count, 0


def names_brokers(api_version: int, payload: bytes) -> bool:
    """Whether a Produce response payload (no length prefix) of ``api_version`` carries top-level tagged fields — in
    v10-v11 that is ``node_endpoints`` (tag 0), the only place a Produce answer names brokers. Walks the body up to
    that section without decoding it.

    :raises UpstreamProtocolError: a length in the answer does not fit its bytes.
    """
    if api_version < ENDPOINTS_FROM:
        return False
    return _names_brokers(payload, _HEADER, api_version)


def _names_brokers(p: bytes | memoryview, header_at: int, api_version: int) -> bool:
    return p[_section_at(p, header_at, api_version)] != 0  # the count (a uvarint): zero is one 0 byte


def top_level_tags_at(payload: bytes, api_version: int) -> int:
    """The offset of the top-level tagged-field section of a Produce v10/v11 response ``payload`` (no length
    prefix; the header included). The section's count is ``payload[offset]``: 0 means no tagged fields.

    :raises UpstreamProtocolError: a length or count does not fit the bytes, or the answer ends before that section.
    """
    return _section_at(payload, _HEADER, api_version)


def _section_at(p: bytes | memoryview, header_at: int, api_version: int) -> int:
    """``top_level_tags_at`` of bytes whose response header's tagged fields start at ``header_at`` (4 in a
    payload, after the correlation id; 0 in what follows it)."""
    try:
        at = _walk(p, header_at, len(p))
    except (Malformed, VarintTooLong, IndexError) as e:
        why = "it ends inside a field" if isinstance(e, IndexError) else str(e)
        raise UpstreamProtocolError(f"malformed Produce v{api_version} response: {why}") from e
    if at >= len(p):
        raise UpstreamProtocolError(f"malformed Produce v{api_version} response: it ends before its tagged fields")
    return at


def _walk(p: bytes | memoryview, header_at: int, end: int) -> int:
    at = _tags(p, header_at, end)
    topics, at = uvarint(p, at)
    if topics == 0:
        raise Malformed("responses is null")
    for _ in range(topics - 1):
        at = _string(p, at, end, nullable=False)
        partitions, at = uvarint(p, at)
        if partitions == 0:
            raise Malformed("partition_responses is null")
        for _ in range(partitions - 1):
            at += _PARTITION_HEAD
            errors, at = uvarint(p, at)  # reads p[at]: an IndexError past the end
            if errors == 0:
                raise Malformed("record_errors is null")
            for _ in range(errors - 1):
                at = _string(p, at + _BATCH_INDEX, end, nullable=True)
                at = _tags(p, at, end)
            at = _string(p, at, end, nullable=True)
            at = _tags(p, at, end)
        at = _tags(p, at, end)
    return at + _THROTTLE


def _string(p: bytes | memoryview, at: int, end: int, *, nullable: bool) -> int:
    length, at = uvarint(p, at)
    if length == 0:
        if not nullable:
            raise Malformed("a non-nullable string is null")
        return at
    at += length - 1
    if at > end:
        raise Malformed(f"a string of {length - 1} bytes overruns the answer")
    return at


def _tags(p: bytes | memoryview, at: int, end: int) -> int:
    count, at = uvarint(p, at)
    for _ in range(count):
        _, at = uvarint(p, at)
        size, at = uvarint(p, at)
        at += size
        if at > end:
            raise Malformed(f"a tagged field of {size} bytes overruns the answer")
    return at

"""Walking a Fetch v13–v17 answer as it streams: which bytes are structure, which are records, and where its
top-level tagged fields (KIP-951 ``node_endpoints``, tag 0, from v16) begin — without holding the answer or reading
its records. I/O-free, in the manner of ``scram.server``: the driver (``links``: a spliced, copied or in-memory relay)
asks ``step(window)`` what to do next and does it.

Why: a v16+ answer names the new leaders of partitions answered NOT_LEADER_OR_FOLLOWER (``current_leader``, id and
epoch only, in each partition's tags) and their addresses (``node_endpoints``, the answer's last field). Those
addresses are upstream ones no client may learn; everything before them is tens of MiB of records that must keep
streaming (spliced socket to socket). So the walk finds the records' lengths from the few bytes between them, lets
the records pass unread, and hands the driver the last bytes — the top-level tagged section — to rewrite in place
(``tail_with``: the same length, since the frame's size went out first).

In passthrough (each client upstream as itself) the broker's own ACLs decide too: the walk then also collects the
partitions it answered TOPIC_AUTHORIZATION_FAILED (``FetchAnswerWalk(refused=…)``: two byte compares per
partition), for ``proxy.broker_refusals``. There it walks v13–v15 answers too, whose bytes are the same but for tag 0
(their tail is an ordinary tagged section, passed on unchanged).

The layout (``FetchResponse`` v13–v17; the same bytes, but v16 added ``node_endpoints``, v17 changed only the
request):

    header        correlation_id int32 (read by the driver), tagged fields
    throttle_time_ms int32, error_code int16, session_id int32
    responses     compact array of
      topic_id uuid (16)
      partitions  compact array of
        partition_index int32, error_code int16, high_watermark int64, last_stable_offset int64,
        log_start_offset int64 (30 bytes)
        aborted_transactions compact nullable array of (producer_id int64, first_offset int64, tagged fields)
        preferred_read_replica int32
        records   compact nullable bytes                  <- opaque: PASS
        tagged fields (diverging_epoch 0, current_leader 1, snapshot_id 2)
      tagged fields
    tagged fields (node_endpoints 0)                      <- TAIL

Steps (``walks.Step`` = (kind, a, b)); a window always starts at the first byte the driver has not passed on yet:

* ``(NEED, n, 0)``: call ``step`` again with a window of at least ``n`` bytes (the walk re-reads the element it
  stopped in; ``n`` never passes the answer's end);
* ``(PASS, k, m)``: pass on ``k`` structural bytes (seen) and then ``m`` opaque ones (records, or a large tagged
  field) unchanged, then call ``step`` with what is left of the window after them (possibly nothing);
* ``(TAIL, k, n)``: the last ``k + n`` bytes of the answer: ``k`` structural, then the top-level tagged section of
  ``n`` bytes, to rewrite (``tail_with``). The walk is done.

Worked example — one topic, one partition of 1 MiB of records, no tags (correlation id read already)::

    step(b"")                 -> (NEED, 64, 0)
    step(<4 KiB peeked>)      -> (PASS, 67, 1048576)    header tags 1, throttle/error/session 10, 1 topic 1,
                                                        uuid 16, 1 partition 1, head 30, no aborted 1,
                                                        replica 4, records length 3 (a 3-byte varint)
    step(b"")                 -> (NEED, 3, 0)           (64, but never past the answer's end)
    step(b"\\x00\\x00\\x00")     -> (TAIL, 2, 1)           partition tags, topic tags; then the tail of 1 byte

Cost model: one Python step per topic, partition, aborted transaction and tagged field present, nothing per record
byte: the cost follows the answer's structure, not its size (a one-partition answer of 1 MiB costs about what one of
100 B does; timeit figures: see docs/benchmarks.md, "Figures from the code").

Records shorter than ``OPAQUE_FROM`` are kept in the window (passing them separately would cost more calls than
reading them costs); a window is flushed (PASS of structure only) once ``FLUSH_AT`` bytes of structure accumulated,
so no window grows past about twice ``FLUSH_AT + OPAQUE_FROM``, whatever the answer holds. A count that claims more
elements than the bytes hold ends at the answer's end: every element reads a byte at a growing offset.
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from kafkaguard.protocol.errors import VarintTooLong
from kafkaguard.protocol.varint import uvarint, uvarint_bytes
from kafkaguard.proxy.walks import NEED, PASS, TAIL, Malformed, Step
from kafkaguard.proxy.wire import UpstreamProtocolError

#: Records (or a tagged field's value) of at least this size pass opaque; smaller ones stay in the window.
OPAQUE_FROM = 4096
#: Structure seen beyond this is passed on before the walk asks for more.
FLUSH_AT = 16 * 1024
#: The first window asked for, and the least a NEED grows it by: more than any one element's fixed part.
ELEMENT = 64
#: The top-level tagged section is read into the process: Kafka's is a few dozen bytes per leader.
MAX_TAIL = 1024 * 1024
#: throttle_time_ms, error_code, session_id; a partition's fixed head; an aborted transaction; a topic id.
_TOP, _PARTITION_HEAD, _ABORTED, _TOPIC_ID, _REPLICA = 10, 30, 16, 16, 4
#: Where a partition's error_code is in its head (after partition_index); TOPIC_AUTHORIZATION_FAILED's code, whose
#: high byte is 0.
_ERROR, _REFUSED = 4, 29


class FetchAnswerWalk:
    """The walk of one Fetch v13-v17 answer whose ``count`` bytes follow its correlation id (see the module
    docstring); with ``refused``, each partition the upstream answered TOPIC_AUTHORIZATION_FAILED is appended to it
    as (its topic's id, 16 bytes; the error code). ``step`` raises ``UpstreamProtocolError`` for an answer that does
    not fit its layout."""

    __slots__ = ("_cursor", "_steps", "_version")

    def __init__(self, count: int, api_version: int, refused: list[tuple[bytes, int]] | None = None) -> None:
        self._version = api_version
        self._cursor = _Cursor(count, refused)
        self._steps: Generator[Step, bytes | memoryview, None] | None = None

    def step(self, window: bytes | memoryview) -> Step:
        try:
            if self._steps is None:
                self._steps = self._cursor.walk(window)
                return next(self._steps)
            return self._steps.send(window)
        except (Malformed, VarintTooLong) as e:
            raise UpstreamProtocolError(f"malformed Fetch v{self._version} response: {e}") from e
        except StopIteration as e:  # a step after TAIL: a bug of the driver, never the upstream's
            raise TypeError("the Fetch answer's walk is done") from e


class _Cursor:
    """The walk's generator and the bytes left, apart from ``FetchAnswerWalk``: a suspended generator refers to what
    it was started on, and started on the walk itself it made a reference cycle (walk → generator → frame → walk)
    holding the answer's bytes. Such a cycle waits for the cyclic collector, and ``node.collector`` freezes what is
    alive every 0.1 s: every walked answer leaked until the hourly reclaim (311 MiB a minute at 5,000 messages/s,
    bench_proxy's soak). Here the walk holds the cursor and the generator, and neither refers back."""

    __slots__ = ("_left", "_refused")

    def __init__(self, count: int, refused: list[tuple[bytes, int]] | None) -> None:
        self._left = count  # bytes from the driver's position to the answer's end
        self._refused = refused  # the caller's list: no reference back to the walk

    def _need(self, w: bytes | memoryview, at: int) -> Step:
        left = self._left
        if len(w) >= left:
            raise Malformed("it ends inside a field")
        return NEED, min(left, max(at + ELEMENT, 2 * len(w))), 0

    def _pass(self, structural: int, opaque: int) -> Step:
        moved = structural + opaque
        if moved > self._left:
            raise Malformed(f"a field of {opaque} bytes overruns the answer")
        self._left -= moved
        return PASS, structural, opaque

    def walk(self, w: bytes | memoryview) -> Generator[Step, bytes | memoryview, None]:
        refused = self._refused
        while True:  # header tags, throttle, error, session, responses
            try:
                at = _skip_tags(w, 0) + _TOP
                topics, at = uvarint(w, at)
                break
            except IndexError:
                w = yield self._need(w, 0)
        if topics == 0:
            raise Malformed("responses is null")
        for _ in range(topics - 1):
            start = at
            while True:
                try:
                    partitions, at = uvarint(w, start + _TOPIC_ID)
                    break
                except IndexError:
                    w = yield self._need(w, start)
            if partitions == 0:
                raise Malformed("partitions is null")
            topic_id = bytes(w[start : start + _TOPIC_ID]) if refused is not None else b""
            for _ in range(partitions - 1):
                if at >= FLUSH_AT:
                    w = yield self._pass(at, 0)
                    at = 0
                start = at
                while True:
                    try:
                        aborted, at = uvarint(w, start + _PARTITION_HEAD)
                        for _ in range(aborted - 1):  # 0 (null) and 1 (empty) list none
                            at = _skip_tags(w, at + _ABORTED)
                        size, at = uvarint(w, at + _REPLICA)
                        if 0 < size <= OPAQUE_FROM:  # small records stay in the window; null (0) has none
                            at += size - 1
                            if size > 1:
                                w[at - 1]  # all of them in the window (IndexError asks for more)
                        break
                    except IndexError:
                        w = yield self._need(w, start)
                if refused is not None and w[start + _ERROR + 1] == _REFUSED and w[start + _ERROR] == 0:
                    refused.append((topic_id, _REFUSED))
                if size > OPAQUE_FROM:
                    w = yield self._pass(at, size - 1)
                    at = 0
                w, at = yield from self._tags(w, at)
            w, at = yield from self._tags(w, at)
        tail = self._left - at
        if tail < 1:
            raise Malformed("it ends before its tagged fields")
        if tail > MAX_TAIL:
            raise Malformed(f"its top-level tagged fields of {tail} bytes exceed {MAX_TAIL}")
        self._left = 0
        yield TAIL, at, tail

    def _tags(
        self, w: bytes | memoryview, at: int
    ) -> Generator[Step, bytes | memoryview, tuple[bytes | memoryview, int]]:
        """A tagged-field section: small values kept in the window, large ones passed opaque."""
        while True:
            try:
                count, after = uvarint(w, at)
                break
            except IndexError:
                w = yield self._need(w, at)
        at = after
        for _ in range(count):
            while True:
                try:
                    _, after = uvarint(w, at)
                    size, after = uvarint(w, after)
                    if size < OPAQUE_FROM and size:
                        w[after + size - 1]  # the value in the window
                    break
                except IndexError:
                    w = yield self._need(w, at)
            if size >= OPAQUE_FROM:
                w = yield self._pass(after, size)
                at = 0
            else:
                at = after + size
        return w, at


def _skip_tags(p: bytes | memoryview, at: int) -> int:
    """A small tagged-field section in the window (a header's, an aborted transaction's): its end."""
    count, at = uvarint(p, at)
    for _ in range(count):
        _, at = uvarint(p, at)
        size, at = uvarint(p, at)
        at += size
        if size:
            p[at - 1]  # the value in the window (IndexError asks for more)
    return at


# ------------------------------------------------------------------------------------------------ the tail


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """One ``NodeEndpoint`` of ``node_endpoints`` (its own tagged fields are not kept)."""

    node_id: int
    host: str
    port: int
    rack: str | None


_INT32 = struct.Struct(">i")
_ENDPOINTS_TAG = 0


def node_endpoints_in(tail: bytes) -> tuple[NodeEndpoint, ...] | None:
    """The ``node_endpoints`` of a top-level tagged section (``TAIL``), None when it has no tag 0.

    :raises UpstreamProtocolError: the section does not fit its bytes.
    """
    try:
        tags = _tags_of(tail)
        if _ENDPOINTS_TAG not in tags:
            return None
        start, end = tags[_ENDPOINTS_TAG][1:]
        count, at = uvarint(tail, start)
        if count == 0:
            raise Malformed("node_endpoints is null")
        endpoints = []
        for _ in range(count - 1):
            (node_id,) = _INT32.unpack_from(tail, at)
            host, at = _string(tail, at + 4, end)
            if host is None:
                raise Malformed("a node's host is null")
            (port,) = _INT32.unpack_from(tail, at)
            rack, at = _string(tail, at + 4, end)
            at = _skip_tags(tail, at)
            endpoints.append(NodeEndpoint(node_id, host, port, rack))
        if at != end:
            raise Malformed("node_endpoints does not end where its tagged field does")
    except (Malformed, VarintTooLong, IndexError, struct.error, UnicodeDecodeError) as e:
        why = "it ends inside a field" if isinstance(e, IndexError | struct.error) else str(e)
        raise UpstreamProtocolError(f"malformed Fetch response tagged fields: {why}") from e
    return tuple(endpoints)


def tail_with(tail: bytes, endpoints: Sequence[NodeEndpoint]) -> bytes:
    """``tail`` (a top-level tagged section with tag 0, of a well-formed answer: ``node_endpoints_in`` read it) with
    its ``node_endpoints`` replaced by ``endpoints``, in exactly ``len(tail)`` bytes: the new endpoints, the other
    tags as they were, and a filler tag (a number no version defines, zero bytes) for the difference. When they do
    not fit (longer than the upstream's, or a gap no filler can fill) tag 0 is blanked instead: renumbered to an
    unused tag and its bytes zeroed, so the client learns no endpoint and asks Metadata, as without KIP-951."""
    tags = _tags_of(tail)
    others = [bytes(tail[first:end]) for tag, (first, _, end) in sorted(tags.items()) if tag != _ENDPOINTS_TAG]
    value = bytearray(uvarint_bytes(len(endpoints) + 1))
    for e in endpoints:
        value += _INT32.pack(e.node_id) + _compact_string(e.host) + _INT32.pack(e.port) + _compact_string(e.rack)
        value += b"\x00"  # no tagged fields of its own
    body = b"".join([uvarint_bytes(_ENDPOINTS_TAG), uvarint_bytes(len(value)), bytes(value), *others])
    unused = max(tags) + 1
    if len(uvarint_bytes(len(tags))) + len(body) == len(tail):
        return uvarint_bytes(len(tags)) + body
    count = uvarint_bytes(len(tags) + 1)
    gap = len(tail) - len(count) - len(body)
    filler = _filler(gap, unused)
    if filler is not None:
        return count + body + filler
    return _blanked(tail, tags[_ENDPOINTS_TAG], unused if unused < 0x80 else _unused_small(tags))


def _filler(gap: int, lowest: int) -> bytes | None:
    """A tagged field numbered ``lowest`` or above of exactly ``gap`` bytes, None if there is none."""
    for number in (lowest, max(lowest, 0x80)):  # a 1-byte and a 2-byte tag number: between them every gap >= 2
        tag = uvarint_bytes(number)
        for size_bytes in (1, 2, 3):
            size = gap - len(tag) - size_bytes
            if size >= 0 and len(uvarint_bytes(size)) == size_bytes:
                return tag + uvarint_bytes(size) + bytes(size)
    return None


def _blanked(tail: bytes, endpoints: tuple[int, int, int], number: int) -> bytes:
    first, value, end = endpoints
    blank = bytearray(tail)
    blank[first] = number  # tag 0 is one byte (varint 0): so is any number below 128
    blank[value:end] = bytes(end - value)
    return bytes(blank)


def _unused_small(tags: dict[int, tuple[int, int, int]]) -> int:
    return next(n for n in range(1, 0x80) if n not in tags)


def _tags_of(tail: bytes) -> dict[int, tuple[int, int, int]]:
    """Each tag's (first byte, first byte of its value, end) in a tagged section that must fill ``tail``."""
    count, at = uvarint(tail, 0)
    tags: dict[int, tuple[int, int, int]] = {}
    for _ in range(count):
        first = at
        tag, at = uvarint(tail, at)
        size, at = uvarint(tail, at)
        if tag in tags:
            raise Malformed(f"tag {tag} twice")
        tags[tag] = first, at, at + size
        at += size
    if at != len(tail):
        raise Malformed(f"the tagged fields end at {at} of {len(tail)} bytes")
    return tags


def _string(p: bytes, at: int, end: int) -> tuple[str | None, int]:
    length, at = uvarint(p, at)
    if length == 0:
        return None, at
    stop = at + length - 1
    if stop > end:
        raise Malformed(f"a string of {length - 1} bytes overruns node_endpoints")
    return bytes(p[at:stop]).decode(), stop


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode()
    return uvarint_bytes(len(data) + 1) + data

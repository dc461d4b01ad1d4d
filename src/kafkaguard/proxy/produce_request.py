"""A Produce request as the proxy authorizes it: walked from the client's bytes for what authorization reads — the
transactional id, acks, each topic's name and partition indexes, and whether a first record batch is
transactional — with the records never decoded or copied. The client's own bytes then go upstream as they came
(the fast path: every topic allowed); only a request with a refused topic is decoded whole by kio
(``ProduceRequestView.decoded``), to be rebuilt without it.

Why by hand: kio's decode of a Produce request copies every partition's records into a ``bytes`` of their own and
runs the lengths pre-pass (``lengths.check_body``) over them first, and a request larger than
``connection.LARGE_FRAME`` — a producer's every full batch at ``batch.size`` 256 KiB — was decoded on a worker
thread, so that one hop (about 120 µs of thread hand-off for 13 µs of decoding; see docs/benchmarks.md, "Figures
from the code") was paid by nearly every Produce the proxy relayed. This walk reads a few bytes per topic and
partition in the event loop and skips the records by their length.

Hostile lengths: every length and count is checked against the bytes that remain before it is used, and the
topics and partitions together are bounded by ``max_items`` (``max_request_items``, as kio's pre-pass bounds
every array's elements together), so the walk's work is bounded by the request's size and that limit, whatever it
claims. Bytes after the body are ignored, as ``codec.decode_request`` ignores them. ``test_produce_request`` holds
the walk to kio's decoding: the same fields for every valid request hypothesis makes at every offered version, and
an error wherever kio's decoding raises on truncated and corrupted requests.

The layout (``ProduceRequest`` v3–v11; v9+ is flexible: compact lengths, tagged fields)::

    transactional_id   nullable string
    acks               int16
    timeout_ms         int32
    topic_data         array of
      name               string
      partition_data     array of
        index              int32
        records            nullable bytes       <- skipped; its first batch's magic and attributes read in place
        (tagged fields)
      (tagged fields)
    (tagged fields)

Worked example — v9, no transactional id, acks -1, one topic ``"t"`` with partition 0 and a 61-byte batch::

    00 | ff ff | 00 00 75 30 | 02 | 02 74 | 02 | 00 00 00 00 | 3e <61 bytes> | 00 | 00 | 00
    null id  acks   30 s timeout  1 topic "t"  1 partition  index 0       records    tags: partition, topic, request

    walk_produce_request(frame, body_at, 9, max_items=1000).topics == (ProducedTopic("t", (0,)),)

Cost model: one Python step per topic and partition (a few hundred ns each) and a slice of each topic name;
nothing proportional to the records' size.
"""

from __future__ import annotations

import asyncio
import struct
from typing import NamedTuple

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import decode_body
from kafkaguard.protocol.connection import LARGE_FRAME
from kafkaguard.protocol.errors import ProtocolError, TaggedFieldsError, VarintTooLong
from kafkaguard.protocol.lengths import TooManyItemsError
from kafkaguard.protocol.varint import skip_tagged_fields, uvarint
from kafkaguard.proxy.messages import PRODUCE, ProduceRequest

#: The first flexible version (compact lengths, tagged fields).
FLEXIBLE_FROM = 9
#: A v2 record batch: baseOffset (8) batchLength (4) partitionLeaderEpoch (4) magic (1) crc (4), then attributes.
_MAGIC_AT, _ATTRIBUTES_AT = 16, 21
_TRANSACTIONAL = 0x10
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
#: Tagged fields skipped in one section (as ``header`` bounds a request header's): Produce v9–v11 defines none,
#: and a hostile count of one-byte fields would otherwise cost a Python step per two bytes of the request.
_MAX_TAGGED_FIELDS = 64


class MalformedProduce(ProtocolError):
    """A Produce request whose bytes do not hold what they declare: the connection closes, as for any request that
    does not decode."""


class ProducedTopic(NamedTuple):
    """A topic of the request, in the request's order (a name may come twice, as Kafka allows). Named tuples, as
    the view: made per request, and a frozen dataclass's construction was most of the walk's time."""

    name: str
    partitions: tuple[int, ...]


class ProduceRequestView(NamedTuple):
    """What the Produce handler reads of a request, and the way to the whole of it."""

    api_version: int
    transactional_id: str | None
    acks: int
    topics: tuple[ProducedTopic, ...]
    #: Kafka's ``RequestUtils.hasTransactionalRecords``: the first batch of some partition is transactional.
    transactional: bool
    frame: bytes
    body_at: int
    max_items: int

    async def decoded(self) -> ProduceRequest:
        """The request decoded whole by kio (for a request rebuilt without its refused topics): on a worker thread
        when it is large, as the connection decodes any large request, so the loop keeps serving others."""
        args = (ApiKey.PRODUCE, self.api_version, self.frame, self.body_at, self.max_items)
        if len(self.frame) > LARGE_FRAME:
            body = await asyncio.to_thread(decode_body, *args)
        else:
            body = decode_body(*args)
        return PRODUCE.request(body)


def walk_produce_request(frame: bytes, body_at: int, api_version: int, *, max_items: int) -> ProduceRequestView:
    """The request whose body starts at ``body_at`` of ``frame`` (after its header), at ``api_version``.

    :raises MalformedProduce: a length or count the bytes cannot hold, a name that is not UTF-8, a null topic name.
    :raises TooManyItemsError: more topics and partitions together than ``max_items``.
    """
    try:
        return _walk(frame, body_at, api_version, max_items)
    except (IndexError, struct.error, VarintTooLong) as e:  # a read past the end, or a varint beyond 5 bytes
        raise MalformedProduce(f"malformed Produce v{api_version} request: it ends inside a field ({e})") from e
    except UnicodeDecodeError as e:
        raise MalformedProduce(f"malformed Produce v{api_version} request: a topic name is not UTF-8") from e


def _walk(p: bytes, at: int, version: int, max_items: int) -> ProduceRequestView:
    flexible = version >= FLEXIBLE_FROM
    end, body_at = len(p), at
    transactional_id, at = _nullable_string(p, at, flexible, end)
    acks, _timeout = _ACKS_TIMEOUT.unpack_from(p, at)
    at += _ACKS_TIMEOUT.size
    count, at = _count(p, at, flexible)
    items = count
    if items > max_items:
        raise TooManyItemsError(f"a Produce request with more than {max_items} topics and partitions")
    topics: list[ProducedTopic] = []
    transactional = False
    for _ in range(count):
        name, at = _nullable_string(p, at, flexible, end)
        if name is None:
            raise MalformedProduce(f"malformed Produce v{version} request: a null topic name")
        partitions, at = _count(p, at, flexible)
        items += partitions
        if items > max_items:
            raise TooManyItemsError(f"a Produce request with more than {max_items} topics and partitions")
        indexes: list[int] = []
        for _ in range(partitions):
            (index,) = _INT32.unpack_from(p, at)
            indexes.append(index)
            size, at = _records_size(p, at + 4, flexible)
            if size > 0:
                if at + size > end:
                    raise MalformedProduce(f"malformed Produce v{version} request: records run past its end")
                if not transactional and size > _ATTRIBUTES_AT + 1 and p[at + _MAGIC_AT] >= 2:
                    (attributes,) = _INT16.unpack_from(p, at + _ATTRIBUTES_AT)
                    transactional = bool(attributes & _TRANSACTIONAL)
                at += size
            if flexible:  # no tagged fields (one zero byte) is every client's: no call for it
                at = at + 1 if p[at] == 0 else _skip_tags(p, at, end)
        topics.append(ProducedTopic(name, tuple(indexes)))
        if flexible:
            at = at + 1 if p[at] == 0 else _skip_tags(p, at, end)
    if flexible:
        _skip_tags(p, at, end)
    return ProduceRequestView(
        api_version=version,
        transactional_id=transactional_id,
        acks=acks,
        topics=tuple(topics),
        transactional=transactional,
        frame=p,
        body_at=body_at,
        max_items=max_items,
    )


def _count(p: bytes, at: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (a null array has none: Kafka reads it as empty here only for a nullable array,
    and Produce's are not, so a null one is malformed)."""
    if flexible:
        n, at = uvarint(p, at)
        if n == 0:
            raise MalformedProduce("malformed Produce request: a null array")
        return n - 1, at
    (n,) = _INT32.unpack_from(p, at)
    if n < 0:
        raise MalformedProduce("malformed Produce request: a null or negative array length")
    return n, at + 4


def _nullable_string(p: bytes, at: int, flexible: bool, end: int) -> tuple[str | None, int]:
    if flexible:
        n, at = uvarint(p, at)
        if n == 0:
            return None, at
        size = n - 1
    else:
        (size,) = _INT16.unpack_from(p, at)
        at += 2
        if size < 0:
            if size != -1:
                raise MalformedProduce(f"malformed Produce request: a string length of {size}")
            return None, at
    if at + size > end:
        raise MalformedProduce("malformed Produce request: a string runs past its end")
    return p[at : at + size].decode("utf-8"), at + size


def _records_size(p: bytes, at: int, flexible: bool) -> tuple[int, int]:
    """The records' length (0 for null or empty) and the offset of their first byte."""
    if flexible:
        n, at = uvarint(p, at)
        return max(n - 1, 0), at
    (size,) = _INT32.unpack_from(p, at)
    if size < -1:
        raise MalformedProduce(f"malformed Produce request: a records length of {size}")
    return max(size, 0), at + 4


def _skip_tags(p: bytes, at: int, end: int) -> int:
    try:
        return skip_tagged_fields(p, at, end, _MAX_TAGGED_FIELDS)
    except TaggedFieldsError as e:
        raise MalformedProduce(f"malformed Produce request: {e}") from None

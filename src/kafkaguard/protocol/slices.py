"""Encoding a large response in slices, so that no client's answer holds the event loop for long.

Why this exists: kio's writer is pure Python, with a cost per flexible array element (it opens a buffer for each
element's tagged fields). A DescribeGroups answer of 10,000 refused groups encoded in one go held the loop for tens of
milliseconds (see docs/benchmarks.md, "Figures from the code"), during which no other connection was served. Responses
are lists at their top level (topics, groups, results, …), so the largest top-level array is written ``SLICE`` elements
at a time with a yield to the loop in between; everything else is kio's own encoding.

How the bytes around the array are found without kio's private per-field writers: the body is encoded twice with
that array replaced, by ``()`` (bytes A = prefix + count 0 + suffix) and by its first element alone (bytes B =
prefix + count 1 + element + suffix). Counts 0 and 1 differ only in their last byte (compact ``01``/``02``, legacy
``00000000``/``00000001``), so the first byte where A and B differ ends the count, and the prefix and suffix follow.

Worked example — DescribeGroups v5 (flexible), ``throttle_time`` 0 and 3 groups: A = ``00000000`` ``01`` ``00``,
B = ``00000000`` ``02`` <group> ``00``: they differ first at byte 4, the compact count is one byte, so the prefix is
A[:4], the suffix A[5:], and the answer is prefix + uvarint(3 + 1) + the 3 groups, a slice at a time + suffix.

Cost model: the same kio work as one ``encode_response`` plus two encodings of the body without its array, and one
loop turn per ``SLICE`` elements; a response whose arrays are all at most ``SLICE`` long is encoded in one go.

Why ``Any`` stays here: a body is any response entity of any version, and its arrays are found by walking its
dataclass fields at run time, as kio's writer does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import struct
from typing import Any

from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import uvarint

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import response_schema, write_response_header, writer_for
from kafkaguard.protocol.framing import encode_frame
from kafkaguard.protocol.lengths import unwrap

#: Elements written between two yields to the loop: sized for about 1 ms of kio's writer (more when flexible).
SLICE = 100

_INT32 = struct.Struct(">i")


def sliced_array(body: Any) -> str | None:
    """The top-level array of ``body`` to write in slices: its longest array of entities, if longer than ``SLICE``
    (None: ``codec.encode_response`` in one go is as good, without a coroutine; this is asked of every response)."""
    return None if isinstance(body, bytes) else _longest_array(body)


async def encode_response_in_slices(
    api_key: ApiKey, api_version: int, correlation_id: int, body: Any, name: str
) -> bytes:
    """``codec.encode_response``'s bytes, yielding to the loop every ``SLICE`` elements of ``body``'s array
    ``name`` (as ``sliced_array`` names it)."""
    items = getattr(body, name)
    flexible = bool(response_schema(api_key, api_version).__flexible__)
    emptied = _encode(dataclasses.replace(body, **{name: ()}))
    one = _encode(dataclasses.replace(body, **{name: items[:1]}))
    count_end = next(i for i, (a, b) in enumerate(zip(emptied, one, strict=False)) if a != b) + 1
    count_size = 1 if flexible else 4
    prefix, suffix = emptied[: count_end - count_size], emptied[count_end:]

    buffer = io.BytesIO()
    write_response_header(buffer, api_key, api_version, correlation_id)
    buffer.write(prefix)
    if flexible:
        write_unsigned_varint(buffer, uvarint(len(items) + 1))
    else:
        buffer.write(_INT32.pack(len(items)))
    element = writer_for(type(items[0]))
    for start in range(0, len(items), SLICE):
        for item in items[start : start + SLICE]:
            element(buffer, item)
        await asyncio.sleep(0)  # let other connections be served between slices
    buffer.write(suffix)
    return encode_frame(buffer.getvalue())


def _longest_array(body: Any) -> str | None:
    """The name of ``body``'s longest top-level array of entities, if it is longer than ``SLICE``."""
    best, longest = None, SLICE
    for name in _entity_arrays(type(body)):
        value = getattr(body, name)
        if value is not None and len(value) > longest:
            best, longest = name, len(value)
    return best


_ENTITY_ARRAYS: dict[type[Any], tuple[str, ...]] = {}


def _entity_arrays(cls: type[Any]) -> tuple[str, ...]:
    """The untagged top-level fields of ``cls`` that are arrays of entities (tagged ones are written inside the
    tagged-field section, with a size), found once per class: this runs for every response."""
    names = _ENTITY_ARRAYS.get(cls)
    if names is None:
        names = _ENTITY_ARRAYS[cls] = tuple(
            field.name
            for field in dataclasses.fields(cls)
            if field.metadata.get("tag") is None
            and (unwrapped := unwrap(field.type))[1]
            and dataclasses.is_dataclass(unwrapped[0])
        )
    return names


def _encode(body: Any) -> bytes:
    buffer = io.BytesIO()
    writer_for(type(body))(buffer, body)
    return buffer.getvalue()

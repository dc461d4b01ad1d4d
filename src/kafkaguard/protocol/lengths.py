"""Every length a request body declares is checked against the bytes that remain, before kio decodes it.

Why this exists: kio's native (Rust) reader reserves memory from an array count taken from the wire. A Metadata v12
body of three bytes declaring a compact array of 1.5e9 topics makes the allocation fail and Rust aborts the whole
process, which Python cannot catch. Kafka's generated readers refuse a collection longer than the bytes that remain
(``if (arrayLength > _readable.remaining()) throw``); kio 0.6.5 has no such option, so this module walks the body
once without allocating, with the same schema kio decodes with, and refuses what cannot be honest.

The walk is generated from kio's schema classes (the dataclass fields and their ``kafka_type`` / ``tag`` metadata,
the same tables kio's own writer is built from), never written per API. For each entity, in field order:

* fixed-size primitives (int8 … int64, float64, uuid, bool) must fit;
* strings and byte fields (legacy int16 / int32 length, or compact unsigned-varint length + 1) must fit;
* arrays (legacy int32 count, or compact count + 1) must satisfy ``count × smallest element ≤ remaining`` — stronger
  than Kafka's ``count ≤ remaining`` and still true of every valid encoding, so the walk's own loop is bounded by
  the frame's size; fixed-size elements are skipped in one step;
* nullable structs (KIP-893) carry a one-byte marker;
* a null (length -1) in a field the schema does not declare nullable is refused, as Kafka's readers refuse it
  ("non-nullable field … was serialized as null"), so a handler never sees None where its type says a value;
* flexible entities end with tagged fields: a count, then per field a tag, a size that must fit, and the field's
  bytes; a tag this schema knows is checked inside its own size, an unknown one is skipped (as Kafka does).

Worked example — Metadata v12, body ``b"\\x81\\xde\\xa0\\xcb\\x05"`` (topics: compact array, uvarint 1,500,000,001):
``count = 1,500,000,000``, the smallest MetadataRequestTopic is 18 bytes (uuid 16, compact string 1, tagged-field
count 1), ``18 × 1.5e9 > 0 remaining`` → LengthError "topics: 1500000000 elements of at least 18 bytes, 0 bytes left".

Cost model: one Python step per field and per array element actually present; a valid request of n bytes costs
O(number of its fields), independent of what its counts claim. Valid requests decode exactly as before: the walk
only raises, it never changes what kio reads.

Why ``Any`` stays here: the walk is compiled from any kio schema class and its field annotations
(``tuple[X, ...] | None`` read with ``get_origin``/``get_args``), found at run time; no static type covers every
generated class, and the walk never reads a decoded value.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any, get_args, get_origin

from kafkaguard.protocol.errors import ProtocolError, VarintTooLong
from kafkaguard.protocol.varint import uvarint

#: Items (array elements, at every depth) a request may carry when no limit is given: Kafka's own clients stay far
#: below it (``Settings.max_request_items`` sets the server's and the proxy's).
DEFAULT_MAX_ITEMS = 10_000
#: Tagged fields one entity may carry. Kafka's schemas declare at most a handful of tags per entity and its clients
#: send none they do not know; 135k empty unknown ones fit in 512 KiB, each walked before anything is refused.
MAX_TAGGED_FIELDS = 64


class _Budget:
    """The items a request may still declare; every array takes its count from it before its elements are walked."""

    __slots__ = ("items", "limit")

    def __init__(self, limit: int) -> None:
        self.items = self.limit = limit


#: (buffer, offset, end, budget) → offset after the value. Raises LengthError.
Check = Callable[[bytes, int, int, _Budget], int]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

#: Bytes of each fixed-size kio ``kafka_type``.
FIXED_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE = frozenset({"string", "bytes", "records"})


class LengthError(ProtocolError):
    """A request declares a length or count that the bytes after it cannot hold."""


class TooManyItemsError(LengthError):
    """A request carries more items (array elements, all arrays together) than the limit allows."""


def check_body(schema: type[Any], buffer: bytes, offset: int, *, max_items: int | None = DEFAULT_MAX_ITEMS) -> None:
    """Walk a request body of ``schema`` (a kio request class) starting at ``offset``.

    Trailing bytes after the body are allowed (kio ignores them; see ``codec``). ``max_items`` bounds the array
    elements of the whole body (None: only by the bytes; for answers of a trusted upstream).

    :raises LengthError: a declared length or count exceeds the bytes that remain, or the body is truncated.
    :raises TooManyItemsError: the arrays declare more than ``max_items`` elements together.
    """
    budget = _Budget(max_items if max_items is not None else len(buffer))  # an element takes at least one byte
    _entity_check(schema)(buffer, offset, len(buffer), budget)


# ------------------------------------------------------------------------------------------------- primitives


def _need(offset: int, size: int, end: int, what: str) -> int:
    if size > end - offset:
        raise LengthError(f"{what}: needs {size} bytes, {max(end - offset, 0)} left")
    return offset + size


def _uvarint(buffer: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's int32 varints) that ends by ``end`` (``varint.uvarint``
    reads to the end of the buffer: a varint crossing ``end`` is truncated here, as one crossing the buffer's end)."""
    try:
        value, after = uvarint(buffer, offset)
    except IndexError:
        raise LengthError(f"{what}: truncated varint") from None
    except VarintTooLong:
        if end - offset < 5:  # its 5 bytes cross ``end``: cut off there before it is too long
            raise LengthError(f"{what}: truncated varint") from None
        raise LengthError(f"{what}: varint longer than 5 bytes") from None
    if after > end:
        raise LengthError(f"{what}: truncated varint")
    return value, after


def _fixed(size: int, what: str) -> Check:
    def check(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        if size > end - offset:
            raise LengthError(f"{what}: needs {size} bytes, {max(end - offset, 0)} left")
        return offset + size

    return check


def _legacy_length(buffer: bytes, offset: int, end: int, wide: bool, what: str) -> tuple[int, int]:
    """A legacy int16 (strings) or int32 (bytes, arrays) length; -1 is null and returned as -1."""
    layout = _INT32 if wide else _INT16
    offset = _need(offset, layout.size, end, what)
    (length,) = layout.unpack_from(buffer, offset - layout.size)
    if length < -1:
        raise LengthError(f"{what}: negative length {length}")
    return length, offset


def _compact_length(buffer: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
    """A compact length: unsigned varint N, N = 0 is null (returned as -1), else N - 1."""
    value, offset = _uvarint(buffer, offset, end, what)
    return value - 1, offset


def _null(what: str) -> LengthError:
    return LengthError(f"{what}: non-nullable field was serialized as null")


def _sized(flexible: bool, wide: bool, nullable: bool, what: str) -> Check:
    """A string (wide=False) or bytes/records value (wide=True): a length, then that many bytes."""

    def check(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        if flexible:
            length, offset = _compact_length(buffer, offset, end, what)
        else:
            length, offset = _legacy_length(buffer, offset, end, wide, what)
        if length <= 0:
            if length < 0 and not nullable:
                raise _null(what)
            return offset
        return _need(offset, length, end, what)

    return check


# --------------------------------------------------------------------------------------------- compiled schema

#: Per kio entity class: the check of one instance and the fewest bytes one instance can take.
_ENTITIES: dict[type[Any], tuple[Check, int]] = {}


def _entity_check(entity: type[Any]) -> Check:
    return _compile(entity)[0]


def _compile(entity: type[Any]) -> tuple[Check, int]:
    compiled = _ENTITIES.get(entity)
    if compiled is None:
        compiled = _ENTITIES[entity] = _compile_entity(entity)
    return compiled


def _compile_entity(entity: type[Any]) -> tuple[Check, int]:
    flexible = bool(entity.__flexible__)
    name = entity.__name__
    checks: list[Check] = []
    smallest = 0
    tagged: dict[int, Check] = {}
    for field in dataclasses.fields(entity):
        what = f"{name}.{field.name}"
        tag = field.metadata.get("tag")
        check, size = _compile_field(field, flexible, what, tagged=tag is not None)
        if tag is not None:
            tagged[int(tag)] = check
            continue
        checks.append(check)
        smallest += size
    _HEADS[entity] = _sequence(tuple(checks))
    if flexible:
        checks.append(_tagged_fields(tagged, f"{name} tagged fields"))
        smallest += 1
    return _sequence(tuple(checks)), smallest


def _sequence(steps: tuple[Check, ...]) -> Check:
    def check_entity(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        for step in steps:
            offset = step(buffer, offset, end, budget)
        return offset

    return check_entity


#: Per kio entity class: the walk of its fields before its own tagged-field section (``tagged_fields_at``).
_HEADS: dict[type[Any], Check] = {}


def tagged_fields_at(schema: type[Any], buffer: bytes, offset: int) -> int:
    """Where the tagged-field section of a flexible body of ``schema`` starting at ``offset`` begins: every field
    before it walked and checked as ``check_body`` walks it (bounded by the bytes only), nothing decoded. A reader
    that needs only to know whether a body carries top-level tagged fields (the proxy's Produce v10+ fast path,
    KIP-951 ``node_endpoints``) reads the count there instead of decoding the body.

    :raises LengthError: a length or count before that section does not fit, or the body ends before it.
    """
    if not schema.__flexible__:
        raise TypeError(f"{schema.__name__} v{schema.__version__} is not flexible: it has no tagged fields")
    _compile(schema)
    return _HEADS[schema](buffer, offset, len(buffer), _Budget(len(buffer)))


def _compile_field(field: dataclasses.Field[Any], flexible: bool, what: str, *, tagged: bool) -> tuple[Check, int]:
    """The check of one field and the fewest bytes it can take."""
    inner, is_array, optional = unwrap(field.type)
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):  # a field's type is a class, never an instance
        element_check, element_size = _compile(inner)
        if not is_array and optional and not tagged:
            return _nullable_struct(element_check, what), 1
    else:
        kafka_type = field.metadata.get("kafka_type")
        if kafka_type in FIXED_SIZES:
            element_size = FIXED_SIZES[kafka_type]
            element_check = _fixed(element_size, what)
        elif kafka_type in _VARIABLE:
            nullable = tagged or (optional and not is_array)  # in an array, None would be the array's own null
            element_check = _sized(flexible, wide=kafka_type != "string", nullable=nullable, what=what)
            element_size = 1 if flexible else (2 if kafka_type == "string" else 4)
        else:
            # Not a ProtocolError: a kio field type this table does not know is a gap in this module, the same for
            # every request of that schema whatever its bytes; test_lengths compiles every supported schema.
            raise TypeError(f"{what}: kafka_type {kafka_type!r} is unknown to the length check")
        if not is_array:
            return element_check, element_size
        if kafka_type in FIXED_SIZES:
            return _fixed_array(element_size, flexible, optional or tagged, what), (1 if flexible else 4)
    if not is_array:
        return element_check, element_size
    return _array(element_check, element_size, flexible, optional or tagged, what), (1 if flexible else 4)


def unwrap(annotation: Any) -> tuple[Any, bool, bool]:
    """(element type, is it an array, is it nullable) of a kio field annotation such as ``tuple[X, ...] | None``."""
    optional = False
    origin = get_origin(annotation)
    if origin is not None and origin is not tuple:  # a union with None
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(args) != len(get_args(annotation))
        annotation = args[0]
        origin = get_origin(annotation)
    if origin is tuple:
        return get_args(annotation)[0], True, optional
    return annotation, False, optional


def _nullable_struct(element: Check, what: str) -> Check:
    def check(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        offset = _need(offset, 1, end, what)
        if buffer[offset - 1] == 0xFF:  # KIP-893's null marker, int8 -1
            return offset
        return element(buffer, offset, end, budget)

    return check


def _array_count(
    buffer: bytes, offset: int, end: int, budget: _Budget, flexible: bool, nullable: bool, smallest: int, what: str
) -> tuple[int, int]:
    if flexible:
        count, offset = _compact_length(buffer, offset, end, what)
    else:
        count, offset = _legacy_length(buffer, offset, end, True, what)
    if count < 0 and not nullable:
        raise _null(what)
    if count > 0 and count * max(smallest, 1) > end - offset:
        raise LengthError(f"{what}: {count} elements of at least {smallest} bytes, {max(end - offset, 0)} bytes left")
    if count > 0:
        budget.items -= count
        if budget.items < 0:  # before a single element is walked: the cost of refusing does not grow with the count
            raise TooManyItemsError(f"{what}: more than {budget.limit} items in one request")
    return count, offset


def _fixed_array(size: int, flexible: bool, nullable: bool, what: str) -> Check:
    def check(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        count, offset = _array_count(buffer, offset, end, budget, flexible, nullable, size, what)
        return offset + size * count if count > 0 else offset

    return check


def _array(element: Check, smallest: int, flexible: bool, nullable: bool, what: str) -> Check:
    def check(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        count, offset = _array_count(buffer, offset, end, budget, flexible, nullable, smallest, what)
        for _ in range(count):
            offset = element(buffer, offset, end, budget)
        return offset

    return check


def _tagged_fields(known: dict[int, Check], what: str) -> Check:
    def check(buffer: bytes, offset: int, end: int, budget: _Budget) -> int:
        count, offset = _uvarint(buffer, offset, end, what)
        if count * 2 > end - offset:  # each tagged field takes at least a tag and a size byte
            raise LengthError(f"{what}: {count} fields, {max(end - offset, 0)} bytes left")
        if count > MAX_TAGGED_FIELDS:
            raise LengthError(f"{what}: {count} tagged fields, more than the {MAX_TAGGED_FIELDS} allowed")
        for _ in range(count):
            tag, offset = _uvarint(buffer, offset, end, what)
            size, offset = _uvarint(buffer, offset, end, what)
            field_end = _need(offset, size, end, f"{what} (tag {tag})")
            inner = known.get(tag)
            if inner is not None:
                inner(buffer, offset, field_end, budget)  # a known field is checked inside its own size
            offset = field_end
        return offset

    return check

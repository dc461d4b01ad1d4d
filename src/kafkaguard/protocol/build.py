"""Building kio response entities across versions.

kio generates one class per API version, and fields come and go between versions (``throttle_time`` appears in
v1, ``cluster_authorized_operations`` leaves Metadata at v11 …). Handlers describe a response once, with every
field any version has, and ``build`` keeps the fields the requested version's class declares. A name that no
version kio knows declares is a bug in the handler (a typo would otherwise be dropped silently):
``build`` raises ``TypeError`` for it. ``build`` is typed ``**Any``, so that error waits for run time: the server's
handlers call it through ``protocol.builders`` (generated), whose typed wrappers make a misspelt field, a field no
supported version declares or a value of the wrong type a mypy error.

Dropping is right for a response: a client of v1 never hears of a field v2 added. It is wrong for a request the
proxy sends upstream: a field its version lacks is read by the broker as Kafka's default for it, so a dropped value
silently becomes that default (Metadata v1–v3 has no ``allow_auto_topic_creation``; Kafka reads its absence as true,
and a dropped ``False`` becomes "create every topic named"). ``build_request``, ``rebuild_request`` and
``convert_request`` are the strict variants for requests: they drop a field only when its value is what its absence
means (``absent_value``), and raise ``WideningRequestError`` for any other value.

Why ``Any`` stays here: this is the one untyped implementation behind the generated typed wrappers
(``protocol.builders``, ``proxy.builders``); a field's value is whatever its class of that version declares, which
only the wrappers, one per entity, can name.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final, TypeVar
from uuid import UUID

from kafkaguard.protocol.lengths import unwrap

#: The throttle_time of every response: kafkaguard does not throttle.
NO_THROTTLE = timedelta(0)

T = TypeVar("T")
_VERSION_IN_MODULE = re.compile(r"\.v\d+\.")


def build(cls: type[T], **values: Any) -> T:
    """An instance of ``cls`` from the values its version has; the rest are dropped, defaults fill the gaps.

    :raises TypeError: a value is named after a field that no version of this entity declares.
    """
    return build_fields(cls, values)


def build_fields(cls: type[T], values: Mapping[str, Any]) -> T:
    """``build`` from a mapping: ``protocol.builders``' wrappers pass theirs on without unpacking it again (a
    Metadata answer builds one entity per partition)."""
    names = _field_names(cls)
    kept: dict[str, Any] = {}
    for name, value in values.items():
        if name in names:
            kept[name] = value
        elif name not in _declared_in_any_version(cls):
            # A bare TypeError on purpose (as for a wrong keyword argument): a handler of this server names a field
            # kio never declares, a programming error the tests find; no client input reaches this.
            raise TypeError(f"{cls.__name__} declares no field {name!r} in any version")
    return cls(**kept)


def rebuild(entity: T, **changes: Any) -> T:
    """``entity`` with ``changes`` applied to the fields its version has (as ``build``: others are dropped, a name
    no version declares raises ``TypeError``)."""
    return rebuild_fields(entity, changes)


def rebuild_fields(entity: T, changes: Mapping[str, Any]) -> T:
    """``rebuild`` from a mapping: the generated ``rebuild_*`` wrappers (``protocol.builders``, ``proxy.builders``)
    pass theirs on without unpacking it again."""
    cls = type(entity)
    names = _field_names(cls)
    kept = {name: value for name, value in changes.items() if name in names}
    for name in changes.keys() - kept.keys():
        if name not in _declared_in_any_version(cls):
            raise TypeError(f"{cls.__name__} declares no field {name!r} in any version")
    # T is any kio entity (a dataclass), which a TypeVar cannot say without a bound every union alias would miss
    return dataclasses.replace(entity, **kept)  # type: ignore[type-var]


class WideningRequestError(TypeError):
    """A request would go upstream without a field its version lacks, whose value differs from what the field's
    absence means: the broker would read more than the proxy authorized. A bare ``TypeError`` kind on purpose, as
    ``build``'s: it is a bug of the calling handler (it must forward at a version that has the field), never client
    input; the connection fails closed (nothing is sent)."""


def build_request(cls: type[T], **values: Any) -> T:
    """As ``build``, for a request the proxy sends: a value for a field ``cls``'s version lacks is dropped only when
    it is what the field's absence means.

    :raises WideningRequestError: dropping a value would change what the request asks for.
    :raises TypeError: a value is named after a field that no version of this entity declares.
    """
    _refuse_widening(cls, values)
    return build(cls, **values)


def rebuild_request(entity: T, **changes: Any) -> T:
    """As ``rebuild``, for a request the proxy sends (see ``build_request``).

    :raises WideningRequestError: dropping a change would change what the request asks for.
    :raises TypeError: a change is named after a field that no version of this entity declares.
    """
    return rebuild_request_fields(entity, changes)


def rebuild_request_fields(entity: T, changes: Mapping[str, Any]) -> T:
    """``rebuild_request`` from a mapping (the generated ``rebuild_*_request*`` wrappers of ``proxy.builders``)."""
    _refuse_widening(type(entity), changes)
    return rebuild_fields(entity, changes)


def convert_request(entity: Any, cls: type[T]) -> T:
    """``entity`` (a request, nested entities included) as the same entity of another version, ``cls``: a field
    ``cls`` lacks is dropped only when it holds what its absence means; a field only ``cls`` has gets the value its
    absence in ``entity``'s version meant (kio's default, Kafka's). Metadata v1 → v4 keeps "auto-create": v4's
    ``allow_auto_topic_creation`` defaults to true, as v1's missing field is read.

    :raises WideningRequestError: ``cls`` cannot say what ``entity`` says.
    """
    return _convert(entity, cls, strict=True)  # type: ignore[no-any-return]  # cls(**values): a T, built untyped


def convert_response(entity: Any, cls: type[T]) -> T:
    """``entity`` (a response) as the same entity of another version ``cls``: fields ``cls`` lacks are dropped (a
    client never hears of a field its version lacks), fields only ``cls`` has get their default.

    :raises TypeError: a field only ``cls`` has has no default (nothing says what it should hold).
    """
    return _convert(entity, cls, strict=False)  # type: ignore[no-any-return]  # as convert_request


class _Unknown:
    def __repr__(self) -> str:
        return "<no known default>"


#: ``absent_value`` of a field whose absence means nothing known (a struct without a default): any value is refused.
UNKNOWN_ABSENCE: Final = _Unknown()
_ZERO_UUID = UUID(int=0)
_ZEROS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": _ZERO_UUID,
    "timedelta_i32": timedelta(0),
    "timedelta_i64": timedelta(0),
}


def absent_value(cls: type[Any], name: str) -> Any:
    """What field ``name`` of entity ``cls`` holds when a version without it is read: its default in the versions
    that declare it (Kafka's generated classes have one default per field, for every version; kio copies it), else
    the zero of its type (Kafka's default default: false, 0, "", empty array, the zero UUID); ``UNKNOWN_ABSENCE`` for
    a struct. Metadata's ``allow_auto_topic_creation`` → True; Fetch's ``session_epoch`` → -1.

    :raises TypeError: no version of this entity declares ``name``.
    """
    key = (cls, name)
    if key not in _ABSENT:
        _ABSENT[key] = _find_absent_value(cls, name)  # a Fetch v4-v6 relay asks on every sessionful request
    return _ABSENT[key]


def _find_absent_value(cls: type[Any], name: str) -> Any:
    for twin in _versions_of(cls):
        for found in dataclasses.fields(twin):
            if found.name != name:
                continue
            if found.default is not dataclasses.MISSING:
                return found.default
            if found.default_factory is not dataclasses.MISSING:
                return found.default_factory()
            _element, is_array, _optional = unwrap(found.type)
            if is_array:
                return ()
            return _ZEROS.get(found.metadata.get("kafka_type", ""), UNKNOWN_ABSENCE)
    raise TypeError(f"{cls.__name__} declares no field {name!r} in any version")


def _means_absence(value: Any, absent: Any) -> bool:
    if absent is UNKNOWN_ABSENCE:
        return False
    if value is None or absent is None:
        return value is absent or absent == _ZERO_UUID  # kio writes a None uuid as the zero UUID
    if isinstance(absent, tuple):
        return isinstance(value, tuple) and not value  # an empty list, whatever its element type
    return bool(value == absent)


def _refuse_widening(cls: type[Any], values: Mapping[str, Any]) -> None:
    names = _field_names(cls)
    for name, value in values.items():
        if name in names:
            continue
        absent = absent_value(cls, name)  # raises TypeError for a name no version declares
        if not _means_absence(value, absent):
            raise WideningRequestError(
                f"{cls.__name__} v{cls.__version__} has no field {name!r}: {value!r} would be read as {absent!r}"
            )


def _convert(entity: Any, cls: type[Any], *, strict: bool) -> Any:
    source = type(entity)
    target_names = _field_names(cls)
    values: dict[str, Any] = {}
    for name in _field_names(source):
        value = getattr(entity, name)
        if name not in target_names:
            if strict:
                _refuse_widening(cls, {name: value})
            continue
        values[name] = _convert_value(value, cls, strict=strict)
    for found in dataclasses.fields(cls):
        # A field only ``cls`` has: what its absence from ``entity``'s version meant (kio's defaults say it too).
        if found.name not in values and found.default is dataclasses.MISSING:
            absent = absent_value(cls, found.name)
            if absent is UNKNOWN_ABSENCE:
                raise TypeError(f"{cls.__name__} v{cls.__version__}: nothing says what {found.name!r} should hold")
            values[found.name] = absent
    return cls(**values)


def _convert_value(value: Any, cls: type[Any], *, strict: bool) -> Any:
    """A field's value for the entity ``cls``: nested entities become ``cls``'s version of them."""
    if isinstance(value, tuple):
        return tuple(_convert_value(item, cls, strict=strict) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _convert(value, nested(cls, type(value).__name__), strict=strict)
    return value


def nested(cls: type[Any], name: str) -> type[Any]:
    """The nested entity class ``name`` of the same API version as ``cls`` (e.g. ``MetadataResponseTopic``)."""
    found = getattr(sys.modules[cls.__module__], name)
    if not isinstance(found, type):
        # A programming error in the calling handler (not a KafkaguardError: no client input reaches this).
        raise TypeError(f"{cls.__module__}.{name} is not an entity class")
    return found


def has_field(cls: type[Any], name: str) -> bool:
    return name in _field_names(cls)


#: Above every version kio 0.6 generates for any API (Fetch goes to 18).
_MAX_KIO_VERSION = 30
_NAMES: dict[type[Any], frozenset[str]] = {}
_DECLARED: dict[type[Any], frozenset[str]] = {}
_VERSIONS: dict[type[Any], list[type[Any]]] = {}
_ABSENT: dict[tuple[type[Any], str], Any] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def _versions_of(cls: type[Any]) -> list[type[Any]]:
    """The entity ``cls`` names, in every version of its API that kio knows, lowest first."""
    versions = _VERSIONS.get(cls)
    if versions is None:
        versions = []
        for version in range(_MAX_KIO_VERSION + 1):
            try:
                module = importlib.import_module(_VERSION_IN_MODULE.sub(f".v{version}.", cls.__module__))
            except ImportError:
                continue  # kio has no such version of this API
            twin = getattr(module, cls.__name__, None)
            if isinstance(twin, type):
                versions.append(twin)
        _VERSIONS[cls] = versions
    return versions


def _declared_in_any_version(cls: type[Any]) -> frozenset[str]:
    """Field names of the entity ``cls`` names, in every version of its API that kio knows (the server and the
    proxy each offer a subset of them)."""
    declared = _DECLARED.get(cls)
    if declared is None:
        declared = _DECLARED[cls] = frozenset().union(*(_field_names(twin) for twin in _versions_of(cls)))
    return declared

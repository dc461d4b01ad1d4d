"""Building kio response entities across versions.

kio generates one class per API version, and fields come and go between versions (``throttle_time`` appears in
v1, ``cluster_authorized_operations`` leaves Metadata at v11 …). Handlers describe a response once, with every
field any version has, and ``build`` keeps the fields the requested version's class declares. A name that no
version kio knows declares is a bug in the handler (a typo would otherwise be dropped silently):
``build`` raises ``TypeError`` for it.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
from datetime import timedelta
from typing import Any, TypeVar

#: The throttle_time of every response: kafkaguard does not throttle.
NO_THROTTLE = timedelta(0)

T = TypeVar("T")
_VERSION_IN_MODULE = re.compile(r"\.v\d+\.")


def build(cls: type[T], **values: Any) -> T:
    """An instance of ``cls`` from the values its version has; the rest are dropped, defaults fill the gaps.

    :raises TypeError: a value is named after a field that no version of this entity declares.
    """
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
    cls = type(entity)
    names = _field_names(cls)
    kept = {name: value for name, value in changes.items() if name in names}
    for name in changes.keys() - kept.keys():
        if name not in _declared_in_any_version(cls):
            raise TypeError(f"{cls.__name__} declares no field {name!r} in any version")
    return dataclasses.replace(entity, **kept)  # type: ignore[type-var]


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


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def _declared_in_any_version(cls: type[Any]) -> frozenset[str]:
    """Field names of the entity ``cls`` names, in every version of its API that kio knows (the server and the
    proxy each offer a subset of them)."""
    declared = _DECLARED.get(cls)
    if declared is None:
        names: set[str] = set()
        for version in range(_MAX_KIO_VERSION + 1):
            try:
                module = importlib.import_module(_VERSION_IN_MODULE.sub(f".v{version}.", cls.__module__))
            except ImportError:
                continue  # kio has no such version of this API
            twin = getattr(module, cls.__name__, None)
            if twin is not None:
                names.update(_field_names(twin))
        declared = _DECLARED[cls] = frozenset(names)
    return declared

"""Building kio response entities across versions.

kio generates one class per API version, and fields come and go between versions (``throttle_time`` appears in
v1, ``cluster_authorized_operations`` leaves Metadata at v11 …). Handlers describe a response once, with every
field any version has, and ``build`` keeps the fields the requested version's class declares.
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import timedelta
from typing import Any

#: The throttle_time of every response: kafkaguard does not throttle.
NO_THROTTLE = timedelta(0)


def build(cls: type[Any], **values: Any) -> Any:
    """An instance of ``cls`` from the values its version has; the rest are dropped, defaults fill the gaps."""
    names = _field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


def nested(cls: type[Any], name: str) -> type[Any]:
    """The nested entity class ``name`` of the same API version as ``cls`` (e.g. ``MetadataResponseTopic``)."""
    found = getattr(sys.modules[cls.__module__], name)
    if not isinstance(found, type):
        raise TypeError(f"{cls.__module__}.{name} is not an entity class")
    return found


def has_field(cls: type[Any], name: str) -> bool:
    return name in _field_names(cls)


_NAMES: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names

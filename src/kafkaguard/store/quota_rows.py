"""Client quotas as table rows, shared by the SQL stores (SQLite, PostgreSQL): the columns are the same in both.

A row is ``(entity, key, value)``; the entity is the JSON array of its ``[type, name]`` pairs (``store.schema``),
the value the float's ``repr``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kafkaguard.store.ports import QuotaEntity, QuotaRecord, quota_record_order


def entity_text(entity: QuotaEntity) -> str:
    """The ``entity`` column of a quota entity."""
    return json.dumps([list(pair) for pair in entity])


def value_text(value: float) -> str:
    """The ``value`` column of a quota value (``repr`` keeps every bit of the float)."""
    return repr(float(value))


def quota_records(rows: Iterable[tuple[Any, ...]]) -> tuple[QuotaRecord, ...]:
    """Every entity of the ``(entity, key, value)`` rows with its values, sorted by entity."""
    by_entity: dict[QuotaEntity, dict[str, float]] = {}
    for entity, key, value in rows:
        by_entity.setdefault(_entity(entity), {})[key] = float(value)
    return tuple(sorted((QuotaRecord(entity, values) for entity, values in by_entity.items()), key=quota_record_order))


def _entity(text: str) -> QuotaEntity:
    return tuple((str(entity_type), None if name is None else str(name)) for entity_type, name in json.loads(text))

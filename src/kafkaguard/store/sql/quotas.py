"""The ``client_quotas`` table: ``QuotaStore`` on either SQL database.

One row per entity and quota key: ``(entity, key, value)``, the entity as the JSON array of its ``[type, name]``
pairs sorted by type (a null name is the default entity), the value as the float's ``repr`` (text keeps every bit,
NaN and -0.0 included). Every row written or deleted bumps the quota version (the schema's triggers, in the same
transaction), after the write has locked its counter; ``quota_version()`` is as cheap as ``acl_version()``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from kafkaguard.store.ports import (
    History,
    QuotaChange,
    QuotaEntity,
    QuotaRecord,
    QuotaSnapshot,
    QuotaWrite,
    quota_record_order,
)
from kafkaguard.store.sql.history import written
from kafkaguard.store.sql.transaction import Database


class QuotaTables:
    """``QuotaStore`` on the ``client_quotas`` table of ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def quota_version(self) -> int:
        return self._db.polled_counter("quota_version")

    def load_quotas(self) -> QuotaSnapshot:
        with self._db.read() as tx:
            version = tx.counter("quota_version")
            rows = tx.all("SELECT entity, key, value FROM client_quotas")
        return QuotaSnapshot(_quota_records(rows), version)

    def alter_quotas(self, changes: Sequence[QuotaChange], *, history: History[QuotaWrite] | None = None) -> QuotaWrite:
        with self._db.write() as tx:
            base = tx.lock_counter("quota_version")
            for change in changes:
                entity = json.dumps([list(pair) for pair in change.entity])
                if change.value is None:
                    tx.run("DELETE FROM client_quotas WHERE entity = ? AND key = ?", (entity, change.key))
                else:
                    tx.run(
                        "INSERT INTO client_quotas (entity, key, value) VALUES (?, ?, ?) "
                        "ON CONFLICT (entity, key) DO UPDATE SET value = excluded.value",
                        (entity, change.key, repr(float(change.value))),
                    )
            # The schema's triggers have counted every row written or deleted.
            version = tx.counter("quota_version")
            self._db.remember_counter("quota_version", version)
            return written(tx, history, QuotaWrite(base, version))


def _quota_records(rows: Iterable[tuple[Any, ...]]) -> tuple[QuotaRecord, ...]:
    """Every entity of the ``(entity, key, value)`` rows with its values, sorted by entity."""
    by_entity: dict[QuotaEntity, dict[str, float]] = {}
    for entity, key, value in rows:
        by_entity.setdefault(_entity(entity), {})[key] = float(value)
    return tuple(sorted((QuotaRecord(entity, values) for entity, values in by_entity.items()), key=quota_record_order))


def _entity(text: str) -> QuotaEntity:
    return tuple((str(entity_type), None if name is None else str(name)) for entity_type, name in json.loads(text))

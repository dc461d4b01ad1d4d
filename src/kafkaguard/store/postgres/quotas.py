"""The ``client_quotas`` table on PostgreSQL: ``QuotaStore``, the twin of ``store.sqlite.quotas``.

One row per entity and quota key; the entity is the JSON array of its ``[type, name]`` pairs. Every row written or
deleted bumps the quota version (a trigger, in the same transaction), after the write has locked its counter row.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaguard.store.ports import QuotaChange, QuotaSnapshot, QuotaWrite
from kafkaguard.store.postgres.connection import Database, counter, lock_counter, read_counter
from kafkaguard.store.quota_rows import entity_text, quota_records, value_text


class QuotaTables:
    """``QuotaStore`` on the ``client_quotas`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def quota_version(self) -> int:
        return read_counter(self._db, "quota_version")

    def load_quotas(self) -> QuotaSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "quota_version")
            rows = conn.execute("SELECT entity, key, value FROM client_quotas").fetchall()
        return QuotaSnapshot(quota_records(rows), version)

    def alter_quotas(self, changes: Sequence[QuotaChange]) -> QuotaWrite:
        with self._db.write() as conn:
            base = lock_counter(conn, "quota_version")
            for change in changes:
                entity = entity_text(change.entity)
                if change.value is None:
                    conn.execute("DELETE FROM client_quotas WHERE entity = %s AND key = %s", (entity, change.key))
                else:
                    conn.execute(
                        "INSERT INTO client_quotas (entity, key, value) VALUES (%s, %s, %s) "
                        "ON CONFLICT (entity, key) DO UPDATE SET value = excluded.value",
                        (entity, change.key, value_text(change.value)),
                    )
            # The schema's trigger has counted every row written or deleted.
            version = counter(conn, "quota_version")
        return QuotaWrite(base, version)

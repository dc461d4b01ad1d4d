"""The ``client_quotas`` table: ``QuotaStore`` on the shared connection.

One row per entity and quota key; the entity is the JSON array of its ``[type, name]`` pairs (``store.schema``).
Every row written or deleted bumps the quota version (triggers, in the same transaction), so ``quota_version()``
is as cheap as ``acl_version()``.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaguard.store.ports import QuotaChange, QuotaSnapshot, QuotaWrite
from kafkaguard.store.quota_rows import entity_text, quota_records, value_text
from kafkaguard.store.sqlite.connection import Database, counter


class QuotaTables:
    """``QuotaStore`` on the ``client_quotas`` table of ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def quota_version(self) -> int:
        return self._db.polled_counter("quota_version")

    def load_quotas(self) -> QuotaSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "quota_version")
            rows = conn.execute("SELECT entity, key, value FROM client_quotas").fetchall()
        return QuotaSnapshot(quota_records(rows), version)

    def alter_quotas(self, changes: Sequence[QuotaChange]) -> QuotaWrite:
        with self._db.write() as conn:
            base = counter(conn, "quota_version")
            for change in changes:
                entity = entity_text(change.entity)
                if change.value is None:
                    conn.execute("DELETE FROM client_quotas WHERE entity = ? AND key = ?", (entity, change.key))
                else:
                    conn.execute(
                        "INSERT INTO client_quotas (entity, key, value) VALUES (?, ?, ?) "
                        "ON CONFLICT (entity, key) DO UPDATE SET value = excluded.value",
                        (entity, change.key, value_text(change.value)),
                    )
            # The schema's triggers have counted every row written or deleted.
            version = counter(conn, "quota_version")
            self._db.remember_counter("quota_version", version)
        return QuotaWrite(base, version)

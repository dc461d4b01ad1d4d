"""The ``topics`` and ``cluster`` tables: ``TopicStore`` on either SQL database.

Every topic created, changed or deleted bumps the topic version (the schema's triggers, in the same transaction),
after the write has locked its counter; ``topic_version()`` is as cheap as ``acl_version()``. A topic id and the
configs are stored as each database stores a UUID and a JSON object (``Dialect.uuid_param``, ``json_param``). The
cluster id is made once in the database's life, by whichever process asks first.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import LiteralString

from kafkaguard.store.errors import StoreError
from kafkaguard.store.ports import History, TopicCreation, TopicRecord, TopicSnapshot, collision_key
from kafkaguard.store.sql.history import written
from kafkaguard.store.sql.transaction import Database, Row

_SELECT_TOPICS = "SELECT name, topic_id, num_partitions, replication_factor, configs FROM topics"
_INSERT_TOPIC = (
    "INSERT INTO topics (name, topic_id, collision_key, num_partitions, replication_factor, configs) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


class TopicTables:
    """``TopicStore`` on the ``topics`` table of ``db``, and the cluster id in its ``cluster`` table.
    ``cluster_id_factory`` is called at most once per process (and its id stored only if no process stored one
    first)."""

    def __init__(self, db: Database, *, cluster_id_factory: Callable[[], str]) -> None:
        self._db = db
        self._dialect = db.dialect
        self._cluster_id_factory = cluster_id_factory
        self._cluster_id: str | None = None
        self._cluster_id_lock = threading.Lock()

    def cluster_id(self) -> str:
        # Written on first use, in a write transaction that inserts only if no row is there and then reads: when
        # several processes ask at once, the first one's id is stored and every one of them returns it. It never
        # changes, so cache it.
        with self._cluster_id_lock:
            if self._cluster_id is None:
                with self._db.read() as tx:
                    row = tx.one("SELECT cluster_id FROM cluster WHERE id = 1")
                if row is None:
                    with self._db.write() as tx:
                        tx.run(
                            "INSERT INTO cluster (id, cluster_id) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
                            (self._cluster_id_factory(),),
                        )
                        row = tx.one("SELECT cluster_id FROM cluster WHERE id = 1")
                if row is None:
                    raise StoreError("the cluster id could not be stored")
                self._cluster_id = str(row[0])
            return self._cluster_id

    def topic_version(self) -> int:
        return self._db.polled_counter("topic_version")

    def load_topics(self) -> TopicSnapshot:
        with self._db.read() as tx:
            version = tx.counter("topic_version")
            rows = tx.all(_SELECT_TOPICS + " ORDER BY name")
        return TopicSnapshot(tuple(map(self._topic, rows)), version)

    def list_topics(self) -> list[TopicRecord]:
        with self._db.read() as tx:
            rows = tx.all(_SELECT_TOPICS + " ORDER BY name")
        return list(map(self._topic, rows))

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        records = self._select_where("name", sorted(set(names)))
        return {record.name: record for record in records}

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        records = self._select_where("topic_id", [self._dialect.uuid_param(i) for i in sorted(set(ids))])
        return {record.topic_id: record for record in records}

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        wanted = {name: collision_key(name) for name in names}
        records = self._select_where("collision_key", sorted(set(wanted.values())))
        by_key = {collision_key(record.name): record for record in records}
        return {name: by_key[key] for name, key in wanted.items() if key in by_key}

    def create_topics(
        self, records: Sequence[TopicRecord], *, history: History[list[TopicCreation]] | None = None
    ) -> list[TopicCreation]:
        outcomes: list[TopicCreation] = []
        with self._db.write() as tx:
            tx.lock_counter("topic_version")
            for record in records:
                # The unique collision_key makes this one lookup find an existing name and a colliding one.
                row = tx.one(_SELECT_TOPICS + " WHERE collision_key = ?", (collision_key(record.name),))
                if row is not None:
                    outcomes.append(TopicCreation(record, self._topic(row)))
                    continue
                tx.run(
                    _INSERT_TOPIC,
                    (
                        record.name,
                        self._dialect.uuid_param(record.topic_id),
                        collision_key(record.name),
                        record.num_partitions,
                        record.replication_factor,
                        self._dialect.json_param(record.configs),
                    ),
                )
                outcomes.append(TopicCreation(record))
            self._db.remember_counter("topic_version", tx.counter("topic_version"))
            return written(tx, history, outcomes)

    def delete_topics(
        self, names: Sequence[str], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        return self._delete(_SELECT_TOPICS + " WHERE name = ?", "DELETE FROM topics WHERE name = ?", names, history)

    def delete_topics_by_id(
        self, ids: Sequence[uuid.UUID], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        return self._delete(
            _SELECT_TOPICS + " WHERE topic_id = ?",
            "DELETE FROM topics WHERE topic_id = ?",
            [self._dialect.uuid_param(i) for i in ids],
            history,
        )

    def _select_where(self, column: LiteralString, keys: Sequence[object]) -> list[TopicRecord]:
        """The topics whose ``column`` is one of ``keys``."""
        with self._db.read() as tx:
            rows = tx.all_of(_SELECT_TOPICS, column, keys)
        return list(map(self._topic, rows))

    def _delete(
        self,
        select: LiteralString,
        delete: LiteralString,
        keys: Sequence[object],
        history: History[list[TopicRecord | None]] | None,
    ) -> list[TopicRecord | None]:
        """Per key, the topic ``select`` finds, deleted by ``delete``, or None where there is none. Read, then delete
        (not ``DELETE … RETURNING``, which SQLite has only since 3.35)."""
        removed: list[TopicRecord | None] = []
        with self._db.write() as tx:
            tx.lock_counter("topic_version")
            for key in keys:
                row = tx.one(select, (key,))
                if row is not None:
                    tx.run(delete, (key,))
                removed.append(None if row is None else self._topic(row))
            self._db.remember_counter("topic_version", tx.counter("topic_version"))
            return written(tx, history, removed)

    def _topic(self, row: Row) -> TopicRecord:
        name, topic_id, num_partitions, replication_factor, configs = row
        return TopicRecord(
            name=name,
            topic_id=self._dialect.uuid_value(topic_id),
            num_partitions=int(num_partitions),
            replication_factor=int(replication_factor),
            configs=self._dialect.json_value(configs),
        )

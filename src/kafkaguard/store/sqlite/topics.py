"""The ``topics`` and ``cluster`` tables: ``TopicStore`` on the shared connection.

Every topic created, changed or deleted bumps the topic version (triggers, in the same transaction);
``topic_version()`` is as cheap as ``acl_version()``. The cluster id is made once in the database's life.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Collection, Sequence

from kafkaguard.store.ports import TopicCreation, TopicRecord, TopicSnapshot, collision_key
from kafkaguard.store.sqlite.connection import MAX_PARAMS, Database, Row, counter

_SELECT_TOPICS = "SELECT name, topic_id, num_partitions, replication_factor, configs FROM topics"


class TopicTables:
    """``TopicStore`` on the ``topics`` table of ``db``, and the cluster id in its ``cluster`` table.
    ``cluster_id_factory`` is called at most once in the database's life, by the first ``cluster_id()``."""

    def __init__(self, db: Database, *, cluster_id_factory: Callable[[], str]) -> None:
        self._db = db
        self._cluster_id_factory = cluster_id_factory
        self._cluster_id: str | None = None

    def cluster_id(self) -> str:
        # Written on first use, inside a write transaction that first looks again: when several processes ask
        # at once, the first one's id is stored and every one of them returns it. It never changes, so cache it.
        with self._db.lock:
            if self._cluster_id is None:
                with self._db.read() as conn:
                    row = conn.execute("SELECT cluster_id FROM cluster WHERE id = 1").fetchone()
                if row is None:
                    with self._db.write() as conn:
                        conn.execute(
                            "INSERT INTO cluster (id, cluster_id) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
                            (self._cluster_id_factory(),),
                        )
                        row = conn.execute("SELECT cluster_id FROM cluster WHERE id = 1").fetchone()
                self._cluster_id = str(row[0])
            return self._cluster_id

    def topic_version(self) -> int:
        return self._db.polled_counter("topic_version")

    def load_topics(self) -> TopicSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "topic_version")
            topics = tuple(map(_topic, conn.execute(_SELECT_TOPICS + " ORDER BY name")))
        return TopicSnapshot(topics, version)

    def list_topics(self) -> list[TopicRecord]:
        with self._db.read() as conn:
            return [_topic(row) for row in conn.execute(_SELECT_TOPICS + " ORDER BY name")]

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        with self._db.read() as conn:
            records = _select_in(conn, _SELECT_TOPICS + " WHERE name IN", sorted(set(names)))
        return {record.name: record for record in records}

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        with self._db.read() as conn:
            records = _select_in(conn, _SELECT_TOPICS + " WHERE topic_id IN", sorted({i.bytes for i in ids}))
        return {record.topic_id: record for record in records}

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        wanted = {name: collision_key(name) for name in names}
        with self._db.read() as conn:
            records = _select_in(conn, _SELECT_TOPICS + " WHERE collision_key IN", sorted(set(wanted.values())))
        by_key = {collision_key(record.name): record for record in records}
        return {name: by_key[key] for name, key in wanted.items() if key in by_key}

    def create_topics(self, records: Sequence[TopicRecord]) -> list[TopicCreation]:
        outcomes: list[TopicCreation] = []
        with self._db.write() as conn:
            for record in records:
                # The unique collision_key makes this one lookup find an existing name and a colliding one.
                row = conn.execute(
                    _SELECT_TOPICS + " WHERE collision_key = ?", (collision_key(record.name),)
                ).fetchone()
                if row is not None:
                    outcomes.append(TopicCreation(record, _topic(row)))
                    continue
                conn.execute(
                    "INSERT INTO topics (name, topic_id, collision_key, num_partitions, replication_factor, configs) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (record.name, record.topic_id.bytes, collision_key(record.name), record.num_partitions,
                     record.replication_factor, json.dumps(dict(record.configs), sort_keys=True)),
                )  # fmt: skip
                outcomes.append(TopicCreation(record))
            self._db.remember_counter("topic_version", counter(conn, "topic_version"))
        return outcomes

    def delete_topics(self, names: Sequence[str]) -> list[TopicRecord | None]:
        return self._delete_topics(_SELECT_TOPICS + " WHERE name = ?", "DELETE FROM topics WHERE name = ?", names)

    def delete_topics_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicRecord | None]:
        return self._delete_topics(
            _SELECT_TOPICS + " WHERE topic_id = ?", "DELETE FROM topics WHERE topic_id = ?", [i.bytes for i in ids]
        )

    def _delete_topics(self, select: str, delete: str, keys: Sequence[object]) -> list[TopicRecord | None]:
        removed: list[TopicRecord | None] = []
        with self._db.write() as conn:
            for key in keys:
                row = conn.execute(select, (key,)).fetchone()
                if row is not None:
                    conn.execute(delete, (key,))
                removed.append(None if row is None else _topic(row))
            self._db.remember_counter("topic_version", counter(conn, "topic_version"))
        return removed


def _topic(row: Row) -> TopicRecord:
    name, topic_id, num_partitions, replication_factor, configs = row
    return TopicRecord(
        name=name,
        topic_id=uuid.UUID(bytes=bytes(topic_id)),
        num_partitions=int(num_partitions),
        replication_factor=int(replication_factor),
        configs=json.loads(configs),
    )


def _select_in(conn: sqlite3.Connection, select: str, keys: Sequence[object]) -> list[TopicRecord]:
    """The topics of ``select`` (a statement ending in ``IN``) for ``keys``, in chunks below SQLite's parameter
    limit."""
    found: list[TopicRecord] = []
    for start in range(0, len(keys), MAX_PARAMS):
        chunk = keys[start : start + MAX_PARAMS]
        sql = f"{select} ({','.join('?' * len(chunk))})"
        found.extend(map(_topic, conn.execute(sql, chunk)))
    return found

"""The ``topics`` and ``cluster`` tables on PostgreSQL: ``TopicStore``, the twin of ``store.sqlite.topics``.

Every topic created, changed or deleted bumps the topic version (a trigger, in the same transaction), after the
write has locked its counter row. The cluster id is made once in the database's life, by whichever node asks first.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from typing import LiteralString

from psycopg.types.json import Jsonb

from kafkaguard.store.errors import StoreError
from kafkaguard.store.ports import TopicCreation, TopicRecord, TopicSnapshot, collision_key
from kafkaguard.store.postgres.connection import Database, Row, counter, lock_counter, read_counter

_SELECT_TOPICS = "SELECT name, topic_id, num_partitions, replication_factor, configs FROM topics"


class TopicTables:
    """``TopicStore`` on ``topics``, and the cluster id in ``cluster``. ``cluster_id_factory`` is called at most
    once per node (and its id stored only if no node stored one first)."""

    def __init__(self, db: Database, *, cluster_id_factory: Callable[[], str]) -> None:
        self._db = db
        self._cluster_id_factory = cluster_id_factory
        self._cluster_id: str | None = None

    def cluster_id(self) -> str:
        # ON CONFLICT DO NOTHING then read: when several nodes ask at once, the first one's id is stored and every
        # one of them returns it. It never changes, so cache it.
        if self._cluster_id is None:
            with self._db.write() as conn:
                conn.execute(
                    "INSERT INTO cluster (id, cluster_id) VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                    (self._cluster_id_factory(),),
                )
                row = conn.execute("SELECT cluster_id FROM cluster WHERE id = 1").fetchone()
            self._cluster_id = str(row[0]) if row is not None else None
        if self._cluster_id is None:
            raise StoreError("the cluster id could not be stored")
        return self._cluster_id

    def topic_version(self) -> int:
        return read_counter(self._db, "topic_version")

    def load_topics(self) -> TopicSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "topic_version")
            rows = conn.execute(_SELECT_TOPICS + " ORDER BY name").fetchall()
        return TopicSnapshot(tuple(map(_topic, rows)), version)

    def list_topics(self) -> list[TopicRecord]:
        with self._db.read() as conn:
            return [_topic(row) for row in conn.execute(_SELECT_TOPICS + " ORDER BY name").fetchall()]

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        records = self._select(" WHERE name = ANY(%s)", sorted(set(names)))
        return {record.name: record for record in records}

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        records = self._select(" WHERE topic_id = ANY(%s)", sorted(set(ids)))
        return {record.topic_id: record for record in records}

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        wanted = {name: collision_key(name) for name in names}
        records = self._select(" WHERE collision_key = ANY(%s)", sorted(set(wanted.values())))
        by_key = {collision_key(record.name): record for record in records}
        return {name: by_key[key] for name, key in wanted.items() if key in by_key}

    def create_topics(self, records: Sequence[TopicRecord]) -> list[TopicCreation]:
        outcomes: list[TopicCreation] = []
        with self._db.write() as conn:
            lock_counter(conn, "topic_version")
            for record in records:
                # The unique collision_key makes this one lookup find an existing name and a colliding one.
                row = conn.execute(
                    _SELECT_TOPICS + " WHERE collision_key = %s", (collision_key(record.name),)
                ).fetchone()
                if row is not None:
                    outcomes.append(TopicCreation(record, _topic(row)))
                    continue
                conn.execute(
                    "INSERT INTO topics (name, topic_id, collision_key, num_partitions, replication_factor, configs) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (record.name, record.topic_id, collision_key(record.name), record.num_partitions,
                     record.replication_factor, Jsonb(dict(record.configs))),
                )  # fmt: skip
                outcomes.append(TopicCreation(record))
        return outcomes

    def delete_topics(self, names: Sequence[str]) -> list[TopicRecord | None]:
        return self._delete(
            "DELETE FROM topics WHERE name = %s RETURNING name, topic_id, num_partitions, replication_factor, configs",
            list(names),
        )

    def delete_topics_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicRecord | None]:
        return self._delete(
            "DELETE FROM topics WHERE topic_id = %s RETURNING name, topic_id, num_partitions, replication_factor, "
            "configs",
            list(ids),
        )

    def _select(self, where: LiteralString, keys: Sequence[object]) -> list[TopicRecord]:
        with self._db.read() as conn:
            return [_topic(row) for row in conn.execute(_SELECT_TOPICS + where, (list(keys),)).fetchall()]

    def _delete(self, delete: LiteralString, keys: Sequence[object]) -> list[TopicRecord | None]:
        removed: list[TopicRecord | None] = []
        with self._db.write() as conn:
            lock_counter(conn, "topic_version")
            for key in keys:
                row = conn.execute(delete, (key,)).fetchone()
                removed.append(None if row is None else _topic(row))
        return removed


def _topic(row: Row) -> TopicRecord:
    name, topic_id, num_partitions, replication_factor, configs = row
    return TopicRecord(
        name=name,
        topic_id=topic_id if isinstance(topic_id, uuid.UUID) else uuid.UUID(str(topic_id)),
        num_partitions=int(num_partitions),
        replication_factor=int(replication_factor),
        configs={str(k): str(v) for k, v in dict(configs).items()},
    )

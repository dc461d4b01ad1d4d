"""The embedded durable store: one SQLite file (stdlib ``sqlite3``) holding ACLs, SCRAM credentials and topics.

Durability: WAL journal with ``synchronous=FULL``, so a call that returned has its transaction fsync'ed; every
write is one ``BEGIN IMMEDIATE`` … ``COMMIT``. Several processes may open the same file; the busy timeout makes
writers queue for the lock instead of failing.

Every process sees every change: each ACL change is logged under the next ACL version in the same transaction
as the change itself. ``acl_version()`` first asks ``PRAGMA data_version``, which changes only when another
connection has committed, so an idle poll costs one pragma; ``changes_since`` then returns the net delta. Every
row written to or deleted from the SCRAM credentials bumps the credential version (triggers, in the same
transaction); ``credential_version()`` is as cheap as ``acl_version()``.

Every topic created, changed or deleted bumps the topic version (triggers, in the same transaction);
``topic_version()`` is as cheap as ``acl_version()``. Client quotas are versioned the same way (``quota_version()``).

The database holds every user's StoredKey and ServerKey: it is created with mode 0600 (SQLite gives its -wal and
-shm files the database's mode), and a database, -wal or -shm file found wider is set to 0600 on open
(``store.files``).

Nothing else in kafkaguard knows SQL.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any

from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)
from kafkaguard.model.resource import WILDCARD_RESOURCE
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT, AclChange, net_delta
from kafkaguard.store.errors import StoreError
from kafkaguard.store.files import create_private, tighten
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    CredentialInfo,
    CredentialSnapshot,
    CredentialWrite,
    QuotaChange,
    QuotaEntity,
    QuotaRecord,
    QuotaSnapshot,
    QuotaWrite,
    TopicCreation,
    TopicRecord,
    TopicSnapshot,
    UserAlteration,
    collision_key,
    quota_record_order,
)
from kafkaguard.store.schema import migrate
from kafkaguard.store.uuids import new_cluster_id

log = logging.getLogger(__name__)

#: Where the database lives unless configured otherwise: ``<data dir>/kafkaguard.db``.
DEFAULT_DATA_DIR = Path("data")
DATABASE_NAME = "kafkaguard.db"
DEFAULT_PATH = DEFAULT_DATA_DIR / DATABASE_NAME

# Statements are constants; every value is a bound parameter (the only generated SQL is placeholder lists).
_SELECT_ACLS = (
    "SELECT id, resource_type, resource_name, pattern_type, principal, host, operation, permission_type FROM acls"
)
_INSERT_ACL = (
    "INSERT INTO acls (id, resource_type, resource_name, pattern_type, principal, host, operation, permission_type) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_CHANGE = (
    "INSERT INTO acl_changes (seq, added, acl_id, resource_type, resource_name, pattern_type, principal, host, "
    "operation, permission_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_CHANGES = (
    "SELECT seq, added, acl_id, resource_type, resource_name, pattern_type, principal, host, operation, "
    "permission_type FROM acl_changes WHERE seq > ? ORDER BY seq"
)
_SELECT_ID = (
    "SELECT id FROM acls WHERE resource_name = ? AND resource_type = ? AND pattern_type = ? AND principal = ? "
    "AND host = ? AND operation = ? AND permission_type = ?"
)
_SELECT_TOPICS = "SELECT name, topic_id, num_partitions, replication_factor, configs FROM topics"
#: SQLite's default limit on bound parameters is 32766; stay well below it.
_MAX_PARAMS = 900

_RESOURCE_TYPES = {m.code: m for m in ResourceType}
_PATTERN_TYPES = {m.code: m for m in PatternType}
_OPERATIONS = {m.code: m for m in AclOperation}
_PERMISSIONS = {m.code: m for m in AclPermissionType}
_MECHANISMS = {m.code: m for m in ScramMechanism}

_Row = tuple[Any, ...]


def _new_id() -> AclId:
    return AclId(str(uuid.uuid4()))


def _fields(binding: AclBinding) -> tuple[object, ...]:
    p, e = binding.pattern, binding.entry
    return (p.name, p.resource_type.code, p.pattern_type.code, e.principal, e.host, e.operation.code,
            e.permission_type.code)  # fmt: skip


class _RowReader:
    """Rows → StoredAcl, sharing one ResourcePattern per distinct pattern and one AccessControlEntry per distinct
    entry: many ACLs share them, and a 100k-ACL load then builds (and validates) far fewer objects."""

    def __init__(self) -> None:
        self._patterns: dict[tuple[int, str, int], ResourcePattern] = {}
        self._entries: dict[tuple[str, str, int, int], AccessControlEntry] = {}

    def acl(self, row: _Row) -> StoredAcl:
        acl_id, rt, name, pt, principal, host, op, perm = row
        pattern_key = (rt, name, pt)
        pattern = self._patterns.get(pattern_key)
        if pattern is None:
            pattern = self._patterns[pattern_key] = ResourcePattern(
                _code(_RESOURCE_TYPES, ResourceType, rt), name, _code(_PATTERN_TYPES, PatternType, pt)
            )
        entry_key = (principal, host, op, perm)
        entry = self._entries.get(entry_key)
        if entry is None:
            entry = self._entries[entry_key] = AccessControlEntry(
                principal, host, _code(_OPERATIONS, AclOperation, op), _code(_PERMISSIONS, AclPermissionType, perm)
            )
        return StoredAcl(AclId(acl_id), AclBinding(pattern, entry))


def _code(table: Mapping[int, Any], cls: Any, code: int) -> Any:
    member = table.get(code)
    return member if member is not None else cls.from_code(code)


class SqliteStore:
    """``AclStore``, ``CredentialStore`` and ``TopicStore`` on one SQLite database file. Thread-safe; one
    connection per instance (open one instance per process)."""

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        id_factory: Callable[[], AclId] = _new_id,
        change_log_limit: int = DEFAULT_CHANGE_LOG_LIMIT,
        busy_timeout: float = 30.0,
        cluster_id_factory: Callable[[], str] = new_cluster_id,
    ) -> None:
        """Open (creating it and its directory if needed) and migrate the database at ``path``; a new database
        file is created with mode 0600, and the database, -wal and -shm files are set to 0600 if they are wider.
        ``cluster_id_factory`` is called at most once in the database's life, by the first ``cluster_id()``.

        :raises StoreError: the file cannot be opened or migrated (``SchemaVersionError``: it is newer).
        """
        self.path = Path(path)
        self._id_factory = id_factory
        self._cluster_id_factory = cluster_id_factory
        self._cluster_id: str | None = None
        self._limit = max(1, change_log_limit)
        self._lock = threading.RLock()
        self._seen_data_version: int | None = None
        self._cached_version = 0
        self._credentials_seen_data_version: int | None = None
        self._cached_credential_version = 0
        self._topics_seen_data_version: int | None = None
        self._cached_topic_version = 0
        self._quotas_seen_data_version: int | None = None
        self._cached_quota_version = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # SQLite would create the file 0644 (less the umask); an empty file is a new database to it.
            create_private(self.path)
            tighten(self.path)
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the database {self.path}: {e}") from e
        try:
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("database %s: journal mode is %s, not WAL; readers may block writers", self.path, mode)
            self._conn.execute("PRAGMA synchronous=FULL")
            migrate(self._conn)
            # New -wal and -shm files take the database's mode; these may predate it (or an older kafkaguard).
            for suffix in ("-wal", "-shm", "-journal"):
                tighten(self.path.with_name(self.path.name + suffix))
        except sqlite3.Error as e:
            self._conn.close()
            raise StoreError(f"cannot prepare the database {self.path}: {e}") from e
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def in_data_dir(cls, data_dir: str | Path = DEFAULT_DATA_DIR, **kwargs: Any) -> SqliteStore:
        """The store at ``<data_dir>/kafkaguard.db``."""
        return cls(Path(data_dir) / DATABASE_NAME, **kwargs)

    def __repr__(self) -> str:
        return f"SqliteStore(path={str(self.path)!r})"

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def check_integrity(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]`` for a sound database, else the problems found."""
        with self._read() as conn:
            return [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]

    # ------------------------------------------------------------------------------------------ transactions

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: everything read inside it is from one snapshot."""
        with self._lock:
            try:
                self._conn.execute("BEGIN")
                try:
                    yield self._conn
                finally:
                    self._conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and fsync'ed) before the caller's call returns."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as e:
                with suppress(sqlite3.Error):
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                raise StoreError(f"writing the database {self.path} failed: {e}") from e

    # ------------------------------------------------------------------------------------------- ACLs: read

    def load_acls(self) -> AclSnapshot:
        reader = _RowReader()
        with self._read() as conn:
            version = _counter(conn, "acl_version")
            acls = tuple(map(reader.acl, conn.execute(_SELECT_ACLS)))
        return AclSnapshot(acls, version)

    def acl_version(self) -> int:
        with self._lock:
            try:
                data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
                if data_version != self._seen_data_version:
                    # Another connection committed since we last looked (or this is the first look).
                    self._cached_version = _counter(self._conn, "acl_version")
                    self._seen_data_version = data_version
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e
            return self._cached_version

    def changes_since(self, version: int) -> AclDelta | None:
        reader = _RowReader()
        with self._read() as conn:
            current = _counter(conn, "acl_version")
            if version > current or version < _counter(conn, "acl_log_floor"):
                return None
            rows = conn.execute(_SELECT_CHANGES, (version,))
            changes = [AclChange(row[0], bool(row[1]), reader.acl(row[2:])) for row in rows]
        return net_delta(version, current, changes)

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        with self._read() as conn:
            return self._find(conn, acl_filter, _RowReader())

    def _find(self, conn: sqlite3.Connection, acl_filter: AclBindingFilter, reader: _RowReader) -> list[StoredAcl]:
        """Narrow with SQL (indexed where possible), then decide with the model's own ``matches``."""
        where, params = _filter_sql(acl_filter)
        sql = _SELECT_ACLS + (" WHERE " + " AND ".join(where) if where else "")
        candidates = map(reader.acl, conn.execute(sql, params))
        return [acl for acl in candidates if acl_filter.matches(acl.binding)]

    # ------------------------------------------------------------------------------------------ ACLs: write

    def create_acls(self, bindings: Sequence[AclBinding]) -> AclCreation:
        with self._write() as conn:
            changes = _ChangeWriter(conn)
            stored: list[StoredAcl] = []
            known: dict[AclBinding, StoredAcl] = {}
            for binding in bindings:
                acl = known.get(binding)
                if acl is None:
                    acl = known[binding] = self._insert(conn, changes, binding)
                stored.append(acl)
            delta = changes.finish(self._limit)
            self._cached_version = delta.version
        return AclCreation(tuple(stored), delta)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AclDeletion:
        with self._write() as conn:
            reader = _RowReader()
            matched = tuple(tuple(self._find(conn, f, reader)) for f in filters)
            changes = _ChangeWriter(conn)
            removed: dict[AclId, StoredAcl] = {acl.id: acl for group in matched for acl in group}
            for acl in removed.values():
                changes.remove(acl)
            delta = changes.finish(self._limit)
            self._cached_version = delta.version
        return AclDeletion(matched, delta)

    def import_acls(self, bindings: Iterable[AclBinding], *, replace: bool) -> AclDelta:
        wanted = dict.fromkeys(bindings)
        with self._write() as conn:
            changes = _ChangeWriter(conn)
            if replace:
                for acl in map(_RowReader().acl, conn.execute(_SELECT_ACLS).fetchall()):
                    if acl.binding not in wanted:
                        changes.remove(acl)
            for binding in wanted:
                self._insert(conn, changes, binding)
            delta = changes.finish(self._limit)
            self._cached_version = delta.version
        return delta

    def _insert(self, conn: sqlite3.Connection, changes: _ChangeWriter, binding: AclBinding) -> StoredAcl:
        """The stored ACL for ``binding``: the existing one, or a new one (logged)."""
        fields = _fields(binding)
        row = conn.execute(_SELECT_ID, fields).fetchone()
        if row is not None:
            return StoredAcl(AclId(row[0]), binding)
        acl = StoredAcl(self._id_factory(), binding)
        changes.add(acl)
        return acl

    # ----------------------------------------------------------------------------------------- credentials

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT salt, stored_key, server_key, iterations FROM scram_credentials "
                "WHERE user = ? AND mechanism = ?",
                (user, mechanism.code),
            ).fetchone()
        if row is None:
            return None
        return ScramCredential(mechanism, bytes(row[0]), bytes(row[1]), bytes(row[2]), int(row[3]))

    def load_credentials(self) -> CredentialSnapshot:
        with self._read() as conn:
            version = _counter(conn, "credential_version")
            rows = conn.execute(
                "SELECT user, mechanism, salt, stored_key, server_key, iterations FROM scram_credentials"
            ).fetchall()
        pairs = tuple(
            (user, ScramCredential(_MECHANISMS[code], bytes(salt), bytes(stored_key), bytes(server_key), int(i)))
            for user, code, salt, stored_key, server_key, i in rows
            if code in _MECHANISMS  # a mechanism from a newer kafkaguard is not ours to use
        )
        return CredentialSnapshot(pairs, version)

    def credential_version(self) -> int:
        with self._lock:
            try:
                data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
                if data_version != self._credentials_seen_data_version:
                    # Another connection committed since we last looked (or this is the first look).
                    self._cached_credential_version = _counter(self._conn, "credential_version")
                    self._credentials_seen_data_version = data_version
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e
            return self._cached_credential_version

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        sql = "SELECT user, mechanism, iterations FROM scram_credentials"
        found: dict[str, list[CredentialInfo]] = {}
        with self._read() as conn:
            if users is None:
                batches: list[list[_Row]] = [conn.execute(sql + " ORDER BY user, mechanism").fetchall()]
            else:
                names = sorted(set(users))
                batches = [
                    conn.execute(
                        f"{sql} WHERE user IN ({','.join('?' * len(chunk))}) ORDER BY user, mechanism", chunk
                    ).fetchall()
                    for chunk in (names[i : i + _MAX_PARAMS] for i in range(0, len(names), _MAX_PARAMS))
                ]
        for rows in batches:
            for user, code, iterations in rows:
                mechanism = _MECHANISMS.get(code)
                if mechanism is not None:  # a mechanism from a newer kafkaguard is not ours to describe
                    found.setdefault(user, []).append(CredentialInfo(mechanism, int(iterations)))
        return {user: tuple(infos) for user, infos in found.items()}

    def alter_credentials(self, alterations: Sequence[UserAlteration]) -> CredentialWrite:
        missing: dict[str, ScramMechanism] = {}
        with self._write() as conn:
            base = _counter(conn, "credential_version")
            for alteration in alterations:
                user = alteration.user
                absent = [
                    m
                    for m in alteration.deletions
                    if conn.execute(
                        "SELECT 1 FROM scram_credentials WHERE user = ? AND mechanism = ?", (user, m.code)
                    ).fetchone()
                    is None
                ]
                if absent:
                    missing[user] = absent[0]
                    continue
                conn.executemany(
                    "DELETE FROM scram_credentials WHERE user = ? AND mechanism = ?",
                    [(user, m.code) for m in alteration.deletions],
                )
                conn.executemany(
                    "INSERT INTO scram_credentials (user, mechanism, salt, stored_key, server_key, iterations) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user, mechanism) DO UPDATE SET salt = excluded.salt, "
                    "stored_key = excluded.stored_key, server_key = excluded.server_key, "
                    "iterations = excluded.iterations",
                    [
                        (user, c.mechanism.code, c.salt, c.stored_key, c.server_key, c.iterations)
                        for c in alteration.upsertions
                    ],
                )
            # The schema's triggers have counted every row written or deleted.
            version = self._cached_credential_version = _counter(conn, "credential_version")
        return CredentialWrite(missing, base, version)

    # ---------------------------------------------------------------------------------------------- topics

    def cluster_id(self) -> str:
        # Written on first use, inside a write transaction that first looks again: when several processes ask
        # at once, the first one's id is stored and every one of them returns it. It never changes, so cache it.
        with self._lock:
            if self._cluster_id is None:
                with self._read() as conn:
                    row = conn.execute("SELECT cluster_id FROM cluster WHERE id = 1").fetchone()
                if row is None:
                    with self._write() as conn:
                        conn.execute(
                            "INSERT INTO cluster (id, cluster_id) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
                            (self._cluster_id_factory(),),
                        )
                        row = conn.execute("SELECT cluster_id FROM cluster WHERE id = 1").fetchone()
                self._cluster_id = str(row[0])
            return self._cluster_id

    def topic_version(self) -> int:
        with self._lock:
            try:
                data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
                if data_version != self._topics_seen_data_version:
                    # Another connection committed since we last looked (or this is the first look).
                    self._cached_topic_version = _counter(self._conn, "topic_version")
                    self._topics_seen_data_version = data_version
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e
            return self._cached_topic_version

    def load_topics(self) -> TopicSnapshot:
        with self._read() as conn:
            version = _counter(conn, "topic_version")
            topics = tuple(map(_topic, conn.execute(_SELECT_TOPICS + " ORDER BY name")))
        return TopicSnapshot(topics, version)

    def list_topics(self) -> list[TopicRecord]:
        with self._read() as conn:
            return [_topic(row) for row in conn.execute(_SELECT_TOPICS + " ORDER BY name")]

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        with self._read() as conn:
            records = _select_in(conn, _SELECT_TOPICS + " WHERE name IN", sorted(set(names)))
        return {record.name: record for record in records}

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        with self._read() as conn:
            records = _select_in(conn, _SELECT_TOPICS + " WHERE topic_id IN", sorted({i.bytes for i in ids}))
        return {record.topic_id: record for record in records}

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        wanted = {name: collision_key(name) for name in names}
        with self._read() as conn:
            records = _select_in(conn, _SELECT_TOPICS + " WHERE collision_key IN", sorted(set(wanted.values())))
        by_key = {collision_key(record.name): record for record in records}
        return {name: by_key[key] for name, key in wanted.items() if key in by_key}

    def create_topics(self, records: Sequence[TopicRecord]) -> list[TopicCreation]:
        outcomes: list[TopicCreation] = []
        with self._write() as conn:
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
            # PRAGMA data_version does not move for this connection's own commits: remember the version here.
            self._cached_topic_version = _counter(conn, "topic_version")
        return outcomes

    def delete_topics(self, names: Sequence[str]) -> list[TopicRecord | None]:
        return self._delete_topics(_SELECT_TOPICS + " WHERE name = ?", "DELETE FROM topics WHERE name = ?", names)

    def delete_topics_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicRecord | None]:
        return self._delete_topics(
            _SELECT_TOPICS + " WHERE topic_id = ?", "DELETE FROM topics WHERE topic_id = ?", [i.bytes for i in ids]
        )

    def _delete_topics(self, select: str, delete: str, keys: Sequence[object]) -> list[TopicRecord | None]:
        removed: list[TopicRecord | None] = []
        with self._write() as conn:
            for key in keys:
                row = conn.execute(select, (key,)).fetchone()
                if row is not None:
                    conn.execute(delete, (key,))
                removed.append(None if row is None else _topic(row))
            self._cached_topic_version = _counter(conn, "topic_version")
        return removed

    # ------------------------------------------------------------------------------------------ client quotas

    def quota_version(self) -> int:
        with self._lock:
            try:
                data_version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
                if data_version != self._quotas_seen_data_version:
                    # Another connection committed since we last looked (or this is the first look).
                    self._cached_quota_version = _counter(self._conn, "quota_version")
                    self._quotas_seen_data_version = data_version
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e
            return self._cached_quota_version

    def load_quotas(self) -> QuotaSnapshot:
        with self._read() as conn:
            version = _counter(conn, "quota_version")
            rows = conn.execute("SELECT entity, key, value FROM client_quotas").fetchall()
        by_entity: dict[QuotaEntity, dict[str, float]] = {}
        for entity, key, value in rows:
            by_entity.setdefault(_entity(entity), {})[key] = float(value)
        records = sorted((QuotaRecord(entity, values) for entity, values in by_entity.items()), key=quota_record_order)
        return QuotaSnapshot(tuple(records), version)

    def alter_quotas(self, changes: Sequence[QuotaChange]) -> QuotaWrite:
        with self._write() as conn:
            base = _counter(conn, "quota_version")
            for change in changes:
                entity = json.dumps([list(pair) for pair in change.entity])
                if change.value is None:
                    conn.execute("DELETE FROM client_quotas WHERE entity = ? AND key = ?", (entity, change.key))
                else:
                    conn.execute(
                        "INSERT INTO client_quotas (entity, key, value) VALUES (?, ?, ?) "
                        "ON CONFLICT (entity, key) DO UPDATE SET value = excluded.value",
                        (entity, change.key, repr(float(change.value))),
                    )
            # The schema's triggers have counted every row written or deleted.
            version = self._cached_quota_version = _counter(conn, "quota_version")
        return QuotaWrite(base, version)


def _entity(text: str) -> QuotaEntity:
    return tuple((str(entity_type), None if name is None else str(name)) for entity_type, name in json.loads(text))


def _topic(row: _Row) -> TopicRecord:
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
    for start in range(0, len(keys), _MAX_PARAMS):
        chunk = keys[start : start + _MAX_PARAMS]
        sql = f"{select} ({','.join('?' * len(chunk))})"
        found.extend(map(_topic, conn.execute(sql, chunk)))
    return found


class _ChangeWriter:
    """Applies ACL additions and removals inside a write transaction, logging each under the next version."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._base = self._version = _counter(conn, "acl_version")
        self._changes: list[AclChange] = []

    def add(self, acl: StoredAcl) -> None:
        self._conn.execute(_INSERT_ACL, _row(acl))
        self._log(True, acl)

    def remove(self, acl: StoredAcl) -> None:
        self._conn.execute("DELETE FROM acls WHERE id = ?", (acl.id,))
        self._log(False, acl)

    def _log(self, added: bool, acl: StoredAcl) -> None:
        self._version += 1
        self._changes.append(AclChange(self._version, added, acl))
        self._conn.execute(_INSERT_CHANGE, (self._version, int(added), *_row(acl)))

    def finish(self, limit: int) -> AclDelta:
        """Store the new version, drop log entries beyond ``limit``, and return this write's delta."""
        if self._version != self._base:
            self._conn.execute("UPDATE counters SET value = ? WHERE name = 'acl_version'", (self._version,))
            floor = _counter(self._conn, "acl_log_floor")
            if self._version - floor > limit:
                floor = self._version - limit
                self._conn.execute("DELETE FROM acl_changes WHERE seq <= ?", (floor,))
                self._conn.execute("UPDATE counters SET value = ? WHERE name = 'acl_log_floor'", (floor,))
        return net_delta(self._base, self._version, self._changes)


def _row(acl: StoredAcl) -> tuple[object, ...]:
    p, e = acl.binding.pattern, acl.binding.entry
    return (acl.id, p.resource_type.code, p.name, p.pattern_type.code, e.principal, e.host, e.operation.code,
            e.permission_type.code)  # fmt: skip


def _counter(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()[0])


def _filter_sql(acl_filter: AclBindingFilter) -> tuple[list[str], list[object]]:
    """SQL conditions that every ACL the filter matches satisfies (a superset is fine: ``matches`` decides)."""
    where: list[str] = []
    params: list[object] = []
    pattern, entry = acl_filter.pattern_filter, acl_filter.entry_filter
    if pattern.resource_type is not ResourceType.ANY:
        where.append("resource_type = ?")
        params.append(pattern.resource_type.code)
    if pattern.pattern_type is PatternType.MATCH:
        name = pattern.name
        if name is not None and len(name) < _MAX_PARAMS:
            # The stored patterns that apply to the concrete name: the literal name, the wildcard, and every
            # PREFIXED pattern that is a prefix of the name.
            prefixes = [name[:k] for k in range(1, len(name) + 1)]
            where.append(
                f"((pattern_type = {PatternType.LITERAL.code} AND resource_name IN (?, ?)) OR "
                f"(pattern_type = {PatternType.PREFIXED.code} AND resource_name IN ({','.join('?' * len(prefixes))})))"
            )
            params.extend((name, WILDCARD_RESOURCE, *prefixes))
    else:
        if pattern.pattern_type is not PatternType.ANY:
            where.append("pattern_type = ?")
            params.append(pattern.pattern_type.code)
        if pattern.name is not None:
            where.append("resource_name = ?")
            params.append(pattern.name)
    for column, value in (("principal", entry.principal), ("host", entry.host)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if entry.operation is not AclOperation.ANY:
        where.append("operation = ?")
        params.append(entry.operation.code)
    if entry.permission_type is not AclPermissionType.ANY:
        where.append("permission_type = ?")
        params.append(entry.permission_type.code)
    return where, params

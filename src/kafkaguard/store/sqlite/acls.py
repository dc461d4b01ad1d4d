"""The ``acls`` table set: ``AclStore`` on the shared connection, with its change log.

Every process sees every change: each ACL change is logged under the next ACL version in the same transaction
as the change itself. ``acl_version()`` first asks ``PRAGMA data_version``, which changes only when another
connection has committed, so an idle poll costs one pragma; ``changes_since`` then returns the net delta.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence

from kafkaguard.model import (
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StoredAcl,
)
from kafkaguard.model.resource import WILDCARD_RESOURCE
from kafkaguard.store.acl_rows import AclRowReader, acl_row, binding_fields
from kafkaguard.store.changes import AclChange, net_delta
from kafkaguard.store.ports import AclCreation, AclDeletion, AclDelta, AclSnapshot
from kafkaguard.store.sqlite.connection import MAX_PARAMS, Database, counter

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


class AclTables:
    """``AclStore`` on the ``acls`` and ``acl_changes`` tables of ``db``. ``id_factory`` makes the id of each new
    ACL; the change log keeps at most ``limit`` versions."""

    def __init__(self, db: Database, *, id_factory: Callable[[], AclId], limit: int) -> None:
        self._db = db
        self._id_factory = id_factory
        self._limit = limit

    # ------------------------------------------------------------------------------------------- ACLs: read

    def load_acls(self) -> AclSnapshot:
        reader = AclRowReader()
        with self._db.read() as conn:
            version = counter(conn, "acl_version")
            acls = tuple(map(reader.acl, conn.execute(_SELECT_ACLS)))
        return AclSnapshot(acls, version)

    def acl_version(self) -> int:
        return self._db.polled_counter("acl_version")

    def changes_since(self, version: int) -> AclDelta | None:
        reader = AclRowReader()
        with self._db.read() as conn:
            current = counter(conn, "acl_version")
            if version > current or version < counter(conn, "acl_log_floor"):
                return None
            rows = conn.execute(_SELECT_CHANGES, (version,))
            changes = [AclChange(row[0], bool(row[1]), reader.acl(row[2:])) for row in rows]
        return net_delta(version, current, changes)

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        with self._db.read() as conn:
            return self._find(conn, acl_filter, AclRowReader())

    def _find(self, conn: sqlite3.Connection, acl_filter: AclBindingFilter, reader: AclRowReader) -> list[StoredAcl]:
        """Narrow with SQL (indexed where possible), then decide with the model's own ``matches``."""
        where, params = _filter_sql(acl_filter)
        sql = _SELECT_ACLS + (" WHERE " + " AND ".join(where) if where else "")
        candidates = map(reader.acl, conn.execute(sql, params))
        return [acl for acl in candidates if acl_filter.matches(acl.binding)]

    # ------------------------------------------------------------------------------------------ ACLs: write

    def create_acls(self, bindings: Sequence[AclBinding]) -> AclCreation:
        with self._db.write() as conn:
            changes = _ChangeWriter(conn)
            stored: list[StoredAcl] = []
            known: dict[AclBinding, StoredAcl] = {}
            for binding in bindings:
                acl = known.get(binding)
                if acl is None:
                    acl = known[binding] = self._insert(conn, changes, binding)
                stored.append(acl)
            delta = changes.finish(self._limit)
            self._db.remember_counter("acl_version", delta.version)
        return AclCreation(tuple(stored), delta)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AclDeletion:
        with self._db.write() as conn:
            reader = AclRowReader()
            matched = tuple(tuple(self._find(conn, f, reader)) for f in filters)
            changes = _ChangeWriter(conn)
            removed: dict[AclId, StoredAcl] = {acl.id: acl for group in matched for acl in group}
            for acl in removed.values():
                changes.remove(acl)
            delta = changes.finish(self._limit)
            self._db.remember_counter("acl_version", delta.version)
        return AclDeletion(matched, delta)

    def import_acls(self, bindings: Iterable[AclBinding], *, replace: bool) -> AclDelta:
        wanted = dict.fromkeys(bindings)
        with self._db.write() as conn:
            changes = _ChangeWriter(conn)
            if replace:
                for acl in map(AclRowReader().acl, conn.execute(_SELECT_ACLS).fetchall()):
                    if acl.binding not in wanted:
                        changes.remove(acl)
            for binding in wanted:
                self._insert(conn, changes, binding)
            delta = changes.finish(self._limit)
            self._db.remember_counter("acl_version", delta.version)
        return delta

    def _insert(self, conn: sqlite3.Connection, changes: _ChangeWriter, binding: AclBinding) -> StoredAcl:
        """The stored ACL for ``binding``: the existing one, or a new one (logged)."""
        fields = binding_fields(binding)
        row = conn.execute(_SELECT_ID, fields).fetchone()
        if row is not None:
            return StoredAcl(AclId(row[0]), binding)
        acl = StoredAcl(self._id_factory(), binding)
        changes.add(acl)
        return acl


class _ChangeWriter:
    """Applies ACL additions and removals inside a write transaction, logging each under the next version."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._base = self._version = counter(conn, "acl_version")
        self._changes: list[AclChange] = []

    def add(self, acl: StoredAcl) -> None:
        self._conn.execute(_INSERT_ACL, acl_row(acl))
        self._log(True, acl)

    def remove(self, acl: StoredAcl) -> None:
        self._conn.execute("DELETE FROM acls WHERE id = ?", (acl.id,))
        self._log(False, acl)

    def _log(self, added: bool, acl: StoredAcl) -> None:
        self._version += 1
        self._changes.append(AclChange(self._version, added, acl))
        self._conn.execute(_INSERT_CHANGE, (self._version, int(added), *acl_row(acl)))

    def finish(self, limit: int) -> AclDelta:
        """Store the new version, drop log entries beyond ``limit``, and return this write's delta."""
        if self._version != self._base:
            self._conn.execute("UPDATE counters SET value = ? WHERE name = 'acl_version'", (self._version,))
            floor = counter(self._conn, "acl_log_floor")
            if self._version - floor > limit:
                floor = self._version - limit
                self._conn.execute("DELETE FROM acl_changes WHERE seq <= ?", (floor,))
                self._conn.execute("UPDATE counters SET value = ? WHERE name = 'acl_log_floor'", (floor,))
        return net_delta(self._base, self._version, self._changes)


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
        if name is not None and len(name) < MAX_PARAMS:
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

"""The ``acls`` table set on PostgreSQL: ``AclStore`` with its change log, the twin of ``store.sqlite.acls``.

Every write locks the ``acl_version`` counter row first: ACL writers of every node take turns, each logs its
changes under the next versions and moves the counter in its own transaction, so versions commit in order and
``changes_since`` never skips one. Statements are constants; every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import LiteralString

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
from kafkaguard.store.changes import AclChange, net_delta
from kafkaguard.store.ports import AclCreation, AclDeletion, AclDelta, AclSnapshot
from kafkaguard.store.postgres.connection import Connection, Database, counter, lock_counter, read_counter
from kafkaguard.store.sql.acl_rows import AclRowReader, acl_row, binding_fields

_SELECT_ACLS = (
    "SELECT id, resource_type, resource_name, pattern_type, principal, host, operation, permission_type FROM acls"
)
_INSERT_ACL = (
    "INSERT INTO acls (id, resource_type, resource_name, pattern_type, principal, host, operation, permission_type) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_INSERT_CHANGE = (
    "INSERT INTO acl_changes (seq, added, acl_id, resource_type, resource_name, pattern_type, principal, host, "
    "operation, permission_type) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_SELECT_CHANGES = (
    "SELECT seq, added, acl_id, resource_type, resource_name, pattern_type, principal, host, operation, "
    "permission_type FROM acl_changes WHERE seq > %s ORDER BY seq"
)
_SELECT_ID = (
    "SELECT id FROM acls WHERE resource_name = %s AND resource_type = %s AND pattern_type = %s AND principal = %s "
    "AND host = %s AND operation = %s AND permission_type = %s"
)


#: Writes with at least this many changes refresh the planner's statistics of the ACL tables (``ANALYZE``).
_ANALYZE_AFTER = 10_000


class AclTables:
    """``AclStore`` on the ``acls`` and ``acl_changes`` tables. ``id_factory`` makes the id of each new ACL; the
    change log keeps at most ``limit`` versions."""

    def __init__(self, db: Database, *, id_factory: Callable[[], AclId], limit: int) -> None:
        self._db = db
        self._id_factory = id_factory
        self._limit = limit

    def load_acls(self) -> AclSnapshot:
        reader = AclRowReader()
        with self._db.read() as conn:
            version = counter(conn, "acl_version")
            rows = conn.execute(_SELECT_ACLS).fetchall()
        return AclSnapshot(tuple(map(reader.acl, rows)), version)

    def acl_version(self) -> int:
        return read_counter(self._db, "acl_version")

    def changes_since(self, version: int) -> AclDelta | None:
        reader = AclRowReader()
        with self._db.read() as conn:
            current = counter(conn, "acl_version")
            if version > current or version < counter(conn, "acl_log_floor"):
                return None
            rows = conn.execute(_SELECT_CHANGES, (version,)).fetchall()
        changes = [AclChange(int(row[0]), bool(row[1]), reader.acl(row[2:])) for row in rows]
        return net_delta(version, current, changes)

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        with self._db.read() as conn:
            return _find(conn, acl_filter, AclRowReader())

    def create_acls(self, bindings: Sequence[AclBinding]) -> AclCreation:
        with self._db.write() as conn:
            changes = _ChangeWriter(conn)
            stored: list[StoredAcl] = []
            known: dict[AclBinding, StoredAcl] = {}
            for binding in bindings:
                acl = known.get(binding)
                if acl is None:
                    row = conn.execute(_SELECT_ID, binding_fields(binding)).fetchone()
                    acl = StoredAcl(AclId(row[0]), binding) if row is not None else changes.add(self._new(binding))
                    known[binding] = acl
                stored.append(acl)
            delta = changes.finish(self._limit)
        return AclCreation(tuple(stored), delta)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AclDeletion:
        with self._db.write() as conn:
            changes = _ChangeWriter(conn)
            reader = AclRowReader()
            matched = tuple(tuple(_find(conn, f, reader)) for f in filters)
            removed = {acl.id: acl for group in matched for acl in group}
            for acl in removed.values():
                changes.remove(acl)
            delta = changes.finish(self._limit)
        return AclDeletion(matched, delta)

    def import_acls(self, bindings: Iterable[AclBinding], *, replace: bool) -> AclDelta:
        wanted = dict.fromkeys(bindings)
        with self._db.write() as conn:
            changes = _ChangeWriter(conn)
            stored = {acl.binding: acl for acl in map(AclRowReader().acl, conn.execute(_SELECT_ACLS).fetchall())}
            if replace:
                for binding, acl in stored.items():
                    if binding not in wanted:
                        changes.remove(acl)
            for binding in wanted:
                if binding not in stored:
                    changes.add(self._new(binding))
            delta = changes.finish(self._limit)
        return delta

    def import_stored_acls(self, acls: Sequence[StoredAcl]) -> AclDelta:
        """Add ``acls`` under their own ids (``store migrate``), in one transaction, logged as any addition."""
        with self._db.write() as conn:
            changes = _ChangeWriter(conn)
            for acl in acls:
                changes.add(acl)
            return changes.finish(self._limit)

    def _new(self, binding: AclBinding) -> StoredAcl:
        return StoredAcl(self._id_factory(), binding)


class _ChangeWriter:
    """Collects the additions and removals of one write transaction, each under the next version, and writes them
    in batches (``executemany`` pipelines them: a 100k-ACL import is a few round trips, not 200k)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._base = self._version = lock_counter(conn, "acl_version")
        self._changes: list[AclChange] = []

    def add(self, acl: StoredAcl) -> StoredAcl:
        self._version += 1
        self._changes.append(AclChange(self._version, True, acl))
        return acl

    def remove(self, acl: StoredAcl) -> None:
        self._version += 1
        self._changes.append(AclChange(self._version, False, acl))

    def finish(self, limit: int) -> AclDelta:
        """Write the changes and the new version, drop log entries beyond ``limit``, return this write's delta."""
        if self._changes:
            cur = self._conn.cursor()
            removed = [(c.acl.id,) for c in self._changes if not c.added]
            if removed:
                cur.executemany("DELETE FROM acls WHERE id = %s", removed)
            added = [acl_row(c.acl) for c in self._changes if c.added]
            if added:
                cur.executemany(_INSERT_ACL, added)
            cur.executemany(_INSERT_CHANGE, [(c.seq, c.added, *acl_row(c.acl)) for c in self._changes])
            self._conn.execute("UPDATE counters SET value = %s WHERE name = 'acl_version'", (self._version,))
            floor = counter(self._conn, "acl_log_floor")
            if self._version - floor > limit:
                # A range on the key, so the trim reads only the rows it drops, whatever the planner's statistics.
                new_floor = self._version - limit
                self._conn.execute("DELETE FROM acl_changes WHERE seq > %s AND seq <= %s", (floor, new_floor))
                self._conn.execute("UPDATE counters SET value = %s WHERE name = 'acl_log_floor'", (new_floor,))
            if len(self._changes) >= _ANALYZE_AFTER:
                # A bulk import changes the tables' sizes by orders of magnitude: refresh the planner's statistics
                # now rather than at autovacuum's next visit, or the next writes plan for tables that are empty.
                self._conn.execute("ANALYZE acls")
                self._conn.execute("ANALYZE acl_changes")
        return net_delta(self._base, self._version, self._changes)


def _find(conn: Connection, acl_filter: AclBindingFilter, reader: AclRowReader) -> list[StoredAcl]:
    """Narrow with SQL (indexed where possible), then decide with the model's own ``matches``."""
    where, params = _filter_sql(acl_filter)
    sql: LiteralString = _SELECT_ACLS + (" WHERE " + " AND ".join(where) if where else "")
    candidates = map(reader.acl, conn.execute(sql, params).fetchall())
    return [acl for acl in candidates if acl_filter.matches(acl.binding)]


def _filter_sql(acl_filter: AclBindingFilter) -> tuple[list[LiteralString], list[object]]:
    """SQL conditions that every ACL the filter matches satisfies (a superset is fine: ``matches`` decides)."""
    where: list[LiteralString] = []
    params: list[object] = []
    pattern, entry = acl_filter.pattern_filter, acl_filter.entry_filter
    if pattern.resource_type is not ResourceType.ANY:
        where.append("resource_type = %s")
        params.append(pattern.resource_type.code)
    if pattern.pattern_type is PatternType.MATCH:
        if pattern.name is not None:
            # The stored patterns that apply to the concrete name: the literal name, the wildcard, and every
            # PREFIXED pattern that is a prefix of the name.
            name = pattern.name
            where.append(
                "((pattern_type = %s AND resource_name = ANY(%s)) OR (pattern_type = %s AND resource_name = ANY(%s)))"
            )
            params.extend((PatternType.LITERAL.code, [name, WILDCARD_RESOURCE], PatternType.PREFIXED.code,
                           [name[:k] for k in range(1, len(name) + 1)]))  # fmt: skip
    else:
        if pattern.pattern_type is not PatternType.ANY:
            where.append("pattern_type = %s")
            params.append(pattern.pattern_type.code)
        if pattern.name is not None:
            where.append("resource_name = %s")
            params.append(pattern.name)
    if entry.principal is not None:
        where.append("principal = %s")
        params.append(entry.principal)
    if entry.host is not None:
        where.append("host = %s")
        params.append(entry.host)
    if entry.operation is not AclOperation.ANY:
        where.append("operation = %s")
        params.append(entry.operation.code)
    if entry.permission_type is not AclPermissionType.ANY:
        where.append("permission_type = %s")
        params.append(entry.permission_type.code)
    return where, params

"""The ``acls`` table set: ``AclStore`` with its change log, on either SQL database.

Every process sees every change: each ACL change is logged under the next ACL version in the same transaction as
the change itself, and every write first locks the ``acl_version`` counter (``Transaction.lock_counter``), so ACL
writers take turns, versions commit in order and ``changes_since`` never skips one. ``acl_version()`` is the
database's cheap poll (SQLite: one ``PRAGMA data_version`` while no other connection has committed);
``changes_since`` then returns the net delta.

A write collects its changes and writes them at its end, a statement per kind over all rows (``executemany``, which
psycopg pipelines: a 100k-ACL import is a few round trips, not 200k). ``import_acls`` reads the stored ACLs it
needs in one go (to replace, all of them; to merge, those that share a resource name with an imported binding, found
through the binding index, which leads with the name) and compares bindings as the model does, as the in-memory store
does: a statement per batch of names rather than one per binding, so merging a few ACLs into many reads a few rows.
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
from kafkaguard.store.ports import AclCreation, AclDeletion, AclDelta, AclSnapshot, History
from kafkaguard.store.sql.acl_rows import AclRowReader, acl_row, binding_fields
from kafkaguard.store.sql.dialect import Dialect
from kafkaguard.store.sql.history import written
from kafkaguard.store.sql.transaction import Database, Transaction

# Statements are constants; every value is a bound parameter (the only generated SQL is conditions and placeholders).
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

#: Writes with at least this many changes refresh the planner's statistics of the ACL tables, where the dialect
#: plans from statistics (``Dialect.analyzes_bulk_writes``).
_ANALYZE_AFTER = 10_000


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
        with self._db.read() as tx:
            version = tx.counter("acl_version")
            rows = tx.all(_SELECT_ACLS)
        return AclSnapshot(tuple(map(reader.acl, rows)), version)

    def acl_version(self) -> int:
        return self._db.polled_counter("acl_version")

    def changes_since(self, version: int) -> AclDelta | None:
        reader = AclRowReader()
        with self._db.read() as tx:
            current = tx.counter("acl_version")
            if version > current or version < tx.counter("acl_log_floor"):
                return None
            rows = tx.all(_SELECT_CHANGES, (version,))
        changes = [AclChange(int(row[0]), bool(row[1]), reader.acl(row[2:])) for row in rows]
        return net_delta(version, current, changes)

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        with self._db.read() as tx:
            return _find(tx, acl_filter, AclRowReader())

    # ------------------------------------------------------------------------------------------ ACLs: write

    def create_acls(
        self, bindings: Sequence[AclBinding], *, history: History[AclCreation] | None = None
    ) -> AclCreation:
        with self._db.write() as tx:
            changes = _ChangeWriter(tx)
            stored: list[StoredAcl] = []
            known: dict[AclBinding, StoredAcl] = {}
            for binding in bindings:
                acl = known.get(binding)
                if acl is None:
                    row = tx.one(_SELECT_ID, binding_fields(binding))
                    acl = StoredAcl(AclId(row[0]), binding) if row is not None else changes.add(self._new(binding))
                    known[binding] = acl
                stored.append(acl)
            delta = self._finish(changes)
            return written(tx, history, AclCreation(tuple(stored), delta))

    def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, history: History[AclDeletion] | None = None
    ) -> AclDeletion:
        with self._db.write() as tx:
            changes = _ChangeWriter(tx)
            reader = AclRowReader()
            matched = tuple(tuple(_find(tx, f, reader)) for f in filters)
            removed = {acl.id: acl for group in matched for acl in group}
            for acl in removed.values():
                changes.remove(acl)
            delta = self._finish(changes)
            return written(tx, history, AclDeletion(matched, delta))

    def import_acls(
        self, bindings: Iterable[AclBinding], *, replace: bool, history: History[AclDelta] | None = None
    ) -> AclDelta:
        wanted = dict.fromkeys(bindings)
        with self._db.write() as tx:
            changes = _ChangeWriter(tx)
            if replace:
                rows = tx.all(_SELECT_ACLS)
            else:
                rows = tx.all_of(_SELECT_ACLS, "resource_name", sorted({b.pattern.name for b in wanted}))
            stored = {acl.binding: acl for acl in map(AclRowReader().acl, rows)}
            if replace:
                for binding, acl in stored.items():
                    if binding not in wanted:
                        changes.remove(acl)
            for binding in wanted:
                if binding not in stored:
                    changes.add(self._new(binding))
            return written(tx, history, self._finish(changes))

    def import_stored_acls(self, acls: Sequence[StoredAcl], *, history: History[AclDelta] | None = None) -> AclDelta:
        """Add ``acls`` under their own ids (``store migrate``), in one transaction, logged as any addition."""
        with self._db.write() as tx:
            changes = _ChangeWriter(tx)
            for acl in acls:
                changes.add(acl)
            return written(tx, history, self._finish(changes))

    def _new(self, binding: AclBinding) -> StoredAcl:
        return StoredAcl(self._id_factory(), binding)

    def _finish(self, changes: _ChangeWriter) -> AclDelta:
        delta = changes.finish(self._limit)
        self._db.remember_counter("acl_version", delta.version)
        return delta


class _ChangeWriter:
    """Collects the additions and removals of one write transaction, each under the next version, and writes them
    at the end, a statement per kind over all rows."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self._base = self._version = tx.lock_counter("acl_version")
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
        tx = self._tx
        if self._changes:
            tx.run_many("DELETE FROM acls WHERE id = ?", [(c.acl.id,) for c in self._changes if not c.added])
            tx.run_many(_INSERT_ACL, [acl_row(c.acl) for c in self._changes if c.added])
            tx.run_many(_INSERT_CHANGE, [(c.seq, c.added, *acl_row(c.acl)) for c in self._changes])
            tx.run("UPDATE counters SET value = ? WHERE name = 'acl_version'", (self._version,))
            floor = tx.counter("acl_log_floor")
            if self._version - floor > limit:
                # A range on the key, so the trim reads only the rows it drops, whatever the planner's statistics.
                new_floor = self._version - limit
                tx.run("DELETE FROM acl_changes WHERE seq > ? AND seq <= ?", (floor, new_floor))
                tx.run("UPDATE counters SET value = ? WHERE name = 'acl_log_floor'", (new_floor,))
            if len(self._changes) >= _ANALYZE_AFTER and tx.dialect.analyzes_bulk_writes:
                # A bulk import changes the tables' sizes by orders of magnitude: refresh the planner's statistics
                # now rather than at autovacuum's next visit, or the next writes plan for tables that are empty.
                tx.run("ANALYZE acls")
                tx.run("ANALYZE acl_changes")
        return net_delta(self._base, self._version, self._changes)


def _find(tx: Transaction, acl_filter: AclBindingFilter, reader: AclRowReader) -> list[StoredAcl]:
    """Narrow with SQL (indexed where possible), then decide with the model's own ``matches``."""
    where, params = _filter_sql(acl_filter, tx.dialect)
    sql: LiteralString = _SELECT_ACLS + (" WHERE " + " AND ".join(where) if where else "")
    candidates = map(reader.acl, tx.all(sql, params))
    return [acl for acl in candidates if acl_filter.matches(acl.binding)]


def _filter_sql(acl_filter: AclBindingFilter, dialect: Dialect) -> tuple[list[LiteralString], list[object]]:
    """SQL conditions that every ACL the filter matches satisfies (a superset is fine: ``matches`` decides)."""
    where: list[LiteralString] = []
    params: list[object] = []
    pattern, entry = acl_filter.pattern_filter, acl_filter.entry_filter
    if pattern.resource_type is not ResourceType.ANY:
        where.append("resource_type = ?")
        params.append(pattern.resource_type.code)
    if pattern.pattern_type is PatternType.MATCH:
        name = pattern.name
        # The stored patterns that apply to the concrete name: the literal name, the wildcard, and every PREFIXED
        # pattern that is a prefix of the name (a name longer than SQLite binds at once is not narrowed).
        if name is not None and dialect.fits(len(name)):
            literal, literal_params = dialect.one_of("resource_name", [name, WILDCARD_RESOURCE])
            prefixed, prefixed_params = dialect.one_of("resource_name", [name[:k] for k in range(1, len(name) + 1)])
            where.append("((pattern_type = ? AND " + literal + ") OR (pattern_type = ? AND " + prefixed + "))")
            params.extend((PatternType.LITERAL.code, *literal_params, PatternType.PREFIXED.code, *prefixed_params))
    else:
        if pattern.pattern_type is not PatternType.ANY:
            where.append("pattern_type = ?")
            params.append(pattern.pattern_type.code)
        if pattern.name is not None:
            where.append("resource_name = ?")
            params.append(pattern.name)
    if entry.principal is not None:
        where.append("principal = ?")
        params.append(entry.principal)
    if entry.host is not None:
        where.append("host = ?")
        params.append(entry.host)
    if entry.operation is not AclOperation.ANY:
        where.append("operation = ?")
        params.append(entry.operation.code)
    if entry.permission_type is not AclPermissionType.ANY:
        where.append("permission_type = ?")
        params.append(entry.permission_type.code)
    return where, params

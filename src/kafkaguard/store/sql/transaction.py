"""One transaction as the table sets see it, and the ``Database`` each SQL store's connection provides.

``Transaction`` wraps a DB-API connection (``sqlite3``'s, or one psycopg lent from its pool) inside a transaction
the connection has opened: the table sets hand it ``?`` statements, it hands the driver the dialect's text. It also
reads counters, and locks one at the start of a write (``lock_counter``): on PostgreSQL that serializes the writers
of one kind, on SQLite the write already holds the database's lock.

``Database`` is what each database's connection module implements (``store.sqlite.connection``,
``store.postgres.connection``): read and write transactions, opened and committed (and errors turned into
``StoreError``) its own way, and a cheap poll of a counter's committed value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, LiteralString, Protocol

from kafkaguard.store.sql.dialect import Dialect

Row = tuple[Any, ...]


class Cursor(Protocol):
    """What the table sets use of a cursor (``sqlite3.Cursor``, ``psycopg.Cursor``)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def executemany(self, sql: LiteralString, params_seq: Iterable[Sequence[Any]], /) -> object: ...


class Connection(Protocol):
    """What the table sets use of a connection (``sqlite3.Connection``, ``psycopg.Connection``)."""

    def execute(self, sql: LiteralString, params: Sequence[Any], /) -> Cursor: ...

    def cursor(self) -> Cursor: ...


class Transaction:
    """Statements in one open transaction of ``conn``, translated for ``dialect``."""

    __slots__ = ("_conn", "dialect")

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self._conn = conn
        self.dialect = dialect

    def one(self, sql: LiteralString, params: Sequence[object] = ()) -> Row | None:
        """The first row of ``sql``, or None."""
        row: Row | None = self._conn.execute(self.dialect.sql(sql), params).fetchone()
        return row

    def all(self, sql: LiteralString, params: Sequence[object] = ()) -> list[Row]:
        """Every row of ``sql``."""
        return self._conn.execute(self.dialect.sql(sql), params).fetchall()

    def run(self, sql: LiteralString, params: Sequence[object] = ()) -> None:
        self._conn.execute(self.dialect.sql(sql), params)

    def run_many(self, sql: LiteralString, rows: Sequence[Sequence[object]]) -> None:
        """``sql`` once per row, in one call (psycopg pipelines them: a bulk write is a few round trips)."""
        if rows:
            self._conn.cursor().executemany(self.dialect.sql(sql), rows)

    def all_of(
        self, select: LiteralString, column: LiteralString, keys: Sequence[object], then: LiteralString = ""
    ) -> list[Row]:
        """The rows of ``select`` whose ``column`` is one of ``keys`` (``then``: what follows the condition, such as
        an ``ORDER BY``), in as many statements as the dialect needs, in the order of ``keys``' batches."""
        rows: list[Row] = []
        for batch in self.dialect.batches(keys):
            condition, params = self.dialect.one_of(column, batch)
            rows.extend(self.all(select + " WHERE " + condition + then, params))
        return rows

    # ---------------------------------------------------------------------------------------------- counters

    def counter(self, name: str) -> int:
        """The counter ``name`` (``acl_version``, ``credential_version``, …) as this transaction sees it."""
        row = self.one("SELECT value FROM counters WHERE name = ?", (name,))
        return int(row[0]) if row is not None else 0

    def lock_counter(self, name: str) -> int:
        """The counter ``name``, read as the first statement of a write to its tables and held until the write ends
        (``Dialect.lock_counter``), so that writers of one kind take their versions, and commit, one after another."""
        row = self.one(self.dialect.lock_counter, (name,))
        return int(row[0]) if row is not None else 0


class Database(Protocol):
    """The transactions and counters of one SQL database, as its connection module provides them."""

    @property
    def dialect(self) -> Dialect: ...

    def read(self) -> AbstractContextManager[Transaction]:
        """One read transaction: everything read inside it is from one snapshot."""
        ...

    def write(self) -> AbstractContextManager[Transaction]:
        """One write transaction, committed (durably) before the caller's call returns."""
        ...

    def polled_counter(self, name: str) -> int:
        """The committed value of the counter ``name``, as cheaply as the database allows (a version poll)."""
        ...

    def remember_counter(self, name: str, value: int) -> None:
        """Called inside a write that moved the counter ``name`` to ``value`` (for a database whose polls would not
        see this connection's own commits)."""
        ...

    def close(self) -> None: ...

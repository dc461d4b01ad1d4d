"""What differs between the two SQL databases, as data: one ``Dialect`` per database, beside its connection
(``store.sqlite.connection.DIALECT``, ``store.postgres.connection.DIALECT``), read by the one implementation of the
table sets in ``store.sql``.

The statements are written once, with ``?`` placeholders; ``sql`` turns them into the driver's style (psycopg's
``%s``, doubling any literal ``%``). Everything else in them is text both databases accept: upserts are ``INSERT …
ON CONFLICT … DO UPDATE SET … = excluded.…``, a column named by a keyword is double-quoted (``"user"``), and a
statement reads a row before deleting it rather than using ``RETURNING`` (which SQLite has only since 3.35).

What differs beyond the placeholders: how a write takes its turn on a counter row (``lock_counter``); how a column
is matched against many values (one array parameter, or lists of parameters kept below SQLite's limit); whether a
bulk write refreshes the planner's statistics; and how a UUID and a JSON object are stored (SQLite: 16-byte BLOB,
TEXT; PostgreSQL: ``UUID``, ``JSONB``). Opening and committing a transaction, and polling a counter cheaply, are the
connection's (``transaction.Database``): they are calls into two different drivers, not SQL text. PostgreSQL's change
notification is not here either: a trigger on the counters sends it (``store.postgres.schema``).

The cost: on PostgreSQL every statement is translated as it runs (a ``str.replace``, far below a round trip), and
no shared statement may hold a ``?`` that is not a placeholder (a string literal with one, jsonb's ``?`` operator).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString, TypeVar

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialect:
    """The SQL text and value encodings of one database (see the module docstring)."""

    #: The driver's placeholder: ``?`` (sqlite3, the statements' own) or ``%s`` (psycopg).
    placeholder: LiteralString
    #: The read of a counter row (``name = ?``) that starts every write, held until the write ends: PostgreSQL's
    #: ``SELECT … FOR UPDATE`` makes the writers of one kind take turns, so their versions commit in order; SQLite's
    #: is a plain read, its ``BEGIN IMMEDIATE`` already holding the database's one write lock.
    lock_counter: LiteralString
    #: True: ``column = ANY(?)`` with one array parameter; False: ``column IN (?, …)``, at most ``max_params`` a time.
    arrays: bool
    max_params: int
    #: Whether an ACL write of many changes runs ``ANALYZE`` (PostgreSQL plans from statistics that autovacuum would
    #: refresh only later; SQLite, without ``sqlite_stat1``, assumes its indexes help and needs none).
    analyzes_bulk_writes: bool
    #: A topic id as a parameter, and back from its column.
    uuid_param: Callable[[uuid.UUID], object]
    uuid_value: Callable[[Any], uuid.UUID]
    #: A topic's configs (a JSON object of strings) as a parameter, and back from its column.
    json_param: Callable[[Mapping[str, str]], object]
    json_value: Callable[[Any], dict[str, str]]
    #: A management event's data (a JSON object of any JSON values), as a parameter, and back from its column.
    document_param: Callable[[Mapping[str, object]], object]
    document_value: Callable[[Any], dict[str, Any]]

    def sql(self, statement: LiteralString) -> LiteralString:
        """``statement`` (``?`` placeholders) in the driver's style."""
        if self.placeholder == "?":
            return statement
        return statement.replace("%", "%%").replace("?", self.placeholder)

    def fits(self, count: int) -> bool:
        """Whether ``one_of`` can bind ``count`` values in one statement."""
        return self.arrays or count <= self.max_params

    def one_of(self, column: LiteralString, values: Sequence[object]) -> tuple[LiteralString, list[object]]:
        """The condition that ``column`` is one of ``values`` (at most ``max_params`` without arrays), and its
        parameters."""
        if self.arrays:
            return column + " = ANY(?)", [list(values)]
        return column + " IN (" + ", ".join(["?"] * len(values)) + ")", list(values)

    def batches(self, values: Sequence[_T]) -> Iterator[Sequence[_T]]:
        """``values`` in pieces that ``one_of`` binds in one statement each (none for no values)."""
        size = len(values) if self.arrays else self.max_params
        for start in range(0, len(values), max(1, size)):
            yield values[start : start + size]

"""The connection pool every table set shares: opening, migrating, transactions, errors, counters, and the
PostgreSQL ``DIALECT`` of the shared SQL (``store.sql``).

Each call takes a connection from a ``psycopg_pool.ConnectionPool``, checked before use (one round trip), so a
connection that PostgreSQL dropped while it sat in the pool (a restart) is replaced instead of failing the call;
the pool opens new connections by itself once the server is back.

Errors: a server that cannot be reached, a connection that breaks, or a pool that has no connection to give
within ``connect_timeout`` raise ``StoreUnavailableError`` (retriable); anything else PostgreSQL refuses raises
``StoreError``. Messages name the store by its URL (which never holds a password) and carry the driver's first
line with the password scrubbed; the psycopg exception is chained for the log, and libpq never puts a password
into its messages.

Reads run in ``REPEATABLE READ READ ONLY`` transactions, so everything one read returns (rows and the version
they are at) is from one snapshot. Writes run in ``READ COMMITTED`` and start by locking their counter row
(``SELECT … FOR UPDATE``, the dialect's ``lock_counter``): the lock serializes the writers of that kind, and every
statement after it sees every commit made before. A version poll is one statement outside any explicit transaction.

Values: psycopg's own types carry the rest of the dialect: a list is an array parameter (``= ANY(%s)``), a topic
id a ``UUID``, a topic's configs ``JSONB``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from kafkaguard.store.errors import StoreError, StoreUnavailableError
from kafkaguard.store.postgres.schema import migrate
from kafkaguard.store.sql.dialect import Dialect
from kafkaguard.store.sql.transaction import Transaction
from kafkaguard.store.url import StoreUrl

log = logging.getLogger(__name__)

Row = tuple[Any, ...]
Connection = psycopg.Connection[Row]

#: Seconds a caller waits for a connection while the server is known to be down.
_DOWN_TIMEOUT = 1.0

DIALECT = Dialect(
    placeholder="%s",
    lock_counter="SELECT value FROM counters WHERE name = ? FOR UPDATE",
    arrays=True,
    max_params=65535,  # the protocol's limit; with arrays, a list of values is one parameter
    analyzes_bulk_writes=True,
    uuid_param=lambda topic_id: topic_id,
    uuid_value=lambda value: value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)),
    json_param=lambda configs: Jsonb(dict(configs)),
    json_value=lambda value: {str(k): str(v) for k, v in dict(value).items()},
    document_param=lambda document: Jsonb(dict(document)),
    document_value=dict,
)


class Database:
    """A pool of connections to one PostgreSQL database. Thread-safe."""

    dialect = DIALECT

    def __init__(self, url: StoreUrl, *, pool_size: int, connect_timeout: float) -> None:
        """Connect, and migrate the schema.

        :raises StoreUnavailableError: the server cannot be reached within ``connect_timeout``.
        :raises StoreError: it refused (authentication, a missing database, …); ``SchemaVersionError``: the
            database was written by a newer kafkaguard.
        """
        self.url = url
        self.connect_timeout = connect_timeout
        self._unavailable_since: float | None = None
        self._state_lock = threading.Lock()
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url.conninfo(),
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"connect_timeout": max(1, round(connect_timeout))},
            timeout=connect_timeout,
            check=ConnectionPool.check_connection,
            # The pool's own retries back off exponentially (1 s, 2 s, 4 s, …): give each up after a second, so that
            # a caller's next request starts a fresh attempt at once and a restarted server is used within a call.
            reconnect_timeout=1.0,
            name="kafkaguard-store",
            open=False,
        )
        self._check_login()
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as e:
            self._pool.close(timeout=0)
            raise StoreUnavailableError(
                f"cannot connect to the store {url} within {connect_timeout:g} s: is PostgreSQL running there, and "
                "are the user, password and database right?"
            ) from e
        try:
            with self._pool.connection() as conn:
                migrate(conn)
        except psycopg.Error as e:
            self._pool.close(timeout=0)
            raise self.error("preparing", e) from e
        except BaseException:
            self._pool.close(timeout=0)
            raise

    def _check_login(self) -> None:
        """Connect once, outside the pool, so that a refusal is reported as what it is (the pool would only retry
        until its timeout): a wrong password, user or database is a ``StoreError`` to fix the configuration; a
        server that cannot be reached, or is starting or stopping, is ``StoreUnavailableError``.
        """
        try:
            psycopg.connect(self.url.conninfo(), connect_timeout=max(1, round(self.connect_timeout))).close()
        except psycopg.Error as e:
            first_line = self.url.scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            if "FATAL:" in first_line and "the database system is" not in first_line:
                raise StoreError(f"PostgreSQL refused the store {self.url}: {first_line}") from e
            raise StoreUnavailableError(
                f"cannot connect to the store {self.url}: {first_line}; is PostgreSQL running there? (retry later)"
            ) from e

    def close(self) -> None:
        self._pool.close(timeout=5)

    # ------------------------------------------------------------------------------------------ transactions

    @contextmanager
    def read(self) -> Iterator[Transaction]:
        """One read-only transaction on one snapshot."""
        with self._use("reading") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield Transaction(conn, DIALECT)

    @contextmanager
    def write(self) -> Iterator[Transaction]:
        """One write transaction, committed (durably, with PostgreSQL's defaults) before the call returns."""
        with self._use("writing") as conn, conn.transaction():
            yield Transaction(conn, DIALECT)

    def polled_counter(self, name: str) -> int:
        """The committed value of the counter ``name`` (one statement, no explicit transaction)."""
        with self._use("reading") as conn:
            row = conn.execute("SELECT value FROM counters WHERE name = %s", (name,)).fetchone()
            conn.rollback()
        return int(row[0]) if row is not None else 0

    def remember_counter(self, name: str, value: int) -> None:
        """Nothing to remember: every poll reads the counter's committed value."""

    @contextmanager
    def _use(self, doing: str) -> Iterator[Connection]:
        # While the server is known to be down, fail within a second instead of holding every caller (a Kafka
        # request, a sync poll) for the whole connect timeout; a restarted server still gets a connection in time.
        timeout = self.connect_timeout if self.healthy() else min(self.connect_timeout, _DOWN_TIMEOUT)
        try:
            with self._pool.connection(timeout=timeout) as conn:
                yield conn
        except PoolTimeout as e:
            self._mark(available=False)
            raise StoreUnavailableError(
                f"{doing} the store {self.url} failed: no connection to PostgreSQL within {timeout:g} s "
                "(the server is unreachable or restarting); retry later"
            ) from e
        except psycopg.Error as e:
            raise self.error(doing, e) from e
        self._mark(available=True)

    def error(self, doing: str, e: psycopg.Error) -> StoreError:
        """The store error for the driver's ``e``: ``StoreUnavailableError`` for a lost or refused connection."""
        first_line = self.url.scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        if isinstance(e, psycopg.OperationalError) and not isinstance(e, psycopg.errors.QueryCanceled):
            self._mark(available=False)
            return StoreUnavailableError(
                f"{doing} the store {self.url} failed: PostgreSQL is unreachable or the connection broke "
                f"({first_line}); retry later (a write whose commit was cut off may or may not have been applied)"
            )
        return StoreError(f"{doing} the store {self.url} failed: {first_line}")

    # ------------------------------------------------------------------------------------------------ health

    def _mark(self, *, available: bool) -> None:
        with self._state_lock:
            if available:
                if self._unavailable_since is not None:
                    log.info("the store %s is reachable again", self.url)
                self._unavailable_since = None
            elif self._unavailable_since is None:
                log.warning("the store %s is unreachable; the pool keeps reconnecting", self.url)
                self._unavailable_since = time.monotonic()

    def healthy(self) -> bool:
        return self._unavailable_since is None

"""The database connection every table set shares: opening, WAL, file modes, transactions, change counters, and the
SQLite ``DIALECT`` of the shared SQL (``store.sql``).

Durability: WAL journal with ``synchronous=FULL``, so a call that returned has its transaction fsync'ed; every
write is one ``BEGIN IMMEDIATE`` … ``COMMIT``. Several processes may open the same file; the busy timeout makes
writers queue for the lock instead of failing.

The database holds every user's StoredKey and ServerKey: it is created with mode 0600 (SQLite gives its -wal and
-shm files the database's mode), and a database, -wal or -shm file found wider is set to 0600 on open
(``store.files``).

Each table set keeps a counter in the ``counters`` table, moved in the same transaction as its rows; a write
needs no lock on its counter row beyond ``BEGIN IMMEDIATE``, which takes the database's one write lock.
``Database.polled_counter`` first asks ``PRAGMA data_version``, which changes only when another connection has
committed, so an idle poll costs one pragma and reads no table.

Values: a topic id is a 16-byte BLOB and a topic's configs are JSON text (``json_valid`` in the schema), written
with sorted keys.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from kafkaguard.store.errors import StoreError
from kafkaguard.store.files import create_private, tighten
from kafkaguard.store.schema import migrate
from kafkaguard.store.sql.dialect import Dialect
from kafkaguard.store.sql.transaction import Transaction

log = logging.getLogger(__name__)

#: Where the database lives unless configured otherwise: ``<data dir>/kafkaguard.db``.
DEFAULT_DATA_DIR = Path("data")
DATABASE_NAME = "kafkaguard.db"
DEFAULT_PATH = DEFAULT_DATA_DIR / DATABASE_NAME

DIALECT = Dialect(
    placeholder="?",
    lock_counter="SELECT value FROM counters WHERE name = ?",
    arrays=False,
    # SQLite's limit on bound parameters is 32766 (999 before 3.32); stay well below it.
    max_params=900,
    analyzes_bulk_writes=False,
    uuid_param=lambda topic_id: topic_id.bytes,
    uuid_value=lambda value: uuid.UUID(bytes=bytes(value)),
    json_param=lambda configs: json.dumps(dict(configs), sort_keys=True),
    json_value=json.loads,
    document_param=lambda document: json.dumps(dict(document), sort_keys=True),
    document_value=json.loads,
)


class Database:
    """One connection to one SQLite database file, shared by the table sets. Thread-safe: every use of
    ``conn`` holds ``lock``."""

    dialect = DIALECT

    def __init__(self, path: str | Path, *, busy_timeout: float) -> None:
        """Open (creating it and its directory if needed) and migrate the database at ``path``; a new database
        file is created with mode 0600, and the database, -wal and -shm files are set to 0600 if they are wider.

        :raises StoreError: the file cannot be opened or migrated (``SchemaVersionError``: it is newer).
        """
        self.path = Path(path)
        self.lock = threading.RLock()
        # Per counter: the data_version at its last read from the table, and the value this process knows.
        self._seen_data_versions: dict[str, int] = {}
        self._cached_counters: dict[str, int] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # SQLite would create the file 0644 (less the umask); an empty file is a new database to it.
            create_private(self.path)
            tighten(self.path)
            self.conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the database {self.path}: {e}") from e
        try:
            mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("database %s: journal mode is %s, not WAL; readers may block writers", self.path, mode)
            self.conn.execute("PRAGMA synchronous=FULL")
            migrate(self.conn)
            # New -wal and -shm files take the database's mode; these may predate it (or an older kafkaguard).
            for suffix in ("-wal", "-shm", "-journal"):
                tighten(self.path.with_name(self.path.name + suffix))
        except sqlite3.Error as e:
            self.conn.close()
            raise StoreError(f"cannot prepare the database {self.path}: {e}") from e
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def check_integrity(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]`` for a sound database, else the problems found."""
        with self.read() as tx:
            return [str(row[0]) for row in tx.all("PRAGMA integrity_check")]

    # ------------------------------------------------------------------------------------------ transactions

    @contextmanager
    def read(self) -> Iterator[Transaction]:
        """One read transaction: everything read inside it is from one snapshot."""
        with self.lock:
            try:
                self.conn.execute("BEGIN")
                try:
                    yield Transaction(self.conn, DIALECT)
                finally:
                    self.conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e

    @contextmanager
    def write(self) -> Iterator[Transaction]:
        """One write transaction, committed (and fsync'ed) before the caller's call returns."""
        with self.lock:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield Transaction(self.conn, DIALECT)
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
                self.conn.execute("COMMIT")
            except sqlite3.Error as e:
                with suppress(sqlite3.Error):
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                raise StoreError(f"writing the database {self.path} failed: {e}") from e

    # ---------------------------------------------------------------------------------------------- counters

    def polled_counter(self, name: str) -> int:
        """The counter ``name``, read from its table only when another connection has committed since the last
        read (or on the first): ``PRAGMA data_version`` moves for other connections' commits only."""
        with self.lock:
            try:
                data_version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
                if data_version != self._seen_data_versions.get(name):
                    row = self.conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
                    self._cached_counters[name] = int(row[0])
                    self._seen_data_versions[name] = data_version
            except sqlite3.Error as e:
                raise StoreError(f"reading the database {self.path} failed: {e}") from e
            return self._cached_counters.get(name, 0)

    def remember_counter(self, name: str, value: int) -> None:
        """Record ``value`` as the counter ``name`` after this connection's own write moved it: PRAGMA data_version
        does not move for this connection's own commits, so the next poll would not read it again."""
        self._cached_counters[name] = value

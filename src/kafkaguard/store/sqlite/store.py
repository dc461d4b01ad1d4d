"""``SqliteStore``: the shared SQL store (``store.sql``) on one SQLite database file."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kafkaguard.model import AclId
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
from kafkaguard.store.sql.store import SqlStore, new_acl_id
from kafkaguard.store.sqlite.connection import DATABASE_NAME, DEFAULT_DATA_DIR, DEFAULT_PATH, Database
from kafkaguard.store.uuids import new_cluster_id


class SqliteStore(SqlStore):
    """``Store`` on one SQLite database file. Thread-safe; one connection per instance (open one instance per
    process)."""

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        id_factory: Callable[[], AclId] = new_acl_id,
        change_log_limit: int = DEFAULT_CHANGE_LOG_LIMIT,
        busy_timeout: float = 30.0,
        cluster_id_factory: Callable[[], str] = new_cluster_id,
    ) -> None:
        """Open (creating it and its directory if needed) and migrate the database at ``path``; a new database
        file is created with mode 0600, and the database, -wal and -shm files are set to 0600 if they are wider.
        ``cluster_id_factory`` is called at most once in the database's life, by the first ``cluster_id()``.

        :raises StoreError: the file cannot be opened or migrated (``SchemaVersionError``: it is newer).
        """
        db = Database(path, busy_timeout=busy_timeout)
        super().__init__(
            db, id_factory=id_factory, change_log_limit=change_log_limit, cluster_id_factory=cluster_id_factory
        )
        self.path = db.path
        # The connection and its lock, for tests and benchmarks that look beneath the ports.
        self._conn = db.conn
        self._lock = db.lock
        self._sqlite = db

    @classmethod
    def in_data_dir(
        cls,
        data_dir: str | Path = DEFAULT_DATA_DIR,
        *,
        id_factory: Callable[[], AclId] = new_acl_id,
        change_log_limit: int = DEFAULT_CHANGE_LOG_LIMIT,
        busy_timeout: float = 30.0,
        cluster_id_factory: Callable[[], str] = new_cluster_id,
    ) -> SqliteStore:
        """The store at ``<data_dir>/kafkaguard.db``; the keywords are ``__init__``'s, with its defaults."""
        return cls(
            Path(data_dir) / DATABASE_NAME,
            id_factory=id_factory,
            change_log_limit=change_log_limit,
            busy_timeout=busy_timeout,
            cluster_id_factory=cluster_id_factory,
        )

    def __repr__(self) -> str:
        return f"SqliteStore(path={str(self.path)!r})"

    def check_integrity(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]`` for a sound database, else the problems found."""
        return self._sqlite.check_integrity()

    def wait_for_change(self, timeout: float) -> bool:
        """Sleep ``timeout`` and say nothing is known (False): SQLite tells no other process about a commit, so a
        follower polls on an interval (each idle poll costs one ``PRAGMA data_version``)."""
        time.sleep(timeout)
        return False

    def healthy(self) -> bool:
        """Always True: a local file has no server to lose (a failing disk shows as ``StoreError`` on use)."""
        return True

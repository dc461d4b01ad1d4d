"""``PostgresStore``: the shared SQL store (``store.sql``) on one connection pool, and the change feed on one
listening connection."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kafkaguard.model import AclId, StoredAcl
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
from kafkaguard.store.errors import StoreError
from kafkaguard.store.ports import AclDelta, History
from kafkaguard.store.postgres.connection import Database
from kafkaguard.store.postgres.listener import ChangeListener
from kafkaguard.store.sql.store import SqlStore, new_acl_id
from kafkaguard.store.url import StoreUrl
from kafkaguard.store.uuids import new_cluster_id


class PostgresStore(SqlStore):
    """``Store`` on one PostgreSQL database that any number of kafkaguard nodes share. Thread-safe."""

    def __init__(
        self,
        url: StoreUrl | str,
        *,
        password: str | None = None,
        id_factory: Callable[[], AclId] = new_acl_id,
        change_log_limit: int = DEFAULT_CHANGE_LOG_LIMIT,
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        cluster_id_factory: Callable[[], str] = new_cluster_id,
    ) -> None:
        """Connect to ``url`` (``postgresql://user@host:port/database``, no password in it) with ``password``
        (or the URL's own, when given a ``StoreUrl`` that has one), and migrate the schema.

        :raises InvalidConfigError: ``url`` is not such a URL, or holds a password.
        :raises StoreUnavailableError: PostgreSQL cannot be reached within ``connect_timeout`` seconds.
        :raises StoreError: it refused (``SchemaVersionError``: the database was written by a newer kafkaguard).
        """
        parsed = StoreUrl.parse(url) if isinstance(url, str) else url
        if password is not None:
            parsed = parsed.with_password(password)
        self.url = parsed
        db = Database(parsed, pool_size=pool_size, connect_timeout=connect_timeout)
        super().__init__(
            db, id_factory=id_factory, change_log_limit=change_log_limit, cluster_id_factory=cluster_id_factory
        )
        self._postgres = db
        self._listener = ChangeListener(parsed, connect_timeout=connect_timeout)

    def __repr__(self) -> str:
        return f"PostgresStore(url={str(self.url)!r})"

    def close(self) -> None:
        self._listener.close()
        self._postgres.close()

    def server_secret(self, factory: Callable[[], bytes]) -> bytes:
        """The server secret every node of this store shares (it derives the decoy salts of unknown SCRAM users,
        which must not differ from node to node): ``factory``'s, stored by the first node that asks.

        :raises StoreError: it cannot be read or stored.
        """
        with self._postgres.write() as tx:
            tx.run("INSERT INTO secrets (name, value) VALUES ('server', ?) ON CONFLICT (name) DO NOTHING", (factory(),))
            row = tx.one("SELECT value FROM secrets WHERE name = 'server'")
        if row is None:
            raise StoreError("the server secret could not be stored")
        return bytes(row[0])

    def import_stored_acls(self, acls: Sequence[StoredAcl], *, history: History[AclDelta] | None = None) -> AclDelta:
        """Add ``acls`` keeping their ids (``kafkaguard store migrate``); one transaction, with ``history``'s
        events."""
        return self._acls.import_stored_acls(acls, history=history)

    def wait_for_change(self, timeout: float) -> bool:
        """True at the next change notification from any node (or when the listener has just reconnected and may
        have missed one), False after ``timeout`` seconds without (``listener``)."""
        return self._listener.wait(timeout)

    def healthy(self) -> bool:
        """False while PostgreSQL is known to be unreachable: the last use of the pool failed to connect."""
        return self._postgres.healthy()

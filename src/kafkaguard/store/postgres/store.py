"""``PostgresStore``: the four table sets on one connection pool, and the change feed on one listening connection."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from types import TracebackType

from kafkaguard.model import AclBinding, AclBindingFilter, AclId, StoredAcl
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
from kafkaguard.store.errors import StoreError
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    CredentialInfo,
    CredentialSnapshot,
    CredentialWrite,
    MembershipChange,
    MembershipSnapshot,
    MembershipWrite,
    QuotaChange,
    QuotaSnapshot,
    QuotaWrite,
    TopicCreation,
    TopicRecord,
    TopicSnapshot,
    UserAlteration,
)
from kafkaguard.store.postgres.acls import AclTables
from kafkaguard.store.postgres.connection import Database
from kafkaguard.store.postgres.credentials import CredentialTables
from kafkaguard.store.postgres.groups import GroupTables
from kafkaguard.store.postgres.listener import ChangeListener
from kafkaguard.store.postgres.quotas import QuotaTables
from kafkaguard.store.postgres.topics import TopicTables
from kafkaguard.store.url import StoreUrl
from kafkaguard.store.uuids import new_cluster_id


def _new_id() -> AclId:
    return AclId(str(uuid.uuid4()))


class PostgresStore:
    """``Store`` on one PostgreSQL database that any number of kafkaguard nodes share. Thread-safe.

    Like ``SqliteStore``, every method is spelled out here and hands its call to one table set, so this class's
    namespace is the store's whole surface.
    """

    def __init__(
        self,
        url: StoreUrl | str,
        *,
        password: str | None = None,
        id_factory: Callable[[], AclId] = _new_id,
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
        self._db = Database(parsed, pool_size=pool_size, connect_timeout=connect_timeout)
        self._listener = ChangeListener(parsed, connect_timeout=connect_timeout)
        self._acls = AclTables(self._db, id_factory=id_factory, limit=max(1, change_log_limit))
        self._credentials = CredentialTables(self._db)
        self._topics = TopicTables(self._db, cluster_id_factory=cluster_id_factory)
        self._quotas = QuotaTables(self._db)
        self._groups = GroupTables(self._db)

    def __repr__(self) -> str:
        return f"PostgresStore(url={str(self.url)!r})"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._listener.close()
        self._db.close()

    def server_secret(self, factory: Callable[[], bytes]) -> bytes:
        """The server secret every node of this store shares (it derives the decoy salts of unknown SCRAM users,
        which must not differ from node to node): ``factory``'s, stored by the first node that asks.

        :raises StoreError: it cannot be read or stored.
        """
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO secrets (name, value) VALUES ('server', %s) ON CONFLICT (name) DO NOTHING", (factory(),)
            )
            row = conn.execute("SELECT value FROM secrets WHERE name = 'server'").fetchone()
        if row is None:
            raise StoreError("the server secret could not be stored")
        return bytes(row[0])

    # ------------------------------------------------------------------------------------------ change feed

    def wait_for_change(self, timeout: float) -> bool:
        """True at the next change notification from any node (or when the listener has just reconnected and may
        have missed one), False after ``timeout`` seconds without (``listener``)."""
        return self._listener.wait(timeout)

    def healthy(self) -> bool:
        """False while PostgreSQL is known to be unreachable: the last use of the pool failed to connect."""
        return self._db.healthy()

    # ---------------------------------------------------------------------------------------------- ACLs

    def load_acls(self) -> AclSnapshot:
        return self._acls.load_acls()

    def acl_version(self) -> int:
        return self._acls.acl_version()

    def changes_since(self, version: int) -> AclDelta | None:
        return self._acls.changes_since(version)

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        return self._acls.find_acls(acl_filter)

    def create_acls(self, bindings: Sequence[AclBinding]) -> AclCreation:
        return self._acls.create_acls(bindings)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AclDeletion:
        return self._acls.delete_acls(filters)

    def import_acls(self, bindings: Iterable[AclBinding], *, replace: bool) -> AclDelta:
        return self._acls.import_acls(bindings, replace=replace)

    def import_stored_acls(self, acls: Sequence[StoredAcl]) -> AclDelta:
        """Add ``acls`` keeping their ids (``kafkaguard store migrate``); one transaction."""
        return self._acls.import_stored_acls(acls)

    # --------------------------------------------------------------------------------------- credentials

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get_credential(user, mechanism)

    def load_credentials(self) -> CredentialSnapshot:
        return self._credentials.load_credentials()

    def credential_version(self) -> int:
        return self._credentials.credential_version()

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        return self._credentials.credential_infos(users)

    def alter_credentials(self, alterations: Sequence[UserAlteration]) -> CredentialWrite:
        return self._credentials.alter_credentials(alterations)

    # -------------------------------------------------------------------------------------------- topics

    def cluster_id(self) -> str:
        return self._topics.cluster_id()

    def topic_version(self) -> int:
        return self._topics.topic_version()

    def load_topics(self) -> TopicSnapshot:
        return self._topics.load_topics()

    def list_topics(self) -> list[TopicRecord]:
        return self._topics.list_topics()

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        return self._topics.get_topics(names)

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        return self._topics.get_topics_by_id(ids)

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        return self._topics.conflicting_topics(names)

    def create_topics(self, records: Sequence[TopicRecord]) -> list[TopicCreation]:
        return self._topics.create_topics(records)

    def delete_topics(self, names: Sequence[str]) -> list[TopicRecord | None]:
        return self._topics.delete_topics(names)

    def delete_topics_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicRecord | None]:
        return self._topics.delete_topics_by_id(ids)

    # ------------------------------------------------------------------------------------- client quotas

    def quota_version(self) -> int:
        return self._quotas.quota_version()

    def load_quotas(self) -> QuotaSnapshot:
        return self._quotas.load_quotas()

    def alter_quotas(self, changes: Sequence[QuotaChange]) -> QuotaWrite:
        return self._quotas.alter_quotas(changes)

    # ---------------------------------------------------------------------------------- principal groups

    def membership_version(self) -> int:
        return self._groups.membership_version()

    def load_memberships(self) -> MembershipSnapshot:
        return self._groups.load_memberships()

    def alter_memberships(self, changes: Sequence[MembershipChange]) -> MembershipWrite:
        return self._groups.alter_memberships(changes)

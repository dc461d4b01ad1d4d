"""``SqliteStore``: the four table sets composed on one connection."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kafkaguard.model import AclBinding, AclBindingFilter, AclId, StoredAcl
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
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
from kafkaguard.store.sqlite.acls import AclTables
from kafkaguard.store.sqlite.connection import DATABASE_NAME, DEFAULT_DATA_DIR, DEFAULT_PATH, Database
from kafkaguard.store.sqlite.credentials import CredentialTables
from kafkaguard.store.sqlite.groups import GroupTables
from kafkaguard.store.sqlite.quotas import QuotaTables
from kafkaguard.store.sqlite.topics import TopicTables
from kafkaguard.store.uuids import new_cluster_id


def _new_id() -> AclId:
    return AclId(str(uuid.uuid4()))


class SqliteStore:
    """``AclStore``, ``CredentialStore``, ``TopicStore`` and ``QuotaStore`` on one SQLite database file.
    Thread-safe; one connection per instance (open one instance per process).

    Every method is spelled out here and hands its call to one table set, rather than being inherited: this
    class's own namespace is then the store's whole surface, in one place to read, and whatever wraps the
    methods found in ``vars(SqliteStore)`` (the server tests record every store call) sees every one.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        id_factory: Callable[[], AclId] = _new_id,
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
        self.path = db.path
        # The connection and its lock, for tests and benchmarks that look beneath the ports.
        self._conn = db.conn
        self._lock = db.lock
        self._db = db
        self._acls = AclTables(db, id_factory=id_factory, limit=max(1, change_log_limit))
        self._credentials = CredentialTables(db)
        self._topics = TopicTables(db, cluster_id_factory=cluster_id_factory)
        self._quotas = QuotaTables(db)
        self._groups = GroupTables(db)

    @classmethod
    def in_data_dir(cls, data_dir: str | Path = DEFAULT_DATA_DIR, **kwargs: Any) -> SqliteStore:
        """The store at ``<data_dir>/kafkaguard.db``."""
        return cls(Path(data_dir) / DATABASE_NAME, **kwargs)

    def __repr__(self) -> str:
        return f"SqliteStore(path={str(self.path)!r})"

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def check_integrity(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]`` for a sound database, else the problems found."""
        return self._db.check_integrity()

    # ------------------------------------------------------------------------------------------ change feed

    def wait_for_change(self, timeout: float) -> bool:
        """Sleep ``timeout`` and say nothing is known (False): SQLite tells no other process about a commit, so a
        follower polls on an interval (each idle poll costs one ``PRAGMA data_version``)."""
        time.sleep(timeout)
        return False

    def healthy(self) -> bool:
        """Always True: a local file has no server to lose (a failing disk shows as ``StoreError`` on use)."""
        return True

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

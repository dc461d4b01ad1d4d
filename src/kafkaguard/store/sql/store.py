"""``SqlStore``: the table sets composed on one SQL database, the part ``SqliteStore`` and ``PostgresStore`` share.

Each of them is this class on its own connection (``Database``), adding what only its database has: SQLite a file
path, an integrity check and polling on an interval; PostgreSQL a change listener, a health state, the shared
server secret and the import of ACLs under their ids for ``store migrate``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from types import TracebackType
from typing import Self

from kafkaguard.model import AclBinding, AclBindingFilter, AclId, HistoryQuery, ManagementEvent, StoredAcl
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    CredentialInfo,
    CredentialSnapshot,
    CredentialWrite,
    History,
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
from kafkaguard.store.sql.acls import AclTables
from kafkaguard.store.sql.credentials import CredentialTables
from kafkaguard.store.sql.groups import GroupTables
from kafkaguard.store.sql.history import HistoryTable
from kafkaguard.store.sql.quotas import QuotaTables
from kafkaguard.store.sql.topics import TopicTables
from kafkaguard.store.sql.transaction import Database


def new_acl_id() -> AclId:
    """A new random ACL id (a UUID's text)."""
    return AclId(str(uuid.uuid4()))


class SqlStore:
    """ACLs, SCRAM credentials, topics, client quotas and principal groups on the database ``db``. Thread-safe.
    ``id_factory`` makes the id of each new ACL; the ACL change log keeps at most ``change_log_limit`` versions;
    ``cluster_id_factory`` is called at most once per process, by the first ``cluster_id()``.

    Every method is spelled out here and hands its call to one table set, rather than being inherited from them:
    this class and its subclass are then the store's whole surface, in two places to read, and whatever wraps a
    store's methods (the server tests record every store call) finds each one by name.
    """

    def __init__(
        self,
        db: Database,
        *,
        id_factory: Callable[[], AclId],
        change_log_limit: int,
        cluster_id_factory: Callable[[], str],
    ) -> None:
        self._db = db
        self._acls = AclTables(db, id_factory=id_factory, limit=max(1, change_log_limit))
        self._credentials = CredentialTables(db)
        self._topics = TopicTables(db, cluster_id_factory=cluster_id_factory)
        self._quotas = QuotaTables(db)
        self._groups = GroupTables(db)
        self._history = HistoryTable(db)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # ---------------------------------------------------------------------------------------------- ACLs

    def load_acls(self) -> AclSnapshot:
        return self._acls.load_acls()

    def acl_version(self) -> int:
        return self._acls.acl_version()

    def changes_since(self, version: int) -> AclDelta | None:
        return self._acls.changes_since(version)

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        return self._acls.find_acls(acl_filter)

    def create_acls(
        self, bindings: Sequence[AclBinding], *, history: History[AclCreation] | None = None
    ) -> AclCreation:
        return self._acls.create_acls(bindings, history=history)

    def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, history: History[AclDeletion] | None = None
    ) -> AclDeletion:
        return self._acls.delete_acls(filters, history=history)

    def import_acls(
        self, bindings: Iterable[AclBinding], *, replace: bool, history: History[AclDelta] | None = None
    ) -> AclDelta:
        return self._acls.import_acls(bindings, replace=replace, history=history)

    # --------------------------------------------------------------------------------------- credentials

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get_credential(user, mechanism)

    def load_credentials(self) -> CredentialSnapshot:
        return self._credentials.load_credentials()

    def credential_version(self) -> int:
        return self._credentials.credential_version()

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        return self._credentials.credential_infos(users)

    def alter_credentials(
        self, alterations: Sequence[UserAlteration], *, history: History[CredentialWrite] | None = None
    ) -> CredentialWrite:
        return self._credentials.alter_credentials(alterations, history=history)

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

    def create_topics(
        self, records: Sequence[TopicRecord], *, history: History[list[TopicCreation]] | None = None
    ) -> list[TopicCreation]:
        return self._topics.create_topics(records, history=history)

    def delete_topics(
        self, names: Sequence[str], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        return self._topics.delete_topics(names, history=history)

    def delete_topics_by_id(
        self, ids: Sequence[uuid.UUID], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        return self._topics.delete_topics_by_id(ids, history=history)

    # ------------------------------------------------------------------------------------- client quotas

    def quota_version(self) -> int:
        return self._quotas.quota_version()

    def load_quotas(self) -> QuotaSnapshot:
        return self._quotas.load_quotas()

    def alter_quotas(self, changes: Sequence[QuotaChange], *, history: History[QuotaWrite] | None = None) -> QuotaWrite:
        return self._quotas.alter_quotas(changes, history=history)

    # ---------------------------------------------------------------------------------- principal groups

    def membership_version(self) -> int:
        return self._groups.membership_version()

    def load_memberships(self) -> MembershipSnapshot:
        return self._groups.load_memberships()

    def alter_memberships(
        self, changes: Sequence[MembershipChange], *, history: History[MembershipWrite] | None = None
    ) -> MembershipWrite:
        return self._groups.alter_memberships(changes, history=history)

    # -------------------------------------------------------------------------------- management history

    def record_events(self, events: Sequence[ManagementEvent]) -> None:
        self._history.record_events(events)

    def read_history(self, query: HistoryQuery) -> list[ManagementEvent]:
        return self._history.read_history(query)

"""The store's ports: what the service layer needs from a durable store of ACLs, SCRAM credentials and topics.

The protocols are synchronous (L2 imports no asyncio; the server calls them only from worker threads, never on
its event loop), and every method is safe to call from several threads. Every write is one transaction: it is
either wholly on disk when the call returns or not there at all.

ACL changes are versioned. Each stored change (an ACL added or removed) takes the next number of one counter, the
store's *ACL version*; ``changes_since(v)`` returns the net effect of every change after ``v``, so a process that
has applied version ``v`` to its authorizer can catch up with a delta instead of reloading 100k ACLs. A store keeps
a bounded change log: a version older than the log gives ``None``, and the caller reloads in full.

SCRAM credentials are versioned too, more simply: every credential written or deleted moves the store's *credential
version* forward, so a process holding all credentials in memory knows, by one cheap ``credential_version()``,
whether another process changed them (and then reloads them: there are few).

The topic catalog (names, ids, partition counts and configs, never message data) is small, and versioned like the
credentials: every topic created, changed or deleted takes the next number of the store's *topic version*, so a
process holding the catalog in memory polls that one number and reloads the catalog when it moved (no change log).

Client quotas (KIP-546: an entity of ``user``/``client-id``/``ip`` names, each a name or the default, and its
quota values) are few and versioned like the credentials: every value set or removed moves the *quota version*.
Principal groups (kafkaguard's: ``Group:ops`` in an ACL stands for every member of ``ops``) are versioned the same
way: every membership added or removed moves the *membership version*.

Management history: every write method takes ``history``, a function of the write's own outcome that returns the
management events describing it (the ACLs created with their ids, the ones removed ...); the store writes those
events in the same transaction as the change, so the history never shows a change that did not happen nor misses one
that did. ``record_events`` stores events of no change (refused items) in a transaction of their own, and
``read_history`` reads them back, newest first. Unlike the ACL change log, the history is never trimmed by the store:
management changes are made by people and tools, a few a day (a 100k-ACL import is one event per ACL, about 300 bytes
each); an operator who must bound it deletes old rows by time (``DELETE FROM management_events WHERE time < ...``),
which no reader depends on.

``ChangeFeed`` lets a process block until another process may have changed the store (PostgreSQL: a notification;
SQLite: the polling interval), and says whether the store is reachable; ``Store`` is all four ports and the feed on
one store, as the composition root opens it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeVar, runtime_checkable

from kafkaguard.model import (
    GROUP_TYPE,
    AclBinding,
    AclBindingFilter,
    AclId,
    HistoryQuery,
    ManagementEvent,
    StoredAcl,
)
from kafkaguard.model.group import groups_by_member
from kafkaguard.scram import ScramCredential, ScramMechanism

_R_contra = TypeVar("_R_contra", contravariant=True)


class History(Protocol[_R_contra]):
    """The management events a write's outcome stands for (see the module docstring): called once, inside the
    write's transaction, with what the write method is about to return; pure (no I/O, no store)."""

    def __call__(self, outcome: _R_contra, /) -> Sequence[ManagementEvent]: ...


@runtime_checkable
class HistoryStore(Protocol):
    """The management history of one store (every implementation keeps one beside its changes)."""

    def record_events(self, events: Sequence[ManagementEvent]) -> None:
        """Store events that describe no change (refused items), in one transaction of their own."""
        ...

    def read_history(self, query: HistoryQuery) -> list[ManagementEvent]:
        """The stored events ``query`` selects, newest first, each with its ``seq``."""
        ...


@dataclass(frozen=True, slots=True)
class AclSnapshot:
    """Every stored ACL at one version, read in one transaction."""

    acls: tuple[StoredAcl, ...]
    version: int


@dataclass(frozen=True, slots=True)
class AclDelta:
    """The net effect of the changes after ``base_version`` up to ``version``.

    ``removed`` are ids that existed at ``base_version``; ``added`` are ACLs that exist at ``version``. An ACL
    added and removed inside the window appears in neither, so applying ``removed`` first and then ``added`` to
    the state at ``base_version`` gives exactly the state at ``version``.
    """

    base_version: int
    version: int
    added: tuple[StoredAcl, ...] = ()
    removed: tuple[AclId, ...] = ()
    #: The ACLs ``removed`` names, as they were (for the management history; not part of equality: a delta built
    #: from ids alone is the same delta).
    removed_acls: tuple[StoredAcl, ...] = field(default=(), compare=False)

    @property
    def is_empty(self) -> bool:
        return not self.added and not self.removed


@dataclass(frozen=True, slots=True)
class AclCreation:
    """``acls[i]`` is the stored form of the i-th binding asked for: new, or the one already stored."""

    acls: tuple[StoredAcl, ...]
    delta: AclDelta


@dataclass(frozen=True, slots=True)
class AclDeletion:
    """``matched[i]`` lists every ACL the i-th filter matched in the state before the call (an ACL matched by
    several filters is listed under each and removed once)."""

    matched: tuple[tuple[StoredAcl, ...], ...]
    delta: AclDelta


@runtime_checkable
class AclStore(HistoryStore, Protocol):
    """Durable ACLs, each distinct binding stored once under a stable id."""

    def load_acls(self) -> AclSnapshot:
        """Every ACL and the version they are at."""
        ...

    def acl_version(self) -> int:
        """The current ACL version; cheap enough to poll many times a second."""
        ...

    def changes_since(self, version: int) -> AclDelta | None:
        """The net change from ``version`` to now, or None when ``version`` is older than the change log (or
        newer than the store): then the caller must reload with ``load_acls``."""
        ...

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        """Every stored ACL the filter matches (SEMANTICS.md §6)."""
        ...

    def create_acls(
        self, bindings: Sequence[AclBinding], *, history: History[AclCreation] | None = None
    ) -> AclCreation:
        """Store the bindings (already validated) in one transaction; an existing or repeated binding is stored
        once and keeps its id (SEMANTICS.md §8.3)."""
        ...

    def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, history: History[AclDeletion] | None = None
    ) -> AclDeletion:
        """Remove every ACL any filter matches, in one transaction (SEMANTICS.md §9)."""
        ...

    def import_acls(
        self, bindings: Iterable[AclBinding], *, replace: bool, history: History[AclDelta] | None = None
    ) -> AclDelta:
        """Add the bindings not yet stored; with ``replace``, also remove every stored ACL not among them.
        One transaction."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    """What may be revealed about a stored credential: its mechanism and iteration count (SEMANTICS.md §11.4)."""

    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True, slots=True)
class UserAlteration:
    """All the changes of one request to one user's credentials; a store applies them all or none."""

    user: str
    deletions: tuple[ScramMechanism, ...] = ()
    upsertions: tuple[ScramCredential, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class CredentialSnapshot:
    """Every stored credential, as (user, credential) pairs, at one credential version, read in one transaction."""

    credentials: tuple[tuple[str, ScramCredential], ...] = field(repr=False)
    version: int


@dataclass(frozen=True, slots=True)
class CredentialWrite:
    """What one ``alter_credentials`` call did. ``missing``: the users left unchanged because a deletion named a
    credential that is not stored, each with the first such mechanism. ``base_version``: the credential version
    just before this write; ``version``: just after it (equal when the call changed nothing). A writer whose
    ``base_version`` is the version it already holds knows that no other process wrote in between."""

    missing: Mapping[str, ScramMechanism]
    base_version: int
    version: int


@runtime_checkable
class CredentialStore(HistoryStore, Protocol):
    """Durable SCRAM credentials, one per (user, mechanism): salt, StoredKey, ServerKey and iterations only."""

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """The stored credential, or None."""
        ...

    def load_credentials(self) -> CredentialSnapshot:
        """Every stored credential (of a mechanism this kafkaguard knows) and the credential version."""
        ...

    def credential_version(self) -> int:
        """The current credential version; cheap enough to poll many times a second."""
        ...

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        """Mechanism and iterations for each of ``users`` (all users when None) that has a credential; users
        without one are absent from the result."""
        ...

    def alter_credentials(
        self, alterations: Sequence[UserAlteration], *, history: History[CredentialWrite] | None = None
    ) -> CredentialWrite:
        """Apply the alterations in one transaction, each user's all or none; the credential version moves forward
        if anything changed. A user whose deletions name a credential that is not stored is left unchanged and
        listed in ``missing``."""
        ...

    def close(self) -> None: ...


def collision_key(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: '.' and '_' become the same character in metric names, so two topic
    names equal after replacing '.' by '_' may not both exist."""
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    """One topic of the catalog. A partition is only an index below ``num_partitions`` (this server stores no
    message data and leads every partition itself). ``configs`` holds the topic configs set explicitly (not the
    defaults), as an immutable mapping sorted by name."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", MappingProxyType(dict(sorted(self.configs.items()))))

    def __hash__(self) -> int:
        # Written out because a mapping is not hashable; equal records have equal sorted config items.
        return hash(
            (self.name, self.topic_id, self.num_partitions, self.replication_factor, tuple(self.configs.items()))
        )


@dataclass(frozen=True, slots=True)
class TopicSnapshot:
    """Every stored topic, sorted by name, and the topic version they are at, read in one transaction."""

    topics: tuple[TopicRecord, ...]
    version: int


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """The outcome of ``create_topics`` for one record: ``conflict`` is None when the record was stored, else the
    stored topic that prevented it: the same name (it already exists) or a colliding one (``collision_key``)."""

    record: TopicRecord
    conflict: TopicRecord | None = None

    @property
    def created(self) -> bool:
        return self.conflict is None

    @property
    def already_exists(self) -> bool:
        return self.conflict is not None and self.conflict.name == self.record.name


@runtime_checkable
class TopicStore(HistoryStore, Protocol):
    """The durable topic catalog and the cluster id: each name at most once, each topic id at most once, no two
    names with the same ``collision_key``."""

    def cluster_id(self) -> str:
        """This cluster's id (Kafka's 22-character form), generated once and the same on every later call and in
        every process that opens the same store."""
        ...

    def topic_version(self) -> int:
        """The current topic version: one more for every topic created, changed or deleted since the store was
        made; cheap enough to poll many times a second."""
        ...

    def load_topics(self) -> TopicSnapshot:
        """Every topic, sorted by name, and the topic version they are at."""
        ...

    def list_topics(self) -> list[TopicRecord]:
        """Every topic, sorted by name."""
        ...

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        """The stored topics among ``names``; absent names are absent from the result."""
        ...

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        """The stored topics among ``ids``; absent ids are absent from the result."""
        ...

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        """For each of ``names`` that ``create_topics`` would refuse now, the stored topic in the way (the same
        name, or one with the same ``collision_key``); the others are absent from the result."""
        ...

    def create_topics(
        self, records: Sequence[TopicRecord], *, history: History[list[TopicCreation]] | None = None
    ) -> list[TopicCreation]:
        """Store the records (already validated) in one transaction, each unless a stored topic, or an earlier
        record of the same call, has its name or its ``collision_key``. One outcome per record, in order.

        :raises StoreError: nothing was stored (also when a topic id is already taken).
        """
        ...

    def delete_topics(
        self, names: Sequence[str], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        """Remove the named topics in one transaction: for each name, the removed record, or None if there was
        no such topic (or an earlier name of the call already removed it)."""
        ...

    def delete_topics_by_id(
        self, ids: Sequence[uuid.UUID], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        """As ``delete_topics``, by topic id."""
        ...

    def close(self) -> None: ...


#: A client quota entity: (entity type, entity name) pairs sorted by type, each type at most once; a None name is
#: the type's default entity (Kafka's ``ClientQuotaEntity`` with a null name).
QuotaEntity = tuple[tuple[str, str | None], ...]


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical ``QuotaEntity`` of ``pairs`` (sorted by type; a repeated type keeps its last name)."""
    return tuple(sorted(dict(pairs).items()))


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """One entity's stored quotas: key to value, an immutable mapping sorted by key (never empty in a store)."""

    entity: QuotaEntity
    values: Mapping[str, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(sorted(self.values.items()))))

    def __hash__(self) -> int:
        return hash((self.entity, tuple(self.values.items())))


def quota_record_order(record: QuotaRecord) -> tuple[tuple[str, bool, str], ...]:
    """The order of records in a ``QuotaSnapshot``: by entity, type by type, a default entity before the named
    ones."""
    return tuple((entity_type, name is not None, name or "") for entity_type, name in record.entity)


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """Every entity with at least one quota, sorted by entity, at one quota version, read in one transaction."""

    quotas: tuple[QuotaRecord, ...]
    version: int


@dataclass(frozen=True, slots=True)
class QuotaChange:
    """Set ``entity``'s quota ``key`` to ``value``, or remove it (``value`` None; removing what is not stored is
    no change)."""

    entity: QuotaEntity
    key: str
    value: float | None


@dataclass(frozen=True, slots=True)
class QuotaWrite:
    """What one ``alter_quotas`` call did: the quota version just before it and just after it."""

    base_version: int
    version: int


@runtime_checkable
class QuotaStore(HistoryStore, Protocol):
    """Durable client quotas (already validated): one value per (entity, key)."""

    def quota_version(self) -> int:
        """The current quota version: one more for every value set or removed since the store was made; cheap
        enough to poll many times a second."""
        ...

    def load_quotas(self) -> QuotaSnapshot:
        """Every entity with quotas, sorted by entity, and the quota version they are at."""
        ...

    def alter_quotas(self, changes: Sequence[QuotaChange], *, history: History[QuotaWrite] | None = None) -> QuotaWrite:
        """Apply the changes in order, in one transaction."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class MembershipSnapshot:
    """Every principal group with its members: group name (``ops`` for the principal ``Group:ops``) to its member
    principals, both sorted, at one membership version, read in one transaction. A group exists while it has
    members."""

    groups: Mapping[str, tuple[str, ...]]
    version: int

    def __post_init__(self) -> None:
        ordered = {group: tuple(sorted(members)) for group, members in sorted(self.groups.items()) if members}
        object.__setattr__(self, "groups", MappingProxyType(ordered))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MembershipSnapshot)
            and dict(self.groups) == dict(other.groups)
            and self.version == other.version
        )

    def __hash__(self) -> int:
        return hash((tuple(self.groups.items()), self.version))

    def groups_by_principal(self) -> dict[str, tuple[str, ...]]:
        """Member principal → the group principals (``Group:ops``) it belongs to: what the authorizer reads."""
        return groups_by_member({f"{GROUP_TYPE}:{group}": members for group, members in self.groups.items()})


@dataclass(frozen=True, slots=True)
class MembershipChange:
    """Make ``principal`` a member of ``group`` (``member`` True) or not (False); adding a member that is one, or
    removing one that is not, is no change."""

    group: str
    principal: str
    member: bool


@dataclass(frozen=True, slots=True)
class MembershipWrite:
    """What one ``alter_memberships`` call did: the membership version just before it and just after it."""

    base_version: int
    version: int


@runtime_checkable
class GroupStore(HistoryStore, Protocol):
    """Durable principal groups (kafkaguard's, beyond Kafka): one row per (group, member principal), already
    validated. Versioned like the quotas: every membership added or removed moves the *membership version*."""

    def membership_version(self) -> int:
        """The current membership version; cheap enough to poll many times a second."""
        ...

    def load_memberships(self) -> MembershipSnapshot:
        """Every group and its members, and the membership version they are at."""
        ...

    def alter_memberships(
        self, changes: Sequence[MembershipChange], *, history: History[MembershipWrite] | None = None
    ) -> MembershipWrite:
        """Apply the changes in order, in one transaction."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ChangeFeed(Protocol):
    """How a process learns that another one changed the store, and whether the store can be reached.

    A sync loop calls ``wait_for_change`` from a worker thread, then polls every version (``acl_version``,
    ``credential_version``, …) and catches up: the versions decide what changed, so a wake-up that turns out to be
    for nothing, or a notification that never came, costs a poll and loses nothing.
    """

    def wait_for_change(self, timeout: float) -> bool:
        """Block until the store may have been changed by another process (True), or for ``timeout`` seconds at
        most (False). Never raises for an unreachable store (it waits out the timeout instead): the poll that
        follows reports that. Keep ``timeout`` short where the caller must be able to stop: the wait runs on a
        worker thread that nothing interrupts."""
        ...

    def healthy(self) -> bool:
        """False while the store is known to be unreachable (the last attempt to use it failed); cheap, no I/O."""
        ...


@runtime_checkable
class Store(AclStore, CredentialStore, TopicStore, QuotaStore, GroupStore, ChangeFeed, Protocol):
    """ACLs, credentials, topics, client quotas and principal groups in one store (``SqliteStore``,
    ``PostgresStore``), and its change feed: what the services of one process share."""

"""In-memory twins of the durable store, with the same semantics (fast unit tests, throwaway dev servers).

Nothing here survives the process, so nothing here may stand in for the SQLite store in tests of durability.

Each store keeps a management history (``MemoryHistory``); stores built with the same one share it, as the tables of
one SQL database share theirs. What it cannot share is a rollback: a ``history`` function that raises leaves the
change made (the services' are pure functions of the outcome and do not raise).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypeVar

from kafkaguard.model import AclBinding, AclBindingFilter, AclId, HistoryQuery, ManagementEvent, StoredAcl
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT, AclChange, net_delta
from kafkaguard.store.errors import StoreError
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
    QuotaEntity,
    QuotaRecord,
    QuotaSnapshot,
    QuotaWrite,
    TopicCreation,
    TopicRecord,
    TopicSnapshot,
    UserAlteration,
    collision_key,
    quota_record_order,
)
from kafkaguard.store.uuids import new_cluster_id

_R = TypeVar("_R")


class MemoryHistory:
    """A management history in a list, numbered like the SQL stores' (``seq`` from 1 up); never trimmed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[ManagementEvent] = []

    def written(self, outcome: _R, history: History[_R] | None) -> _R:
        """``outcome`` of a write, after storing the events ``history`` makes of it (under the write's lock)."""
        if history is not None:
            self.append(history(outcome))
        return outcome

    def append(self, events: Sequence[ManagementEvent]) -> None:
        with self._lock:
            for event in events:
                self._events.append(dataclasses.replace(event, seq=len(self._events) + 1))

    def read(self, query: HistoryQuery) -> list[ManagementEvent]:
        with self._lock:
            found = [event for event in reversed(self._events) if query.matches(event)]
        return found[: query.limit]


class _KeepsHistory:
    """``HistoryStore`` on a ``MemoryHistory``."""

    _history: MemoryHistory

    def record_events(self, events: Sequence[ManagementEvent]) -> None:
        self._history.append(events)

    def read_history(self, query: HistoryQuery) -> list[ManagementEvent]:
        return self._history.read(query)


def _new_id() -> AclId:
    return AclId(str(uuid.uuid4()))


class MemoryAclStore(_KeepsHistory):
    """An ``AclStore`` held in dicts, with a bounded change log like the SQLite store's."""

    def __init__(
        self,
        *,
        id_factory: Callable[[], AclId] = _new_id,
        change_log_limit: int = DEFAULT_CHANGE_LOG_LIMIT,
        history: MemoryHistory | None = None,
    ) -> None:
        self._history = history if history is not None else MemoryHistory()
        self._lock = threading.Lock()
        self._by_binding: dict[AclBinding, StoredAcl] = {}
        self._log: list[AclChange] = []
        self._version = 0
        self._id_factory = id_factory
        self._limit = change_log_limit

    def load_acls(self) -> AclSnapshot:
        with self._lock:
            return AclSnapshot(tuple(self._by_binding.values()), self._version)

    def acl_version(self) -> int:
        return self._version

    def changes_since(self, version: int) -> AclDelta | None:
        with self._lock:
            floor = self._log[0].seq - 1 if self._log else self._version
            if version < floor or version > self._version:
                return None
            return net_delta(version, self._version, (c for c in self._log if c.seq > version))

    def find_acls(self, acl_filter: AclBindingFilter) -> list[StoredAcl]:
        with self._lock:
            return [acl for acl in self._by_binding.values() if acl_filter.matches(acl.binding)]

    def create_acls(
        self, bindings: Sequence[AclBinding], *, history: History[AclCreation] | None = None
    ) -> AclCreation:
        with self._lock:
            base = self._version
            stored: list[StoredAcl] = []
            for binding in bindings:
                acl = self._by_binding.get(binding)
                if acl is None:
                    acl = self._by_binding[binding] = StoredAcl(self._id_factory(), binding)
                    self._log_change(True, acl)
                stored.append(acl)
            return self._history.written(AclCreation(tuple(stored), self._delta_since(base)), history)

    def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, history: History[AclDeletion] | None = None
    ) -> AclDeletion:
        with self._lock:
            base = self._version
            before = tuple(self._by_binding.values())
            matched = tuple(tuple(acl for acl in before if f.matches(acl.binding)) for f in filters)
            for group in matched:
                for acl in group:
                    if self._by_binding.pop(acl.binding, None) is not None:
                        self._log_change(False, acl)
            return self._history.written(AclDeletion(matched, self._delta_since(base)), history)

    def import_acls(
        self, bindings: Iterable[AclBinding], *, replace: bool, history: History[AclDelta] | None = None
    ) -> AclDelta:
        with self._lock:
            base = self._version
            wanted = dict.fromkeys(bindings)
            if replace:
                for binding in [b for b in self._by_binding if b not in wanted]:
                    self._log_change(False, self._by_binding.pop(binding))
            for binding in wanted:
                if binding not in self._by_binding:
                    acl = self._by_binding[binding] = StoredAcl(self._id_factory(), binding)
                    self._log_change(True, acl)
            return self._history.written(self._delta_since(base), history)

    def close(self) -> None:
        """Nothing to release."""

    def _log_change(self, added: bool, acl: StoredAcl) -> None:
        self._version += 1
        self._log.append(AclChange(self._version, added, acl))

    def _delta_since(self, base: int) -> AclDelta:
        """The delta of the write in progress (its changes are the log's tail), then the log trimmed."""
        first = self._log[0].seq if self._log else self._version + 1
        delta = net_delta(base, self._version, self._log[max(0, base + 1 - first) :])
        if len(self._log) > self._limit:
            del self._log[: len(self._log) - self._limit]
        return delta


class MemoryCredentialStore(_KeepsHistory):
    """A ``CredentialStore`` held in a dict, with a credential version like the SQLite store's."""

    def __init__(self, *, history: MemoryHistory | None = None) -> None:
        self._history = history if history is not None else MemoryHistory()
        self._lock = threading.Lock()
        self._credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        self._version = 0

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def load_credentials(self) -> CredentialSnapshot:
        with self._lock:
            pairs = tuple((user, credential) for (user, _mechanism), credential in self._credentials.items())
            return CredentialSnapshot(pairs, self._version)

    def credential_version(self) -> int:
        return self._version

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        with self._lock:
            found: dict[str, list[CredentialInfo]] = {}
            for (user, mechanism), credential in sorted(self._credentials.items(), key=lambda i: i[0][1].code):
                if users is None or user in users:
                    found.setdefault(user, []).append(CredentialInfo(mechanism, credential.iterations))
            return {user: tuple(infos) for user, infos in found.items()}

    def alter_credentials(
        self, alterations: Sequence[UserAlteration], *, history: History[CredentialWrite] | None = None
    ) -> CredentialWrite:
        with self._lock:
            missing: dict[str, ScramMechanism] = {}
            base = self._version
            for alteration in alterations:
                user = alteration.user
                absent = [m for m in alteration.deletions if (user, m) not in self._credentials]
                if absent:
                    missing[user] = absent[0]
                    continue
                for mechanism in alteration.deletions:
                    del self._credentials[(user, mechanism)]
                for credential in alteration.upsertions:
                    self._credentials[(user, credential.mechanism)] = credential
                # One step per credential written or deleted, as the SQLite store's triggers count.
                self._version += len(alteration.deletions) + len(alteration.upsertions)
            return self._history.written(CredentialWrite(missing, base, self._version), history)

    def close(self) -> None:
        """Nothing to release."""


class MemoryTopicStore(_KeepsHistory):
    """A ``TopicStore`` held in a dict keyed by ``collision_key`` (so a name and its colliding names share a slot),
    with a topic version like the SQLite store's. Its cluster id lives as long as the instance."""

    def __init__(self, *, cluster_id: str | None = None, history: MemoryHistory | None = None) -> None:
        self._history = history if history is not None else MemoryHistory()
        self._lock = threading.Lock()
        self._cluster_id = cluster_id if cluster_id is not None else new_cluster_id()
        self._by_key: dict[str, TopicRecord] = {}
        self._version = 0

    def cluster_id(self) -> str:
        return self._cluster_id

    def topic_version(self) -> int:
        return self._version

    def load_topics(self) -> TopicSnapshot:
        with self._lock:
            return TopicSnapshot(tuple(sorted(self._by_key.values(), key=lambda record: record.name)), self._version)

    def list_topics(self) -> list[TopicRecord]:
        with self._lock:
            return sorted(self._by_key.values(), key=lambda record: record.name)

    def get_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        with self._lock:
            found = (self._by_key.get(collision_key(name)) for name in set(names))
            return {record.name: record for record in found if record is not None and record.name in names}

    def get_topics_by_id(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, TopicRecord]:
        with self._lock:
            return {record.topic_id: record for record in self._by_key.values() if record.topic_id in ids}

    def conflicting_topics(self, names: Collection[str]) -> dict[str, TopicRecord]:
        with self._lock:
            found = {name: self._by_key.get(collision_key(name)) for name in names}
            return {name: record for name, record in found.items() if record is not None}

    def create_topics(
        self, records: Sequence[TopicRecord], *, history: History[list[TopicCreation]] | None = None
    ) -> list[TopicCreation]:
        with self._lock:
            # Check the ids first: like the SQLite store, a taken topic id fails the whole call.
            ids = {record.topic_id for record in self._by_key.values()}
            for record in records:
                if record.topic_id in ids:
                    raise StoreError(f"topic id {record.topic_id} is already taken")
                ids.add(record.topic_id)
            outcomes: list[TopicCreation] = []
            for record in records:
                key = collision_key(record.name)
                conflict = self._by_key.get(key)
                if conflict is None:
                    self._by_key[key] = record
                    self._version += 1
                outcomes.append(TopicCreation(record, conflict))
            return self._history.written(outcomes, history)

    def delete_topics(
        self, names: Sequence[str], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        with self._lock:
            removed: list[TopicRecord | None] = []
            for name in names:
                key = collision_key(name)
                record = self._by_key.get(key)
                removed.append(self._by_key.pop(key) if record is not None and record.name == name else None)
            self._version += sum(record is not None for record in removed)
            return self._history.written(removed, history)

    def delete_topics_by_id(
        self, ids: Sequence[uuid.UUID], *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]:
        with self._lock:
            by_id = {record.topic_id: key for key, record in self._by_key.items()}
            removed: list[TopicRecord | None] = []
            for topic_id in ids:
                key = by_id.pop(topic_id, None)
                removed.append(self._by_key.pop(key) if key is not None else None)
            self._version += sum(record is not None for record in removed)
            return self._history.written(removed, history)

    def close(self) -> None:
        """Nothing to release."""


class MemoryQuotaStore(_KeepsHistory):
    """A ``QuotaStore`` held in a dict, with a quota version like the SQLite store's (one step per value set or
    removed, as its triggers count)."""

    def __init__(self, *, history: MemoryHistory | None = None) -> None:
        self._history = history if history is not None else MemoryHistory()
        self._lock = threading.Lock()
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._version = 0

    def quota_version(self) -> int:
        return self._version

    def load_quotas(self) -> QuotaSnapshot:
        with self._lock:
            records = (QuotaRecord(entity, values) for entity, values in self._quotas.items() if values)
            return QuotaSnapshot(tuple(sorted(records, key=quota_record_order)), self._version)

    def alter_quotas(self, changes: Sequence[QuotaChange], *, history: History[QuotaWrite] | None = None) -> QuotaWrite:
        with self._lock:
            base = self._version
            for change in changes:
                values = self._quotas.setdefault(change.entity, {})
                if change.value is None:
                    if values.pop(change.key, None) is not None:
                        self._version += 1
                    if not values:
                        del self._quotas[change.entity]
                else:
                    values[change.key] = float(change.value)
                    self._version += 1
            return self._history.written(QuotaWrite(base, self._version), history)

    def close(self) -> None:
        """Nothing to release."""


class MemoryGroupStore(_KeepsHistory):
    """A ``GroupStore`` held in a dict, with a membership version like the SQLite store's (one step per membership
    added or removed, as its triggers count)."""

    def __init__(self, *, history: MemoryHistory | None = None) -> None:
        self._history = history if history is not None else MemoryHistory()
        self._lock = threading.Lock()
        self._groups: dict[str, set[str]] = {}
        self._version = 0

    def membership_version(self) -> int:
        return self._version

    def load_memberships(self) -> MembershipSnapshot:
        with self._lock:
            return MembershipSnapshot({group: tuple(members) for group, members in self._groups.items()}, self._version)

    def alter_memberships(
        self, changes: Sequence[MembershipChange], *, history: History[MembershipWrite] | None = None
    ) -> MembershipWrite:
        with self._lock:
            base = self._version
            for change in changes:
                members = self._groups.setdefault(change.group, set())
                if change.member and change.principal not in members:
                    members.add(change.principal)
                    self._version += 1
                elif not change.member and change.principal in members:
                    members.discard(change.principal)
                    self._version += 1
                if not members:
                    del self._groups[change.group]
            return self._history.written(MembershipWrite(base, self._version), history)

    def close(self) -> None:
        """Nothing to release."""

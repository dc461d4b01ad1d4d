"""In-memory twins of the durable store, with the same semantics (fast unit tests, throwaway dev servers).

Nothing here survives the process, so nothing here may stand in for the SQLite store in tests of durability.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kafkaguard.model import AclBinding, AclBindingFilter, AclId, StoredAcl
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT, AclChange, net_delta
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    CredentialInfo,
    UserAlteration,
)


def _new_id() -> AclId:
    return AclId(str(uuid.uuid4()))


class MemoryAclStore:
    """An ``AclStore`` held in dicts, with a bounded change log like the SQLite store's."""

    def __init__(
        self, *, id_factory: Callable[[], AclId] = _new_id, change_log_limit: int = DEFAULT_CHANGE_LOG_LIMIT
    ) -> None:
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

    def create_acls(self, bindings: Sequence[AclBinding]) -> AclCreation:
        with self._lock:
            base = self._version
            stored: list[StoredAcl] = []
            for binding in bindings:
                acl = self._by_binding.get(binding)
                if acl is None:
                    acl = self._by_binding[binding] = StoredAcl(self._id_factory(), binding)
                    self._log_change(True, acl)
                stored.append(acl)
            return AclCreation(tuple(stored), self._delta_since(base))

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> AclDeletion:
        with self._lock:
            base = self._version
            before = tuple(self._by_binding.values())
            matched = tuple(tuple(acl for acl in before if f.matches(acl.binding)) for f in filters)
            for group in matched:
                for acl in group:
                    if self._by_binding.pop(acl.binding, None) is not None:
                        self._log_change(False, acl)
            return AclDeletion(matched, self._delta_since(base))

    def import_acls(self, bindings: Iterable[AclBinding], *, replace: bool) -> AclDelta:
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
            return self._delta_since(base)

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


class MemoryCredentialStore:
    """A ``CredentialStore`` held in a dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        with self._lock:
            found: dict[str, list[CredentialInfo]] = {}
            for (user, mechanism), credential in sorted(self._credentials.items(), key=lambda i: i[0][1].code):
                if users is None or user in users:
                    found.setdefault(user, []).append(CredentialInfo(mechanism, credential.iterations))
            return {user: tuple(infos) for user, infos in found.items()}

    def alter_credentials(self, alterations: Sequence[UserAlteration]) -> Mapping[str, ScramMechanism]:
        with self._lock:
            missing: dict[str, ScramMechanism] = {}
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
            return missing

    def close(self) -> None:
        """Nothing to release."""

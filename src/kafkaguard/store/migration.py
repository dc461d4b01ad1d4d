"""Copying everything one store holds into another (``kafkaguard store migrate``): ACLs under their own ids, SCRAM
credentials, topics with their ids, client quotas, principal groups, and the cluster id; then counting both sides.

The target must be empty: a migration never merges into, or overwrites, a store that nodes may already be
using (a half-copied or reused database is refused, and the remedy is a fresh database). Each kind is copied in
one transaction; a migration cut short leaves a target that is refused as non-empty on the next attempt, never a
silent mix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kafkaguard.model import Actor, HistoryQuery, StoredAcl
from kafkaguard.scram import ScramCredential
from kafkaguard.store.errors import StoreError
from kafkaguard.store.events import acl_event, member_event, quota_event, scram_event, topic_event
from kafkaguard.store.ports import AclDelta, History, MembershipChange, QuotaChange, Store, UserAlteration

#: "Every event" as a history limit (the copy reads the whole history in one query).
_ALL = 2**62


class MigrationTarget(Store, Protocol):
    """A store that can take ACLs under the ids they already have (``PostgresStore``)."""

    def import_stored_acls(
        self, acls: Sequence[StoredAcl], *, history: History[AclDelta] | None = None
    ) -> AclDelta: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreCounts:
    """How much a store holds, kind by kind."""

    acls: int
    credentials: int
    topics: int
    quotas: int
    memberships: int = 0

    @property
    def empty(self) -> bool:
        return not (self.acls or self.credentials or self.topics or self.quotas or self.memberships)

    def __str__(self) -> str:
        return (
            f"{self.acls} ACLs, {self.credentials} SCRAM credentials, {self.topics} topics, "
            f"{self.quotas} client quota entities, {self.memberships} group memberships"
        )


def count(store: Store) -> StoreCounts:
    """What ``store`` holds."""
    return StoreCounts(
        acls=len(store.load_acls().acls),
        credentials=len(store.load_credentials().credentials),
        topics=len(store.load_topics().topics),
        quotas=len(store.load_quotas().quotas),
        memberships=sum(len(members) for members in store.load_memberships().groups.values()),
    )


def migrate_store(source: Store, target: MigrationTarget, *, actor: Actor) -> StoreCounts:
    """Copy ``source`` into the empty ``target`` and check that both now hold the same; returns the counts.

    The management history comes along: the source's events first (oldest first, so the target numbers them in the
    same order, under their own times and actors), then one event per item the migration writes, by ``actor``
    (``User:<login>`` via ``migrate``), each in the transaction of its kind.

    :raises StoreError: the target is not empty, or after the copy the two stores differ (the message says how).
    """
    before = count(target)
    if not before.empty:
        raise StoreError(
            f"the target store already holds {before}: migrate into an empty database (create a new one, or drop "
            "and recreate this one); kafkaguard never merges into a store in use"
        )
    target.record_events(list(reversed(source.read_history(HistoryQuery(limit=_ALL)))))
    acls = source.load_acls().acls
    target.import_stored_acls(acls, history=lambda _: [acl_event("acl.created", actor, acl) for acl in acls])
    by_user: dict[str, list[ScramCredential]] = {}
    for user, credential in source.load_credentials().credentials:
        by_user.setdefault(user, []).append(credential)
    target.alter_credentials(
        [UserAlteration(user, upsertions=tuple(creds)) for user, creds in by_user.items()],
        history=lambda _: [
            scram_event("scram.upserted", actor, user, c.mechanism.mechanism_name, c.iterations)
            for user, creds in by_user.items()
            for c in creds
        ],
    )
    topics = source.load_topics().topics
    target.create_topics(topics, history=lambda _: [topic_event("topic.created", actor, t.name, t) for t in topics])
    quotas = [QuotaChange(r.entity, k, v) for r in source.load_quotas().quotas for k, v in r.values.items()]
    target.alter_quotas(quotas, history=lambda _: [quota_event(actor, q.entity, q.key, q.value) for q in quotas])
    members = [
        MembershipChange(group, principal, member=True)
        for group, members in source.load_memberships().groups.items()
        for principal in members
    ]
    target.alter_memberships(
        members, history=lambda _: [member_event("group.member_added", actor, m.group, m.principal) for m in members]
    )
    _verify(source, target)
    return count(target)


def _verify(source: Store, target: Store) -> None:
    """Compare the two stores' contents (not only their sizes)."""
    problems = []
    if {(a.id, a.binding) for a in source.load_acls().acls} != {(a.id, a.binding) for a in target.load_acls().acls}:
        problems.append("ACLs")
    if set(source.load_credentials().credentials) != set(target.load_credentials().credentials):
        problems.append("SCRAM credentials")
    if source.load_topics().topics != target.load_topics().topics:
        problems.append("topics")
    if _quota_texts(source) != _quota_texts(target):
        problems.append("client quotas")
    if dict(source.load_memberships().groups) != dict(target.load_memberships().groups):
        problems.append("principal groups")
    if problems:
        raise StoreError(
            f"after the copy the target differs from the source in: {', '.join(problems)} (source: {count(source)}; "
            f"target: {count(target)}); was the source changed meanwhile? Recreate the target database and retry"
        )


def _quota_texts(store: Store) -> list[tuple[object, ...]]:
    """The quotas with each value as its ``repr``: NaN, which Kafka accepts, is equal to nothing, not even itself."""
    return [(r.entity, *((key, repr(value)) for key, value in r.values.items())) for r in store.load_quotas().quotas]

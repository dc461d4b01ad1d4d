"""The ACL change log shared by the store implementations, and its compaction into one net delta."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkaguard.model import AclId, StoredAcl
from kafkaguard.store.ports import AclDelta

#: How many ACL changes a store keeps for followers before the oldest are dropped (a follower further behind
#: reloads in full).
DEFAULT_CHANGE_LOG_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class AclChange:
    """One logged change: ``acl`` was added (``added``) or removed at version ``seq``."""

    seq: int
    added: bool
    acl: StoredAcl


def net_delta(base_version: int, version: int, changes: Iterable[AclChange]) -> AclDelta:
    """Compact changes in ``seq`` order into their net effect.

    Ids are never reused, so an id is added at most once and removed at most once, after its addition: a removal
    of an id added inside the window cancels that addition; any other removal is of an ACL that existed before.
    """
    added: dict[AclId, StoredAcl] = {}
    removed: dict[AclId, StoredAcl] = {}
    for change in changes:
        acl_id = change.acl.id
        if change.added:
            added[acl_id] = change.acl
        elif added.pop(acl_id, None) is None:
            removed[acl_id] = change.acl
    return AclDelta(base_version, version, tuple(added.values()), tuple(removed), tuple(removed.values()))

"""Principal groups (kafkaguard's, beyond Kafka): which principals belong to which group, stored durably and
pushed into the authorizer's snapshot, where ``Group:NAME`` ACLs then apply to every member.

Resolution happens per request, from the same snapshot as the ACLs (``AuthorizerSnapshot.memberships``): a
membership change reaches every connection, open or new, on its next request in this process, and in the other
processes of a shared store within their sync interval. That is stronger than resolving groups once at login,
and keeps one snapshot per request from the decision through its audit record.

Rules, checked before anything is stored: a group name is 1 to 255 characters without control characters,
whitespace at either end, ``*`` alone or ``:``; a member is a valid principal (``Type:Name``) that is neither the
wildcard ``User:*`` (an ACL for ``User:*`` already applies to everyone) nor a group (groups do not nest, so a
decision never walks a graph). Super users stay exact principals: a group is never a super user.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.errors import InvalidGroupError
from kafkaguard.model import Actor
from kafkaguard.model.group import group_name, member_error
from kafkaguard.service.events import EventRelay, member_event
from kafkaguard.service.polled import Polled
from kafkaguard.store.ports import GroupStore, MembershipChange, MembershipSnapshot

log = logging.getLogger(__name__)


class GroupService(Polled):
    """Principal groups for one authorizer, backed by one store. Thread-safe: writes and syncs hold the service's
    lock; reads use the last loaded snapshot without it."""

    def __init__(self, store: GroupStore, authorizer: StandardAuthorizer, *, events: EventRelay | None = None) -> None:
        """Load every stored membership into ``authorizer``.

        :raises StoreError: the store cannot be read.
        """
        self._store = store
        self._events = events if events is not None else EventRelay()
        self._authorizer = authorizer
        self._lock = threading.Lock()
        self._snapshot = MembershipSnapshot({}, -1)
        self.sync()

    @property
    def version(self) -> int:
        """The store's membership version the authorizer reflects."""
        return self._snapshot.version

    def groups(self) -> Mapping[str, tuple[str, ...]]:
        """Every group (by name, without ``Group:``) and its members, sorted."""
        return self._snapshot.groups

    # ---------------------------------------------------------------------------------------------- changes

    def add_members(self, group: str, principals: Iterable[str], *, actor: Actor) -> None:
        """Make each principal a member of ``group`` (one transaction; members already in it stay).

        :raises InvalidGroupError: the group name or a principal is refused (nothing is stored).
        :raises StoreError: the store cannot be written (nothing is stored).
        """
        self._alter(group, principals, member=True, actor=actor)

    def remove_members(self, group: str, principals: Iterable[str], *, actor: Actor) -> None:
        """Remove each principal from ``group`` (one transaction; principals not in it are ignored).

        :raises InvalidGroupError: the group name is refused.
        :raises StoreError: the store cannot be written (nothing is removed).
        """
        self._alter(group, principals, member=False, actor=actor)

    def delete_group(self, group: str, *, actor: Actor) -> tuple[str, ...]:
        """Remove every member of ``group``; returns the members it had (none when there was no such group).

        :raises InvalidGroupError: the group name is refused.
        :raises StoreError: the store cannot be written.
        """
        name = group_name(group)
        with self._lock:
            self._sync_locked()
            members = self._snapshot.groups.get(name, ())
            self._write([MembershipChange(name, member, member=False) for member in members], actor)
        return members

    def _alter(self, group: str, principals: Iterable[str], *, member: bool, actor: Actor) -> None:
        name = group_name(group)
        wanted = list(dict.fromkeys(principals))
        if not wanted:
            raise InvalidGroupError("name at least one principal (Type:Name, e.g. User:alice)")
        if member:
            for principal in wanted:
                reason = member_error(principal)
                if reason is not None:
                    raise InvalidGroupError(f"{principal!r} cannot join group {name}: {reason}")
        with self._lock:
            self._write([MembershipChange(name, principal, member=member) for principal in wanted], actor)

    def _write(self, changes: Sequence[MembershipChange], actor: Actor) -> None:
        """Store the changes with one ``group.member_added``/``group.member_removed`` event each, then reload
        (memberships are few; one load keeps this process exact even when another wrote in between). Called with
        ``_lock`` held. A refused name raises before anything is stored and has no event: it names no group."""
        events = [
            member_event("group.member_added" if c.member else "group.member_removed", actor, c.group, c.principal)
            for c in changes
        ]
        if changes:
            self._store.alter_memberships(changes, history=lambda _write: events)
        self._sync_locked()
        self._events.publish(events)

    # ------------------------------------------------------------------------------------------- following

    def _stored_version(self) -> int:
        return self._store.membership_version()

    def sync(self) -> None:
        """Reload every membership and swap it into the authorizer.

        :raises StoreError: the store cannot be read.
        """
        with self._lock:
            self._sync_locked()

    def _sync_locked(self) -> None:
        loaded = self._store.load_memberships()
        if loaded.version == self._snapshot.version:
            return
        self._authorizer.replace_memberships(loaded.groups_by_principal())
        self._snapshot = loaded
        log.debug("loaded %d principal groups at version %d", len(loaded.groups), loaded.version)

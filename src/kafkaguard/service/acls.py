"""ACL use cases: create, delete, describe, export and import, and keeping the authorizer in step with the store.

The service is the single writer of its authorizer. Every change goes to the store first, in one transaction per
request (durable when the store returns), and only then to the authorizer, so an authorizer never shows an ACL
the store could lose. Changes made by other processes reach this one through ``poll()``/``sync()``: the store's
ACL version says whether anything changed, its change log says what (a delta), and a full reload is the fallback
when this process has fallen behind the log. The server and the console call ``poll()`` every
``sync_interval_seconds`` from a worker thread.

Reads (``describe_acls``, and every authorization) use the authorizer's current snapshot only: no store, no lock,
so they can run on an event loop. That snapshot holds every change this process made (a write reaches the
authorizer as soon as it is committed, before the call returns) and other processes' changes up to the last poll,
so they show within ``sync_interval_seconds``.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from kafkaguard.authorizer import AclCreateResult, AclDeleteResult, StandardAuthorizer
from kafkaguard.authorizer.mutation import plan_creation, plan_deletion
from kafkaguard.model import AclBinding, AclBindingFilter, Actor, ManagementEvent, StoredAcl
from kafkaguard.model.acl_json import AclJsonError, AclJsonProblem, acls_from_document, acls_to_document
from kafkaguard.service.events import MANAGEMENT, EventRelay, acl_event, acl_filter_event, store_refused
from kafkaguard.service.outage import unavailable
from kafkaguard.store import AclCreation, AclDeletion, AclDelta, AclStore, StoreUnavailableError

log = logging.getLogger(__name__)

#: An import changing more ACLs than this logs its count, not one line per ACL (its events still go to the store and
#: the audit trail, each).
_LOGGED_IMPORT_EVENTS = 100


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one ``sync`` did: the version reached, and either a delta's size or a full reload's."""

    version: int
    added: int
    removed: int
    full_reload: bool


@dataclass(frozen=True, slots=True)
class ImportResult:
    """``added``/``removed``: ACLs the import changed; ``unchanged``: bindings of the document already stored."""

    added: int
    removed: int
    unchanged: int


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a full load builds ~10^5 acyclic objects: otherwise every few
    hundred allocations trigger collections that rescan the growing heap (a large share of a 100k-ACL startup: see
    docs/benchmarks.md, "Figures from the code").
    Reference counting still frees everything; the collector resumes afterwards as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _sort_key(acl: StoredAcl) -> tuple[str, ...]:
    p, e = acl.binding.pattern, acl.binding.entry
    return (
        p.resource_type.name,
        p.name,
        p.pattern_type.name,
        e.principal,
        e.host,
        e.operation.name,
        e.permission_type.name,
    )


class AclService:
    """ACL changes for one authorizer, backed by one store. Thread-safe: writes and syncs hold the service's lock;
    reads take the authorizer's snapshot without it."""

    def __init__(self, store: AclStore, authorizer: StandardAuthorizer, *, events: EventRelay | None = None) -> None:
        """Load every stored ACL into ``authorizer`` (replacing what it held) and mark its initial load complete.
        ``events``: where this process's management events go besides the store (``service.events``).

        :raises StoreError: the store cannot be read.
        """
        self._store = store
        self._events = events if events is not None else EventRelay()
        self._authorizer = authorizer
        self._lock = threading.RLock()
        self._version = -1
        self.sync()
        authorizer.complete_initial_load()

    @property
    def authorizer(self) -> StandardAuthorizer:
        return self._authorizer

    @property
    def version(self) -> int:
        """The store's ACL version the authorizer reflects."""
        return self._version

    # ---------------------------------------------------------------------------------------------- changes

    def create_acls(self, bindings: Sequence[AclBinding], *, actor: Actor) -> list[AclCreateResult]:
        """One result per binding, in order (SEMANTICS.md §8). An invalid binding fails alone (Kafka
        INVALID_REQUEST with the reason); an identical ACL is stored once and creating it again succeeds.
        The valid bindings are stored in one transaction. Validation and results are ``authorizer.mutation``'s,
        the same as ``StandardAuthorizer.add_acls``'; the store gives the ids.

        The store unreachable: every valid binding fails with REQUEST_TIMED_OUT (``service.outage``).

        Events: one ``acl.created`` per distinct binding stored (with its id; one already stored counts too: the
        request for it succeeded), written with the ACLs; one per refused binding, with its error.

        :raises StoreError: nothing was stored (the whole request fails).
        """
        plan = plan_creation(bindings)
        stored: tuple[StoredAcl, ...] = ()
        events: list[ManagementEvent] = []

        def history(creation: AclCreation) -> list[ManagementEvent]:
            events[:] = [acl_event("acl.created", actor, acl) for acl in dict.fromkeys(creation.acls)]
            return events

        refused = [acl_event("acl.created", actor, b, e) for b, e in zip(plan.bindings, plan.errors, strict=True) if e]
        if plan.valid:
            try:
                with self._lock:
                    creation = self._store.create_acls(plan.valid, history=history)
                    self._apply(creation.delta)
            except StoreUnavailableError as e:
                refused += [acl_event("acl.created", actor, b, unavailable(e)) for b in plan.valid]
                self._refused(refused)
                return plan.failed(unavailable(e))
            stored = creation.acls
        self._events.publish(events)
        self._refused(refused)
        return plan.results(stored)

    def _refused(self, events: list[ManagementEvent]) -> None:
        store_refused(self._store, events)
        self._events.publish(events)

    def delete_acls(self, filters: Sequence[AclBindingFilter], *, actor: Actor) -> list[AclDeleteResult]:
        """One result per filter, in order (SEMANTICS.md §9): each lists every ACL it matched in the state before
        the request; an ACL matched by several filters is listed under each and removed once. All removals are
        one transaction. A filter with an UNKNOWN code gets Kafka's "Unknown patternFilter." /
        "Unknown entryFilter." error and matches nothing.

        Events: one ``acl.deleted`` per ACL removed (the removed binding and its id), written with the removal; one
        per refused filter, with the filter's fields instead of an ACL (``acl_filter_event``) and its error.

        :raises StoreError: nothing was removed.
        """
        plan = plan_deletion(filters)
        matched: tuple[tuple[StoredAcl, ...], ...] = ()
        events: list[ManagementEvent] = []

        def history(deletion: AclDeletion) -> list[ManagementEvent]:
            removed = dict.fromkeys(acl for group in deletion.matched for acl in group)
            events[:] = [acl_event("acl.deleted", actor, acl) for acl in removed]
            return events

        refused = [
            acl_filter_event(actor, acl_filter, error)
            for acl_filter, error in zip(plan.filters, plan.errors, strict=True)
            if error is not None
        ]
        if plan.valid:
            try:
                with self._lock:
                    deletion = self._store.delete_acls(plan.valid, history=history)
                    self._apply(deletion.delta)
            except StoreUnavailableError as e:
                self._refused(refused + [acl_filter_event(actor, f, unavailable(e)) for f in plan.valid])
                return plan.failed(unavailable(e))
            matched = deletion.matched
        self._events.publish(events)
        self._refused(refused)
        return plan.results(matched)

    def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY) -> list[StoredAcl]:
        """Every ACL the filter matches (SEMANTICS.md §6, §7), from the authorizer's current snapshot; reads no
        store and takes no lock. The snapshot holds every change this process has made (read-your-writes) and other
        processes' changes up to the last ``poll()``: within ``sync_interval_seconds`` where the server or the
        console polls."""
        return self._authorizer.stored_acls(acl_filter)

    # ------------------------------------------------------------------------------------------- following

    def poll(self) -> bool:
        """Catch up if the store changed since the last look; cheap when it did not (one version read). True if
        anything changed. Reads the store and may wait for its lock: call it from a worker thread, never on an event
        loop.

        :raises StoreError: the store cannot be read.
        """
        if self._store.acl_version() == self._version:
            return False
        result = self.sync()
        return result.full_reload or bool(result.added or result.removed)

    def sync(self) -> SyncResult:
        """Bring the authorizer to the store's current version: by the change log when it reaches back to the
        version we hold, else by a full reload.

        :raises StoreError: the store cannot be read.
        """
        with self._lock:
            delta = self._store.changes_since(self._version) if self._version >= 0 else None
            if delta is None:
                with _gc_paused():
                    snapshot = self._store.load_acls()
                    self._authorizer.replace_acls(snapshot.acls)
                self._version = snapshot.version
                log.info("loaded %d ACLs at version %d", len(snapshot.acls), snapshot.version)
                return SyncResult(snapshot.version, len(snapshot.acls), 0, full_reload=True)
            self._authorizer.apply_changes(delta.added, delta.removed)
            self._version = delta.version
            return SyncResult(delta.version, len(delta.added), len(delta.removed), full_reload=False)

    def _apply(self, delta: AclDelta) -> None:
        """Apply this process's own write; if another process wrote in between, catch up through the log."""
        if delta.base_version == self._version:
            self._authorizer.apply_changes(delta.added, delta.removed)
            self._version = delta.version
        elif delta.version > self._version:
            self.sync()

    # ---------------------------------------------------------------------------------------- export/import

    def export_document(self, *, with_ids: bool = False) -> dict[str, list[dict[str, str]]]:
        """The whole stored ACL set as the JSON document of ``model.acl_json``, in a stable order (diffable).

        :raises StoreError: the store cannot be read.
        """
        acls = sorted(self._store.load_acls().acls, key=_sort_key)
        return acls_to_document(acls if with_ids else [acl.binding for acl in acls])

    def export_json(self, *, with_ids: bool = False) -> str:
        return json.dumps(self.export_document(with_ids=with_ids), indent=2) + "\n"

    def import_document(self, document: object, *, actor: Actor, replace: bool = False) -> ImportResult:
        """Store every binding of the document in one transaction; with ``replace``, also remove every stored ACL
        the document does not contain (a restore). Nothing changes unless every entry is valid.

        :raises AclJsonError: listing every bad entry with its position and reason.
        :raises StoreError: nothing was changed.
        """
        bindings = acls_from_document(document)
        events: list[ManagementEvent] = []

        def history(delta: AclDelta) -> list[ManagementEvent]:
            events[:] = [acl_event("acl.deleted", actor, acl) for acl in delta.removed_acls]
            events.extend(acl_event("acl.created", actor, acl) for acl in delta.added)
            return events

        with self._lock:
            delta = self._store.import_acls(bindings, replace=replace, history=history)
            self._apply(delta)
        distinct = len(set(bindings))
        log.info(
            "imported %d ACLs by %s: %d added, %d removed",
            distinct,
            actor.describe(),
            len(delta.added),
            len(delta.removed),
        )
        if len(events) <= _LOGGED_IMPORT_EVENTS:
            self._events.publish(events)
        else:  # the audit trail gets each; the log says how many
            for event in events:
                self._events(MANAGEMENT, event.subject, event.data())
        return ImportResult(len(delta.added), len(delta.removed), distinct - len(delta.added))

    def import_json(self, text: str | bytes, *, actor: Actor, replace: bool = False) -> ImportResult:
        """As ``import_document``, from JSON text.

        :raises AclJsonError: the text is not JSON, or bad entries (all listed).
        """
        try:
            document: object = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise AclJsonError([AclJsonProblem(-1, f"not valid JSON: {e}")]) from e
        return self.import_document(document, actor=actor, replace=replace)

"""Changing ACLs, apart from deciding with them (Kafka separates ``AclMutator`` from ``Authorizer``).

Kafka's KRaft authorizer only reads: the controller validates ``CreateAcls``/``DeleteAcls``, gives new ACLs their
ids, stores them, and the authorizer learns of them afterwards. Here the same split holds, and the steps every
writer shares are the pure functions of this module, written once:

1. ``plan_creation`` / ``plan_deletion`` validate a request per item (SEMANTICS.md §8, §9): an invalid binding or
   filter fails alone, with Kafka's message, and the valid ones go on;
2. the valid ones are applied by the writer: ``AclService`` stores them first (the store gives the ids, durable)
   and then swaps the authorizer's snapshot; ``StandardAuthorizer.add_acls``/``remove_acls``, the standalone API
   without a store, give the ids with ``assign_ids`` and ``match_filters`` over its own index;
3. ``plan.results(...)`` turns what was applied back into one result per item, in the request's order.

Example: creating ``[a, bad, a]`` plans ``valid == (a, a)``; the writer stores ``a`` once and answers both with the
same id; ``results`` gives ``[ok(a, id), error(bad), ok(a, id)]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kafkaguard.authorizer.index import AclIndex
from kafkaguard.authorizer.results import AclCreateResult, AclDeleteResult
from kafkaguard.model import (
    AclBinding,
    AclBindingFilter,
    AclId,
    ItemError,
    KafkaErrorCode,
    StoredAcl,
    validate_new_binding,
)


@dataclass(frozen=True, slots=True)
class CreationPlan:
    """A CreateAcls request validated: ``errors[i]`` refuses the i-th binding, or is None if it may be created."""

    bindings: tuple[AclBinding, ...]
    errors: tuple[ItemError | None, ...]

    @property
    def valid(self) -> tuple[AclBinding, ...]:
        """The bindings to create, in order (repeats included: each gets its own result)."""
        return tuple(b for b, error in zip(self.bindings, self.errors, strict=True) if error is None)

    def failed(self, error: ItemError) -> list[AclCreateResult]:
        """One result per binding when the valid ones could not be stored: each gets ``error``, except the refused
        ones, which keep their own."""
        return [AclCreateResult(b, error=own or error) for b, own in zip(self.bindings, self.errors, strict=True)]

    def results(self, stored: Sequence[StoredAcl]) -> list[AclCreateResult]:
        """One result per binding, in order; ``stored[j]`` is the stored form of ``valid[j]`` (new or existing)."""
        found = iter(stored)
        return [
            AclCreateResult(binding, error=error)
            if error is not None
            else AclCreateResult(binding, acl_id=next(found).id)
            for binding, error in zip(self.bindings, self.errors, strict=True)
        ]


@dataclass(frozen=True, slots=True)
class DeletionPlan:
    """A DeleteAcls request validated: ``errors[i]`` refuses the i-th filter, or is None if it may match."""

    filters: tuple[AclBindingFilter, ...]
    errors: tuple[ItemError | None, ...]

    @property
    def valid(self) -> tuple[AclBindingFilter, ...]:
        return tuple(f for f, error in zip(self.filters, self.errors, strict=True) if error is None)

    def failed(self, error: ItemError) -> list[AclDeleteResult]:
        """One result per filter when nothing could be removed: ``error``, or the filter's own refusal."""
        return [AclDeleteResult(error=own or error) for own in self.errors]

    def results(self, matched: Sequence[tuple[StoredAcl, ...]]) -> list[AclDeleteResult]:
        """One result per filter, in order; ``matched[j]`` is every ACL ``valid[j]`` matched before the request."""
        found = iter(matched)
        return [
            AclDeleteResult(error=error) if error is not None else AclDeleteResult(removed_acls=next(found))
            for error in self.errors
        ]


def plan_creation(bindings: Iterable[AclBinding]) -> CreationPlan:
    """Validate each binding as a new ACL (``validate_new_binding``: Kafka's checks and kafkaguard's)."""
    given = tuple(bindings)
    reasons = (validate_new_binding(binding) for binding in given)
    return CreationPlan(given, tuple(None if reason is None else _invalid(reason) for reason in reasons))


def plan_deletion(filters: Iterable[AclBindingFilter]) -> DeletionPlan:
    """Refuse each filter with an UNKNOWN code, with Kafka's "Unknown patternFilter." / "Unknown entryFilter."."""
    given = tuple(filters)
    return DeletionPlan(given, tuple(_filter_error(f) for f in given))


def _filter_error(acl_filter: AclBindingFilter) -> ItemError | None:
    if acl_filter.pattern_filter.is_unknown:
        return _invalid("Unknown patternFilter.")
    if acl_filter.entry_filter.is_unknown:
        return _invalid("Unknown entryFilter.")
    return None


def _invalid(reason: str) -> ItemError:
    """Kafka refuses a bad binding or filter per item with INVALID_REQUEST and the reason as its message."""
    return ItemError(KafkaErrorCode.INVALID_REQUEST, reason)


def assign_ids(
    index: AclIndex, bindings: Sequence[AclBinding], id_factory: Callable[[], AclId]
) -> tuple[tuple[StoredAcl, ...], tuple[StoredAcl, ...]]:
    """The stored form of each binding: the id ``index`` holds it under, else a new id from ``id_factory`` (one
    per distinct new binding, in order of first appearance). Returns (one per binding, the new ones)."""
    new: dict[AclBinding, StoredAcl] = {}
    stored: list[StoredAcl] = []
    for binding in bindings:
        existing = index.id_of(binding)
        if existing is not None:
            stored.append(StoredAcl(existing, binding))
            continue
        acl = new.get(binding)
        if acl is None:
            acl = new[binding] = StoredAcl(id_factory(), binding)
        stored.append(acl)
    return tuple(stored), tuple(new.values())


def match_filters(index: AclIndex, filters: Sequence[AclBindingFilter]) -> tuple[tuple[StoredAcl, ...], ...]:
    """Every ACL of ``index`` each filter matches (an ACL matched by several filters is listed under each)."""
    return tuple(tuple(index.find(acl_filter)) for acl_filter in filters)

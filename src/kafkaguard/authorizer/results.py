"""Per-binding and per-filter results of ACL changes, as Kafka's AclCreateResult / AclDeleteResult.

A refused binding or filter carries an ``ItemError`` (Kafka's INVALID_REQUEST with Kafka's message), the one
per-item error of every batch result (``model.item_error``)."""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.model import AclBinding, AclId, ItemError, StoredAcl


@dataclass(frozen=True, slots=True)
class AclCreateResult:
    """``error`` set: the binding was refused (INVALID_REQUEST). Otherwise ``acl_id`` is the id the binding
    is stored under, new or existing (creating an existing ACL succeeds and adds nothing)."""

    binding: AclBinding
    acl_id: AclId | None = None
    error: ItemError | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """The ACLs one filter matched and removed, or the error that kept it from matching anything."""

    removed_acls: tuple[StoredAcl, ...] = ()
    error: ItemError | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return tuple(acl.binding for acl in self.removed_acls)

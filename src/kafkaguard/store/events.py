"""The management events of each kind of stored item: how an ACL, a SCRAM credential, a membership, a quota or a
topic change becomes a ``ManagementEvent`` (spec: issue 27, section 3). Pure functions, beside the store's types they
read, so that the services, the doors (for the changes they refuse) and ``store migrate`` describe a change in the
same words.

A refused item is described as the caller sent it: a refused ACL creation by the binding's fields (``acl_fields_event``:
the names of the codes it carried, UNKNOWN for a code this version does not know, since a refused request is never
validated), a refused ACL deletion by its filter (``acl_filter_event``: ``{"filter": {...}}``, None for "any").

Never a secret in an event: a SCRAM event carries the user, mechanism and iteration count only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from kafkaguard.model import AclBinding, AclBindingFilter, Actor, ItemError, ManagementEvent, StoredAcl
from kafkaguard.model.acl_json import binding_to_dict, filter_to_dict
from kafkaguard.model.management import json_number
from kafkaguard.store.ports import QuotaEntity, TopicRecord


class _ErrorFields(TypedDict, total=False):
    """The keyword arguments a refused item adds to its ``ManagementEvent``; none for a success (the defaults)."""

    result: str
    error_message: str | None


def _error(error: ItemError | None) -> _ErrorFields:
    if error is None:
        return {}
    return {"result": error.code.name, "error_message": error.text}


def acl_event(
    action: str, actor: Actor, acl: StoredAcl | AclBinding, error: ItemError | None = None
) -> ManagementEvent:
    binding, acl_id = (acl.binding, str(acl.id)) if isinstance(acl, StoredAcl) else (acl, None)
    return acl_fields_event(action, actor, {**binding_to_dict(binding), "id": acl_id}, error)


def acl_fields_event(
    action: str, actor: Actor, fields: Mapping[str, str | None], error: ItemError | None = None
) -> ManagementEvent:
    """An ACL event from a binding's fields (``model.acl_json.binding_to_dict``'s keys, and ``id``): a stored or
    refused binding, or one a refused request carried that is no valid binding at all."""
    return ManagementEvent(
        action=action,
        actor=actor,
        subject=_pattern_subject(fields),
        principal=fields.get("principal"),
        resource_type=fields.get("resource_type"),
        resource_name=fields.get("resource_name"),
        details={"acl": {**fields, "id": fields.get("id")}},
        **_error(error),
    )


def acl_filter_event(
    actor: Actor, acl_filter: AclBindingFilter | Mapping[str, str | None], error: ItemError
) -> ManagementEvent:
    """A refused ACL deletion: ``acl.deleted`` with the filter it named (``{"filter": {...}}``, None for any
    name, principal or host) instead of an ACL; its principal and resource columns are the filter's, so a history
    query for ``User:bob`` or ``pii-orders`` finds a refused deletion that named them."""
    fields = filter_to_dict(acl_filter) if isinstance(acl_filter, AclBindingFilter) else dict(acl_filter)
    return ManagementEvent(
        action="acl.deleted",
        actor=actor,
        subject=_pattern_subject(fields),
        principal=fields.get("principal"),
        resource_type=fields.get("resource_type"),
        resource_name=fields.get("resource_name"),
        details={"filter": fields},
        **_error(error),
    )


def _pattern_subject(fields: Mapping[str, str | None]) -> str:
    """``TOPIC:LITERAL:pii-orders``; a filter's any-name is ``<any>`` (``*`` is a name of its own, the wildcard)."""
    name = fields.get("resource_name")
    return f"{fields.get('resource_type')}:{fields.get('pattern_type')}:{'<any>' if name is None else name}"


def scram_event(
    action: str, actor: Actor, user: str, mechanism: str, iterations: int | None, error: ItemError | None = None
) -> ManagementEvent:
    details: dict[str, object] = {"user": user, "mechanism": mechanism}
    if iterations is not None:
        details["iterations"] = iterations
    return ManagementEvent(
        action=action,
        actor=actor,
        subject=f"User:{user}",
        principal=f"User:{user}",
        details=details,
        **_error(error),
    )


def member_event(action: str, actor: Actor, group: str, member: str, error: ItemError | None = None) -> ManagementEvent:
    return ManagementEvent(
        action=action,
        actor=actor,
        subject=f"Group:{group}",
        principal=member,
        details={"group": group, "member": member},
        **_error(error),
    )


def quota_event(
    actor: Actor, entity: QuotaEntity, key: str, value: float | None, error: ItemError | None = None
) -> ManagementEvent:
    return quota_entity_event(actor, entity, {key: value}, error)


def quota_entity_event(
    actor: Actor, entity: QuotaEntity, values: Mapping[str, float | None], error: ItemError | None = None
) -> ManagementEvent:
    """One entity's quotas (None: removed): a change is one event per key (``quota_event``), a refused entity one
    event with every key it asked for."""
    names = {entity_type: name for entity_type, name in entity}
    subject = ",".join(f"{entity_type}={'<default>' if name is None else name}" for entity_type, name in entity)
    user = names.get("user")
    return ManagementEvent(
        action="quota.altered",
        actor=actor,
        subject=subject,
        principal=f"User:{user}" if user else None,
        details={
            "entity": names,
            "quota": {key: None if value is None else json_number(value) for key, value in values.items()},
        },
        **_error(error),
    )


def topic_event(
    action: str,
    actor: Actor,
    name: str,
    record: TopicRecord | None,
    error: ItemError | None = None,
    *,
    topic_id: str | None = None,
) -> ManagementEvent:
    """A topic created or deleted (``record``), or refused; ``topic_id``: the id a refused deletion named."""
    details: dict[str, object] = {"topic": name}
    if topic_id is not None:
        details["topic_id"] = topic_id
    if record is not None:
        details["topic_id"] = str(record.topic_id)
        details["partitions"] = record.num_partitions
    return ManagementEvent(
        action=action,
        actor=actor,
        subject=f"TOPIC:{name}",
        resource_type="TOPIC",
        resource_name=name,
        details=details,
        **_error(error),
    )

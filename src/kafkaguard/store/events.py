"""The management events of each kind of stored item: how an ACL, a SCRAM credential, a membership, a quota or a
topic change becomes a ``ManagementEvent`` (spec: issue 27, section 3). Pure functions, beside the store's types they
read, so that the services and ``store migrate`` describe a change in the same words.

Never a secret in an event: a SCRAM event carries the user, mechanism and iteration count only.
"""

from __future__ import annotations

from kafkaguard.model import AclBinding, Actor, ItemError, ManagementEvent, StoredAcl
from kafkaguard.model.acl_json import binding_to_dict
from kafkaguard.model.management import json_number
from kafkaguard.store.ports import QuotaEntity, TopicRecord


def _error(error: ItemError | None) -> dict[str, str | None]:
    if error is None:
        return {}
    return {"result": error.code.name, "error_message": error.text}


def acl_event(
    action: str, actor: Actor, acl: StoredAcl | AclBinding, error: ItemError | None = None
) -> ManagementEvent:
    binding, acl_id = (acl.binding, str(acl.id)) if isinstance(acl, StoredAcl) else (acl, None)
    pattern = binding.pattern
    return ManagementEvent(
        action=action,
        actor=actor,
        subject=f"{pattern.resource_type.name}:{pattern.pattern_type.name}:{pattern.name}",
        principal=binding.entry.principal,
        resource_type=pattern.resource_type.name,
        resource_name=pattern.name,
        details={"acl": {**binding_to_dict(binding), "id": acl_id}},
        **_error(error),  # type: ignore[arg-type]
    )


def scram_event(
    action: str, actor: Actor, user: str, mechanism: str, iterations: int | None, error: ItemError | None = None
) -> ManagementEvent:
    details: dict[str, object] = {"user": user, "mechanism": mechanism}
    if iterations is not None:
        details["iterations"] = iterations
    return ManagementEvent(
        action=action, actor=actor, subject=f"User:{user}", principal=f"User:{user}", details=details,
        **_error(error),  # type: ignore[arg-type]
    )  # fmt: skip


def member_event(action: str, actor: Actor, group: str, member: str) -> ManagementEvent:
    return ManagementEvent(
        action=action, actor=actor, subject=f"Group:{group}", principal=member,
        details={"group": group, "member": member},
    )  # fmt: skip


def quota_event(
    actor: Actor, entity: QuotaEntity, key: str, value: float | None, error: ItemError | None = None
) -> ManagementEvent:
    names = {entity_type: name for entity_type, name in entity}
    subject = ",".join(f"{entity_type}={'<default>' if name is None else name}" for entity_type, name in entity)
    user = names.get("user")
    return ManagementEvent(
        action="quota.altered",
        actor=actor,
        subject=subject,
        principal=f"User:{user}" if user else None,
        details={"entity": names, "quota": {key: None if value is None else json_number(value)}},
        **_error(error),  # type: ignore[arg-type]
    )


def topic_event(
    action: str, actor: Actor, name: str, record: TopicRecord | None, error: ItemError | None = None
) -> ManagementEvent:
    details: dict[str, object] = {"topic": name}
    if record is not None:
        details["topic_id"] = str(record.topic_id)
        details["partitions"] = record.num_partitions
    return ManagementEvent(
        action=action, actor=actor, subject=f"TOPIC:{name}", resource_type="TOPIC", resource_name=name,
        details=details, **_error(error),  # type: ignore[arg-type]
    )  # fmt: skip

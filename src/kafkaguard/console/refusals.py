"""What the console's 403 on a change records: one management event per item the refused request named.

A change route declares its ``RefusedChange`` in its dependency (``require(api, refused=...)``); when the caller is
authenticated but not authorized, the dependency gives it the request as sent — its JSON body (FastAPI has parsed it
already, before any dependency runs), path and query parameters — and records the items it names through
``service.refused`` (bounded per request and per principal) before answering 403. The request was refused before its
body was validated (a caller who may not change anything learns nothing from a 422), so an item is described as it
was sent: as the route's schema reads it when it can (``pattern_type`` LITERAL and ``host`` ``*`` filled in), else
field by field as given, every text cut by ``service.refused``. Never a secret: a refused password change records the
user, mechanism and iterations, never the password.

Worked example: bob (no ALTER on the cluster) sends ``POST /api/acls`` with two bindings; the console answers 403
``not authorized`` and the history gains two ``acl.created`` events, actor ``User:bob`` from his address via ``rest``
(a fresh request id), result CLUSTER_AUTHORIZATION_FAILED, ``Request CreateAcls is not authorized.``
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kafkaguard.bootstrap import Services
from kafkaguard.console.schemas import AclBindingIn, AclFilterIn
from kafkaguard.errors import KafkaguardError
from kafkaguard.model import Actor, ItemError, ManagementEvent
from kafkaguard.model.acl_json import FIELDS, binding_to_dict, filter_to_dict
from kafkaguard.model.group import group_name
from kafkaguard.scram import DEFAULT_ITERATIONS
from kafkaguard.service.events import acl_fields_event, acl_filter_event, member_event, scram_event

#: A refused deletion of every mechanism of a user, or of every member of a group: the item it named.
EVERY = "<every>"
#: A refused request whose body named no readable item (not JSON, not the route's shape): the item it records.
UNREADABLE = "<unreadable>"


@dataclass(frozen=True, slots=True)
class RefusedRequest:
    """A change request the console refused (403), as sent: ``body`` is its JSON (None without one, or when it is
    not JSON), ``path`` and ``query`` its parameters; ``actor`` and ``error`` go into every event."""

    body: object
    path: Mapping[str, str]
    query: Mapping[str, str]
    actor: Actor
    error: ItemError
    services: Services


#: A refused request's items and how one of them becomes its event (``service.refused`` makes the admitted ones).
RefusedItems = tuple[Sequence[Any], Callable[[Any], ManagementEvent]]


@dataclass(frozen=True, slots=True)
class RefusedChange:
    """How a change route's refusal is recorded: ``describe`` names its items; ``reads_body`` says whether it
    needs the request's JSON body."""

    describe: Callable[[RefusedRequest], RefusedItems]
    reads_body: bool = False


def _text(value: object) -> str | None:
    """A field as sent: a string as it is, anything else as its JSON (a number, a list …), None for null."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # pragma: no cover - a parsed JSON body always dumps
        return repr(value)


def _raw(item: object) -> dict[str, str | None]:
    fields = item if isinstance(item, Mapping) else {}
    return {field: _text(fields.get(field)) for field in FIELDS}


def binding_fields(item: object) -> dict[str, str | None]:
    """A binding of ``POST /api/acls`` as the schema reads it (defaults filled in), else as sent."""
    try:
        return dict(binding_to_dict(AclBindingIn.model_validate(item).to_binding()))
    except (ValidationError, KafkaguardError):
        return _raw(item)


def filter_fields(item: object) -> dict[str, str | None]:
    """The filter of ``DELETE /api/acls`` as the schema reads it (no body: match every ACL), else as sent."""
    try:
        return filter_to_dict(AclFilterIn.model_validate(item if item is not None else {}).to_filter())
    except (ValidationError, KafkaguardError):
        return _raw(item)


def _group(name: str) -> str:
    try:
        return group_name(name)
    except KafkaguardError:
        return name


def _acl_creations(refused: RefusedRequest) -> RefusedItems:
    body = refused.body
    items = body if isinstance(body, list) else [body]
    return items, lambda item: acl_fields_event("acl.created", refused.actor, binding_fields(item), refused.error)


def _acl_deletion(refused: RefusedRequest) -> RefusedItems:
    return [refused.body], lambda item: acl_filter_event(refused.actor, filter_fields(item), refused.error)


def _password(refused: RefusedRequest) -> RefusedItems:
    body = refused.body if isinstance(refused.body, Mapping) else {}
    mechanism = body.get("mechanism", "SCRAM-SHA-256")
    iterations = body.get("iterations", DEFAULT_ITERATIONS)
    item = (
        _text(mechanism) or UNREADABLE,
        iterations if isinstance(iterations, int) and not isinstance(iterations, bool) else None,
    )
    user = refused.path.get("name", "")
    return [item], lambda i: scram_event("scram.upserted", refused.actor, user, i[0], i[1], refused.error)


def _user_deletion(refused: RefusedRequest) -> RefusedItems:
    user = refused.path.get("name", "")
    mechanism = refused.query.get("mechanism") or EVERY
    return [mechanism], lambda m: scram_event("scram.deleted", refused.actor, user, m, None, refused.error)


def _member_additions(refused: RefusedRequest) -> RefusedItems:
    body = refused.body if isinstance(refused.body, Mapping) else {}
    members = body.get("members")
    items: Sequence[object] = members if isinstance(members, list) and members else [UNREADABLE]
    group = _group(refused.path.get("name", ""))
    return items, lambda m: member_event(
        "group.member_added", refused.actor, group, _text(m) or UNREADABLE, refused.error
    )


def _member_removal(refused: RefusedRequest) -> RefusedItems:
    group = _group(refused.path.get("name", ""))
    member = refused.path.get("principal", "")
    return [member], lambda m: member_event("group.member_removed", refused.actor, group, m, refused.error)


def _group_deletion(refused: RefusedRequest) -> RefusedItems:
    group = _group(refused.path.get("name", ""))
    members = refused.services.groups.groups().get(group) or (EVERY,)  # the in-memory snapshot: no store read
    return members, lambda m: member_event("group.member_removed", refused.actor, group, m, refused.error)


ACL_CREATIONS = RefusedChange(_acl_creations, reads_body=True)
ACL_DELETION = RefusedChange(_acl_deletion, reads_body=True)
PASSWORD = RefusedChange(_password, reads_body=True)
USER_DELETION = RefusedChange(_user_deletion)
MEMBER_ADDITIONS = RefusedChange(_member_additions, reads_body=True)
MEMBER_REMOVAL = RefusedChange(_member_removal)
GROUP_DELETION = RefusedChange(_group_deletion)

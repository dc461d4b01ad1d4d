"""ACL sets for the pipeline: the store's JSON export (``kafkaguard.model.acl_json``) plus authorizer settings.

The document may also carry the principal groups its ``Group:`` ACLs refer to, as ``kafkaguard groups list --json``
prints them: ``{"acls": [...], "groups": {"Group:ops": ["User:alice", ...]}}``. Without them a ``Group:`` ACL
matches no logged principal (and ``usage`` would report it unused).

``acls_from_document`` ignores ids on input (an import gets new ids), but ``usage`` must name ACLs by the ids
the operator knows, so ids are taken from each entry's ``id`` when present; entries without one get a stable
id derived from their content (``h-`` and 12 hex digits), so reruns name them the same.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkaguard.authorizer import StandardAuthorizer, parse_super_users
from kafkaguard.errors import InvalidConfigError, InvalidGroupError
from kafkaguard.model import AclId, StoredAcl
from kafkaguard.model.acl_json import AclJsonError, acls_from_document, acls_to_document, binding_to_dict
from kafkaguard.model.group import group_name, groups_by_member, member_error, members_by_group
from kafkaguard.pipeline.errors import PipelineError


@dataclass(frozen=True, slots=True)
class AclSet:
    """The ACLs and settings one authorizer is built from; ``name`` labels it in reports."""

    name: str
    acls: tuple[StoredAcl, ...]
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    #: member principal → its group principals (``Group:ops``), as the authorizer's snapshot keeps them
    memberships: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def authorizer(self) -> StandardAuthorizer:
        return StandardAuthorizer(
            self.super_users, self.allow_everyone_if_no_acl_found, acls=self.acls, memberships=self.memberships
        )

    def groups(self) -> dict[str, list[str]]:
        """The memberships as the document's ``groups``: group principal → its members, sorted."""
        return members_by_group(self.memberships)

    def to_payload(self) -> str:
        """A compact JSON string to broadcast to the workers."""
        return json.dumps(
            {
                "name": self.name,
                "super_users": sorted(self.super_users),
                "allow_everyone_if_no_acl_found": self.allow_everyone_if_no_acl_found,
                "groups": self.groups(),
                **acls_to_document(self.acls),
            }
        )

    @classmethod
    def from_payload(cls, payload: str) -> AclSet:
        data = json.loads(payload)
        return cls(
            data["name"],
            tuple(_stored(data["acls"])),
            frozenset(data["super_users"]),
            bool(data["allow_everyone_if_no_acl_found"]),
            _memberships(data["groups"], "payload"),
        )


def content_id(row: dict[str, str]) -> AclId:
    text = json.dumps({k: v for k, v in row.items() if k != "id"}, sort_keys=True)
    return AclId("h-" + hashlib.sha256(text.encode()).hexdigest()[:12])


def _stored(rows: list[Any]) -> Iterable[StoredAcl]:
    bindings = acls_from_document({"acls": rows})
    for row, binding in zip(rows, bindings, strict=True):
        given = row.get("id")
        yield StoredAcl(
            AclId(given) if isinstance(given, str) and given else content_id(binding_to_dict(binding)), binding
        )


def acl_set_from_text(
    text: str,
    source: str,
    name: str,
    super_users: str | Iterable[str] = (),
    allow_everyone_if_no_acl_found: bool = False,
) -> AclSet:
    """Parse an ACL JSON document.

    :raises PipelineError: not JSON, not an ACL document, an invalid entry (all are listed) or bad super users.
    """
    try:
        document = json.loads(text)
    except ValueError as e:
        raise PipelineError(f"{source}: not valid JSON ({e})") from e
    invalid = f"{source}: not a valid kafkaguard ACL document"
    if not isinstance(document, dict) or not isinstance(document.get("acls"), list):
        raise PipelineError(f'{invalid}: expected a JSON object {{"acls": [ ... ]}}')
    try:
        acls = tuple(_stored(document["acls"]))
    except AclJsonError as e:
        raise PipelineError(f"{invalid}: {e}") from e
    except (KeyError, TypeError) as e:
        raise PipelineError(f'{invalid}: expected a JSON object {{"acls": [ ... ]}}') from e
    try:
        users = parse_super_users(super_users)
    except InvalidConfigError as e:
        raise PipelineError(str(e)) from e
    return AclSet(name, acls, users, allow_everyone_if_no_acl_found, _memberships(document.get("groups", {}), source))


def _memberships(groups: object, source: str) -> dict[str, tuple[str, ...]]:
    """A document's ``groups`` (``{"Group:ops": ["User:alice"]}``, the group also as ``ops``) as memberships.

    :raises PipelineError: not such an object, or a group name or member ``kafkaguard groups add`` would refuse
        (every problem listed).
    """
    expected = f'{source}: "groups" must be an object of group to member principals, e.g. {{"Group:ops": ["User:a"]}}'
    if not isinstance(groups, dict):
        raise PipelineError(expected)
    members_of: dict[str, list[str]] = {}
    problems: list[str] = []
    for group, members in groups.items():
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            problems.append(f"{group}: expected a list of principals")
            continue
        try:
            principal = "Group:" + group_name(str(group))
        except InvalidGroupError as e:
            problems.append(f"{group}: {e}")
            continue
        for member in members:
            reason = member_error(member)
            if reason is not None:
                problems.append(f"{group}: {member!r}: {reason}")
            else:
                members_of.setdefault(principal, []).append(member)
    if problems:
        raise PipelineError(f"{source}: invalid groups: " + "; ".join(problems))
    return groups_by_member(members_of)

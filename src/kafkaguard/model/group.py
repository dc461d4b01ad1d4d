"""Principal groups' rules (kafkaguard's, beyond Kafka), in one place for everything that reads or writes them:
the service that stores them, the authorizer's snapshot, the console, the CLI and the audit pipeline.

A group name is 1 to 255 characters without control characters, whitespace at either end, ``*`` alone or ``:``;
a member is a valid principal (``Type:Name``) that is neither the wildcard ``User:*`` (an ACL for ``User:*``
already applies to everyone) nor a group (groups do not nest, so a decision never walks a graph). Memberships are
kept member → its group principals, sorted and deduplicated (``groups_by_member``), the way a decision reads them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from kafkaguard.errors import InvalidGroupError
from kafkaguard.model.principal import GROUP_TYPE, WILDCARD_PRINCIPAL, is_group, principal_error

#: The longest group name accepted (a principal name is a short identifier; this bounds what a client can store).
MAX_GROUP_NAME = 255


def group_name_error(name: str) -> str | None:
    """Why ``name`` cannot name a group, or None when it can. ``Group:ops`` is accepted and read as ``ops``."""
    if not name:
        return "a group name must not be empty"
    if len(name) > MAX_GROUP_NAME:
        return f"a group name has at most {MAX_GROUP_NAME} characters; this one has {len(name)}"
    if name == "*":
        return "'*' is not a group; to grant something to every principal, write the ACL for User:*"
    if ":" in name:
        return f"a group name must not contain ':' (got {name!r}); write the name alone, e.g. ops for Group:ops"
    if name != name.strip():
        return f"a group name must not start or end with whitespace (got {name!r})"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return f"a group name must not contain control characters (got {name!r})"
    return None


def member_error(principal: str) -> str | None:
    """Why ``principal`` cannot be a group member, or None when it can."""
    reason = principal_error(principal)
    if reason is not None:
        return reason
    if principal == WILDCARD_PRINCIPAL:
        return "User:* cannot be a group member: an ACL for User:* already applies to every principal"
    if is_group(principal):
        return f"{principal} is a group, and groups do not nest: add its members instead"
    return None


def group_name(text: str) -> str:
    """The stored name of a group given as ``ops`` or ``Group:ops``.

    :raises InvalidGroupError: it cannot name a group.
    """
    name = text[len(GROUP_TYPE) + 1 :] if is_group(text) else text
    reason = group_name_error(name)
    if reason is not None:
        raise InvalidGroupError(reason)
    return name


def freeze_memberships(memberships: Mapping[str, Iterable[str]]) -> Mapping[str, tuple[str, ...]]:
    """Memberships as the snapshot keeps them: a new dict, each principal's groups sorted and deduplicated, the
    principals in no group left out."""
    frozen = {user: tuple(sorted(set(groups))) for user, groups in memberships.items()}
    return {user: groups for user, groups in frozen.items() if groups}


def groups_by_member(members_of: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """Group principal → its members, turned the way the snapshot keeps them: member → its group principals,
    sorted and deduplicated."""
    found: dict[str, set[str]] = {}
    for group, members in members_of.items():
        for member in members:
            found.setdefault(member, set()).add(group)
    return {member: tuple(sorted(groups)) for member, groups in found.items()}


def members_by_group(memberships: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """The reverse of ``groups_by_member``: member → its groups turned into group principal → its members, both
    sorted."""
    found: dict[str, set[str]] = {}
    for member, groups in memberships.items():
        for group in groups:
            found.setdefault(group, set()).add(member)
    return {group: sorted(members) for group, members in sorted(found.items())}

"""GroupService: validated memberships, stored durably, pushed into the authorizer, followed by other processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    InvalidGroupError,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from kafkaguard.service import AclService, GroupService
from kafkaguard.store import MemoryGroupStore, SqliteStore
from tests.actors import ACTOR

READ_ORDERS = Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, "orders"))
OPS_MAY_READ = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders"),
    AccessControlEntry("Group:ops", "*", AclOperation.READ, AclPermissionType.ALLOW),
)


def allowed(authorizer: StandardAuthorizer, principal: str) -> bool:
    [result] = authorizer.authorize(RequestContext(principal, "10.0.0.1"), [READ_ORDERS])
    return result is AuthorizationResult.ALLOWED


def test_members_added_and_removed_change_decisions_and_the_store():
    store, authorizer = MemoryGroupStore(), StandardAuthorizer(acls=())
    authorizer.add_acls([OPS_MAY_READ])
    groups = GroupService(store, authorizer)
    groups.add_members("ops", ["User:alice", "User:bob"], actor=ACTOR)
    assert allowed(authorizer, "User:alice") and allowed(authorizer, "User:bob")
    assert dict(groups.groups()) == {"ops": ("User:alice", "User:bob")}
    groups.remove_members("Group:ops", ["User:bob", "User:nobody"], actor=ACTOR)  # Group:ops names the same group
    assert not allowed(authorizer, "User:bob") and allowed(authorizer, "User:alice")
    assert groups.delete_group("ops", actor=ACTOR) == ("User:alice",)
    assert not allowed(authorizer, "User:alice") and store.load_memberships().groups == {}


@pytest.mark.parametrize(
    ("group", "member", "says"),
    [
        ("", "User:alice", "must not be empty"),
        ("*", "User:alice", "'*' is not a group"),
        ("a:b", "User:alice", "must not contain ':'"),
        (" ops", "User:alice", "whitespace"),
        ("o\nps", "User:alice", "control characters"),
        ("x" * 256, "User:alice", "at most 255"),
        ("ops", "alice", "expected Type:Name"),
        ("ops", "User:*", "already applies to every principal"),
        ("ops", "Group:admins", "groups do not nest"),
    ],
)
def test_bad_names_and_members_are_refused_and_nothing_is_stored(group, member, says):
    store = MemoryGroupStore()
    groups = GroupService(store, StandardAuthorizer())
    with pytest.raises(InvalidGroupError, match=says):
        groups.add_members(group, ["User:carol", member], actor=ACTOR)
    assert store.membership_version() == 0


def test_an_empty_member_list_is_refused():
    with pytest.raises(InvalidGroupError, match="at least one principal"):
        GroupService(MemoryGroupStore(), StandardAuthorizer()).add_members("ops", [], actor=ACTOR)


def test_another_process_sees_a_membership_change_on_its_next_poll(tmp_path: Path):
    with (
        SqliteStore(tmp_path / "kafkaguard.db") as writer_store,
        SqliteStore(tmp_path / "kafkaguard.db") as reader_store,
    ):
        writer = GroupService(writer_store, StandardAuthorizer())
        reader_authorizer = StandardAuthorizer(ready=False)
        reader = GroupService(reader_store, reader_authorizer)
        AclService(reader_store, reader_authorizer).create_acls([OPS_MAY_READ], actor=ACTOR)
        assert not allowed(reader_authorizer, "User:alice")
        writer.add_members("ops", ["User:alice"], actor=ACTOR)
        assert reader.poll() is True and reader.poll() is False
        assert allowed(reader_authorizer, "User:alice")
        writer.remove_members("ops", ["User:alice"], actor=ACTOR)
        assert reader.poll() and not allowed(reader_authorizer, "User:alice")

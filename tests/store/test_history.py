"""The management history's contract (``HistoryStore`` and the ``history`` argument of every write), on every
implementation: events are written with their change or not at all, read back newest first with the filters, and
unlike the ACL change log never trimmed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kafkaguard.model import Actor, HistoryQuery, ManagementEvent
from kafkaguard.store import AclCreation, AclStore, History, StoreError
from kafkaguard.store.events import acl_event, member_event
from kafkaguard.store.ports import GroupStore, MembershipChange, MembershipWrite
from tests.store.conftest import open_durable
from tests.store.helpers import acl, acl_filter

ALICE = Actor(principal="User:alice", address="10.0.0.7", interface="kafka:SASL_PLAINTEXT", request_id="adm/7")
CAROL = Actor(principal="User:carol", address=None, interface="cli", request_id=None)


def created(actor: Actor) -> History[AclCreation]:
    return lambda creation: [acl_event("acl.created", actor, stored) for stored in creation.acls]


def test_events_are_stored_with_the_change_and_read_back_newest_first(acl_store: AclStore) -> None:
    creation = acl_store.create_acls([acl("pii-orders", "User:bob")], history=created(ALICE))
    deletion = acl_store.delete_acls(
        [acl_filter("pii-orders")],
        history=lambda d: [acl_event("acl.deleted", CAROL, a) for group in d.matched for a in group],
    )
    events = acl_store.read_history(HistoryQuery())
    assert [e.action for e in events] == ["acl.deleted", "acl.created"]
    newest, oldest = events
    assert newest.seq is not None and oldest.seq is not None and newest.seq > oldest.seq
    assert oldest.actor == ALICE and newest.actor == CAROL
    assert oldest.principal == "User:bob" and oldest.resource_type == "TOPIC" and oldest.resource_name == "pii-orders"
    assert oldest.subject == "TOPIC:LITERAL:pii-orders" and oldest.result == "SUCCESS"
    assert oldest.details["acl"] == {
        "resource_type": "TOPIC", "resource_name": "pii-orders", "pattern_type": "LITERAL", "principal": "User:bob",
        "host": "*", "operation": "READ", "permission_type": "ALLOW", "id": str(creation.acls[0].id),
    }  # fmt: skip
    # The deletion names what it removed, with the id it had.
    assert newest.details["acl"]["id"] == str(deletion.matched[0][0].id)  # type: ignore[index]
    assert oldest.data()["actor"] == ALICE.as_dict() and oldest.data()["version"] == 1


def test_history_filters_by_principal_resource_action_since_and_limit(acl_store: AclStore) -> None:
    acl_store.create_acls([acl("pii-orders", "User:bob"), acl("payments", "User:dave")], history=created(ALICE))
    acl_store.create_acls([acl("pii-orders", "User:erin")], history=created(CAROL))
    acl_store.delete_acls(
        [acl_filter("payments")],
        history=lambda d: [acl_event("acl.deleted", CAROL, a) for group in d.matched for a in group],
    )

    def principals(**query: Any) -> list[str | None]:
        return [e.principal for e in acl_store.read_history(HistoryQuery(**query))]

    assert principals(principal="User:bob") == ["User:bob"]
    # The actor counts as a principal too: everything carol did.
    assert principals(principal="User:carol") == ["User:dave", "User:erin"]
    assert principals(resource_type="TOPIC", resource_name="pii-orders") == ["User:erin", "User:bob"]
    assert principals(resource_type="GROUP") == []
    assert principals(action="acl.deleted") == ["User:dave"]
    assert principals(action="acl.") == ["User:dave", "User:erin", "User:dave", "User:bob"]
    assert principals(action="acl_") == []  # a LIKE wildcard in the prefix is a literal character
    assert principals(limit=2) == ["User:dave", "User:erin"]
    assert principals(since=datetime.now(UTC) + timedelta(minutes=1)) == []
    assert len(principals(since=datetime.now(UTC) - timedelta(minutes=1))) == 4


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])  # the in-memory twin has no rollback (store.memory)
def test_a_failed_write_stores_no_event(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    acl_store = open_durable(kind, request, tmp_path)
    request.addfinalizer(acl_store.close)

    def refuse(_creation: AclCreation) -> list[ManagementEvent]:
        raise StoreError("the event cannot be made")

    with pytest.raises(StoreError):
        acl_store.create_acls([acl("orders")], history=refuse)
    assert acl_store.read_history(HistoryQuery()) == []
    # The change and its events are one transaction: the ACL is not stored either.
    assert acl_store.load_acls().acls == ()


def test_refused_items_are_recorded_on_their_own(acl_store: AclStore) -> None:
    refused = dataclasses.replace(
        acl_event("acl.created", ALICE, acl("orders", "bob")), result="INVALID_REQUEST", error_message="no Type:Name"
    )
    acl_store.record_events([refused])
    [event] = acl_store.read_history(HistoryQuery())
    assert (event.result, event.error_message, event.succeeded) == ("INVALID_REQUEST", "no Type:Name", False)
    assert acl_store.load_acls().acls == ()


def test_the_history_is_not_trimmed_with_the_change_log(acl_store: AclStore) -> None:
    for n in range(30):
        acl_store.create_acls([acl(f"t{n}")], history=created(ALICE))
    assert len(acl_store.read_history(HistoryQuery(limit=1000))) == 30


def test_membership_events_are_written_with_the_memberships(group_store: GroupStore) -> None:
    changes = [MembershipChange("ops", "User:bob", member=True)]

    def history(_write: MembershipWrite) -> list[ManagementEvent]:
        return [member_event("group.member_added", CAROL, "ops", "User:bob")]

    group_store.alter_memberships(changes, history=history)
    [event] = group_store.read_history(HistoryQuery(principal="User:bob"))
    assert (event.action, event.subject, dict(event.details)) == (
        "group.member_added", "Group:ops", {"group": "ops", "member": "User:bob"},
    )  # fmt: skip

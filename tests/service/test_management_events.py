"""The services turn every item of a change into a management event: stored with the change, refused items stored
on their own, each passed to the process's listener (``Services.events``) and logged with who and from where."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.model import Actor, HistoryQuery
from kafkaguard.scram import ScramMechanism
from kafkaguard.service import AclService, CredentialService, GroupService, QuotaService, TopicService
from kafkaguard.service.events import MANAGEMENT, EventRelay
from kafkaguard.service.quotas import QuotaAlteration, QuotaOp
from kafkaguard.service.topics import NewTopic
from kafkaguard.store import (
    MemoryAclStore,
    MemoryCredentialStore,
    MemoryGroupStore,
    MemoryHistory,
    MemoryQuotaStore,
    MemoryTopicStore,
)
from tests.store.helpers import acl, acl_filter

ALICE = Actor(principal="User:alice", address="10.0.0.7", interface="kafka:SASL_SSL", request_id="adm/12")


class Listener:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Mapping[str, object]]] = []

    def __call__(self, category: str, subject: str, data: Mapping[str, object]) -> None:
        self.seen.append((category, subject, data))


def test_acl_changes_are_events_in_the_store_the_listener_and_the_log(caplog: pytest.LogCaptureFixture) -> None:
    listener = Listener()
    store = MemoryAclStore()
    service = AclService(store, StandardAuthorizer(), events=EventRelay(listener))
    with caplog.at_level(logging.INFO, logger="kafkaguard.service.events"):
        results = service.create_acls([acl("pii-orders", "User:bob"), acl("pii-orders", "bob")], actor=ALICE)
        service.delete_acls([acl_filter("pii-orders")], actor=ALICE)
    assert [r.succeeded for r in results] == [True, False]
    stored = store.read_history(HistoryQuery())
    assert [(e.action, e.result) for e in stored] == [
        ("acl.deleted", "SUCCESS"), ("acl.created", "INVALID_REQUEST"), ("acl.created", "SUCCESS"),
    ]  # fmt: skip
    assert stored[0].details["acl"]["id"] == results[0].acl_id  # type: ignore[index]
    assert [(category, subject) for category, subject, _ in listener.seen] == [
        (MANAGEMENT, "TOPIC:LITERAL:pii-orders"),
    ] * 3
    assert [data["result"] for _, _, data in listener.seen] == ["SUCCESS", "INVALID_REQUEST", "SUCCESS"]
    assert listener.seen[0][2] == stored[2].data()
    assert (
        "acl.created ALLOW User:bob READ from * on TOPIC:LITERAL:pii-orders by User:alice from 10.0.0.7 via "
        "kafka:SASL_SSL (adm/12)" in caplog.messages
    )
    assert any(m.startswith("acl.created ALLOW bob READ") and "REFUSED INVALID_REQUEST" in m for m in caplog.messages)


def test_a_failing_listener_does_not_fail_the_committed_change(caplog: pytest.LogCaptureFixture) -> None:
    def broken(category: str, subject: str, data: Mapping[str, object]) -> None:
        raise RuntimeError("the trail is full")

    store = MemoryAclStore()
    service = AclService(store, StandardAuthorizer(), events=EventRelay(broken))
    [result] = service.create_acls([acl("orders")], actor=ALICE)
    assert result.succeeded and len(store.load_acls().acls) == 1
    assert any("refused a management event" in m for m in caplog.messages)


def test_every_service_writes_its_events_with_the_actor() -> None:
    history = MemoryHistory()
    credentials = CredentialService(MemoryCredentialStore(history=history))
    groups = GroupService(MemoryGroupStore(history=history), StandardAuthorizer())
    quotas = QuotaService(MemoryQuotaStore(history=history))
    topics = TopicService(MemoryTopicStore(history=history))

    assert credentials.upsert_password("bob", ScramMechanism.SCRAM_SHA_256, "pw", 4096, actor=ALICE).succeeded
    groups.add_members("ops", ["User:bob"], actor=ALICE)
    groups.remove_members("ops", ["User:bob"], actor=ALICE)
    [quota] = quotas.alter(
        [QuotaAlteration(entity=(("user", "bob"),), ops=(QuotaOp(key="producer_byte_rate", value=1024.0),))],
        actor=ALICE,
    )
    assert quota.succeeded
    assert topics.create_topics([NewTopic(name="pii-orders")], actor=ALICE)[0].succeeded
    assert not topics.create_topics([NewTopic(name="pii-orders")], actor=ALICE)[0].succeeded
    [deleted] = topics.delete_topics(["pii-orders"], actor=ALICE)
    assert deleted.succeeded
    assert not topics.delete_topics(["never-was"], actor=ALICE)[0].succeeded

    events = list(reversed(history.read(HistoryQuery(limit=100))))
    assert [(e.action, e.result) for e in events] == [
        ("scram.upserted", "SUCCESS"),
        ("group.member_added", "SUCCESS"),
        ("group.member_removed", "SUCCESS"),
        ("quota.altered", "SUCCESS"),
        ("topic.created", "SUCCESS"),
        ("topic.created", "TOPIC_ALREADY_EXISTS"),
        ("topic.deleted", "SUCCESS"),
        ("topic.deleted", "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    assert all(e.actor == ALICE for e in events)
    assert dict(events[0].details) == {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 4096}
    assert dict(events[3].details) == {"entity": {"user": "bob"}, "quota": {"producer_byte_rate": 1024.0}}
    assert events[4].details["partitions"] == 1 and events[6].details["topic_id"] == events[4].details["topic_id"]
    assert (events[1].principal, events[1].subject) == ("User:bob", "Group:ops")

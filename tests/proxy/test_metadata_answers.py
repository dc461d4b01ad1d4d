"""The proxy passes on only the Metadata topics a client asked for and may describe, whatever the upstream answers:
a topic the upstream names unasked is dropped, and one it leaves out is simply not answered (before, the handler
raised KeyError on it and closed the connection). An upstream answer the proxy cannot read closes the client's
connection, but the client is not to blame: nothing is charged to it (neither its principal nor its address is
refused, ``protocol_violation_penalty_seconds``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.actors import ACTOR
from tests.proxy.fake_kafka import FakeKafka, fake_kafka, start_proxy
from tests.serving import ServerHandle
from tests.wire import Wire, encode_request, metadata

PASSWORD = "answers-pw"  # noqa: S105 - a test password


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[FakeKafka, ServerHandle]]:
    broker = FakeKafka(existing={"feed-a", "feed-b", "secret"}, unasked_topics={"secret"})
    with fake_kafka(broker):
        proxy = start_proxy(tmp_path / "data", broker.address, audit_log=None)
        try:
            proxy.add_user("reader", PASSWORD)
            pattern = ResourcePattern(ResourceType.TOPIC, "feed-", PatternType.PREFIXED)
            binding = AclBinding(pattern, AccessControlEntry("User:reader", "*", AclOperation.DESCRIBE,
                                                             AclPermissionType.ALLOW))  # fmt: skip
            assert all(result.succeeded for result in proxy.services.acls.create_acls([binding], actor=ACTOR))
            yield broker, proxy
        finally:
            proxy.stop()


def test_a_topic_the_upstream_names_unasked_is_not_passed_on(proxied: tuple[FakeKafka, ServerHandle]):
    _broker, proxy = proxied
    with Wire(proxy.sasl) as wire:
        wire.login("reader", PASSWORD)
        answered = {topic.name: topic.error_code.value for topic in metadata(wire, ["feed-a"]).topics}
    assert answered == {"feed-a": 0}


def test_a_topic_the_upstream_leaves_out_is_not_answered_and_the_connection_stays(
    proxied: tuple[FakeKafka, ServerHandle],
):
    broker, proxy = proxied
    broker.omitted_topics = {"feed-b"}
    with Wire(proxy.sasl) as wire:
        wire.login("reader", PASSWORD)
        answered = {topic.name: topic.error_code.value for topic in metadata(wire, ["feed-a", "feed-b"]).topics}
        assert answered == {"feed-a": 0}
        assert {topic.name for topic in metadata(wire, ["feed-a"]).topics} == {"feed-a"}  # still served
    assert proxy.errors == []


def test_an_unreadable_upstream_answer_closes_the_connection_without_penalizing_the_client(tmp_path: Path):
    broker = FakeKafka(existing={"feed-a"})
    with fake_kafka(broker):
        proxy = start_proxy(tmp_path / "data", broker.address, audit_log=None, protocol_violation_penalty_seconds=60)
        broker.garbage_for = {ApiKey.METADATA}  # from now on: the proxy's own discovery at start read it well
        try:
            proxy.add_user("reader", PASSWORD)
            for _ in range(2):  # the second logs in at once: no penalty for the upstream's fault
                with Wire(proxy.sasl, source="127.0.0.77") as wire:
                    wire.login("reader", PASSWORD)
                    wire.send_frame(encode_request(metadata_request(["feed-a"]), correlation_id=9))
                    assert wire.recv_frame() is None
        finally:
            proxy.stop()


def metadata_request(names: list[str]) -> MetadataRequest:
    topics = tuple(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=TopicName(name)) for name in names)
    return MetadataRequest(topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False)

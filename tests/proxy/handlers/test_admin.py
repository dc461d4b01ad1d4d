"""``proxy.handlers.admin`` against an in-memory upstream: each topic and config administration API goes up as the
client sent it when everything it names is allowed; a refused topic or config resource is answered with Kafka's error
by the proxy and only the allowed ones go upstream; a created topic's configs are hidden from a caller who may not
describe them; DeleteTopics asks the upstream itself (``Upstream.call``) whether a topic the caller may only describe
exists; a follower's OffsetForLeaderEpoch never goes upstream; an upstream that fails ends the request with
``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.alter_configs.v2 import request as alter_request
from kio.schema.create_partitions.v3 import request as partitions_request
from kio.schema.create_topics.v4 import request as create_v4
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_records.v2 import request as records_request
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.describe_configs.v4 import request as configs_request
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as incremental_request
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_request

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import response_schema
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


@pytest.fixture(autouse=True)
def administrator(services: Services) -> None:
    operations = (AclOperation.CREATE, AclOperation.DELETE, AclOperation.DESCRIBE, AclOperation.ALTER,
                  AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)  # fmt: skip
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", *operations)
    allow(services, "User:alice", ResourceType.TOPIC, "seen-", AclOperation.DESCRIBE)  # described, not deleted


def results(entry: str, *, into: str = "topics", **values: Any) -> Any:
    """An answer function: one ``entry`` (with ``values``) in the response's ``into`` per topic of the request."""

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        cls = response_schema(api_key, version)
        entries = tuple(entity(nested(cls, entry), name=topic.name, **values) for topic in request.topics)
        return answer_of(api_key, version, **{into: entries})

    return answer


def by_name(entries: Any, attribute: str = "error_code") -> dict[str, Any]:
    return {e.name: getattr(e, attribute) for e in entries}


# ------------------------------------------------------------------------------------------------- CreateTopics


def creatable(module: Any, *names: str) -> Any:
    topics = tuple(entity(module.CreatableTopic, name=n, num_partitions=1, replication_factor=1) for n in names)
    return entity(module.CreateTopicsRequest, topics=topics)


def test_create_topics_all_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream(results("CreatableTopicResult"))
    assert_relayed(handle(services, upstream, creatable(create_v4, "feed-a")), upstream)


def test_create_topics_refuses_a_denied_topic_and_creates_the_others(services: Services):
    upstream = MemoryUpstream(results("CreatableTopicResult", num_partitions=1))
    handled = handle(services, upstream, creatable(create_v7, "feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.CREATE_TOPICS)[0].topics] == ["feed-a"]
    assert by_name(handled.answer().topics) == {
        "feed-a": ErrorCode.none,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


def test_a_created_topics_configs_are_hidden_from_a_caller_who_may_not_describe_them(services: Services):
    allow(services, "User:bob", ResourceType.TOPIC, "feed-", AclOperation.CREATE)
    upstream = MemoryUpstream(results("CreatableTopicResult", num_partitions=3))
    handled = handle(services, upstream, creatable(create_v7, "feed-a"), principal="User:bob")
    (result,) = handled.answer().topics
    assert (result.error_code, result.topic_config_error_code, result.num_partitions) == (
        ErrorCode.none, ErrorCode.topic_authorization_failed.value, -1,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------- DeleteTopics


def test_delete_topics_forwards_only_the_deletable_topics(services: Services):
    upstream = MemoryUpstream(deleting)
    handled = handle(services, upstream, entity(DeleteTopicsRequest, topic_names=("feed-a", "secret-b")))
    assert upstream.bodies(ApiKey.DELETE_TOPICS)[0].topic_names == ("feed-a",)
    assert by_name(handled.answer().responses) == {
        "feed-a": ErrorCode.none,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


def deleting(api_key: ApiKey, version: int, request: Any) -> Any:
    """DeleteTopics deletes every topic named; Metadata knows none (every topic UNKNOWN_TOPIC_OR_PARTITION)."""
    cls = response_schema(api_key, version)
    if api_key is ApiKey.METADATA:
        unknown = ErrorCode.unknown_topic_or_partition
        topics = tuple(entity(nested(cls, "MetadataResponseTopic"), name=t.name, error_code=unknown)
                       for t in request.topics)  # fmt: skip
        return answer_of(api_key, version, topics=topics)
    deleted = tuple(entity(nested(cls, "DeletableTopicResult"), name=name) for name in request.topic_names)
    return answer_of(api_key, version, responses=deleted)


def test_a_missing_topic_the_caller_may_only_describe_is_unknown(services: Services):
    upstream = MemoryUpstream(deleting)
    handled = handle(services, upstream, entity(DeleteTopicsRequest, topic_names=("seen-a", "secret-b")))
    (asked,) = upstream.bodies(ApiKey.METADATA)  # the proxy's own question, never creating a topic
    assert ([t.name for t in asked.topics], asked.allow_auto_topic_creation) == (["seen-a"], False)
    assert upstream.bodies(ApiKey.DELETE_TOPICS) == []
    assert by_name(handled.answer().responses) == {
        "seen-a": ErrorCode.unknown_topic_or_partition,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


# ------------------------------------------------------------------------------------ CreatePartitions, DeleteRecords


def test_create_partitions_forwards_only_the_alterable_topics(services: Services):
    upstream = MemoryUpstream(results("CreatePartitionsTopicResult", into="results"))
    topics = tuple(entity(partitions_request.CreatePartitionsTopic, name=n, count=3) for n in ("feed-a", "secret-b"))
    handled = handle(services, upstream, entity(partitions_request.CreatePartitionsRequest, topics=topics))
    assert [t.name for t in upstream.bodies(ApiKey.CREATE_PARTITIONS)[0].topics] == ["feed-a"]
    assert by_name(handled.answer().results) == {
        "feed-a": ErrorCode.none,
        "secret-b": ErrorCode.topic_authorization_failed,
    }


def test_delete_records_all_allowed_is_relayed_and_a_denied_topic_is_refused(services: Services):
    def records(*names: str) -> Any:
        topics = tuple(
            entity(records_request.DeleteRecordsTopic, name=n,
                   partitions=(entity(records_request.DeleteRecordsPartition, partition_index=0, offset=10),))
            for n in names
        )  # fmt: skip
        return entity(records_request.DeleteRecordsRequest, topics=topics)

    upstream = MemoryUpstream(results("DeleteRecordsTopicResult"))
    assert_relayed(handle(services, upstream, records("feed-a")), upstream)
    upstream = MemoryUpstream(results("DeleteRecordsTopicResult"))
    handled = handle(services, upstream, records("feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.DELETE_RECORDS)[0].topics] == ["feed-a"]
    refused = {t.name: [(p.error_code, p.low_watermark) for p in t.partitions] for t in handled.answer().topics}
    assert refused == {"feed-a": [], "secret-b": [(ErrorCode.topic_authorization_failed, -1)]}


# ---------------------------------------------------------------------------------------------- config resources


def configured(api_key: ApiKey, version: int, request: Any) -> Any:
    cls = response_schema(api_key, version)
    entry = "DescribeConfigsResult" if api_key is ApiKey.DESCRIBE_CONFIGS else "AlterConfigsResourceResponse"
    entries = tuple(
        entity(nested(cls, entry), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources
    )
    return answer_of(api_key, version, **{"results" if api_key is ApiKey.DESCRIBE_CONFIGS else "responses": entries})


def config_errors(entries: Any) -> dict[tuple[int, str], ErrorCode]:
    return {(int(e.resource_type), e.resource_name): e.error_code for e in entries}


def test_describe_configs_all_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream(configured)
    resource = entity(configs_request.DescribeConfigsResource, resource_type=TOPIC_RESOURCE, resource_name="feed-a")
    assert_relayed(handle(services, upstream, entity(configs_request.DescribeConfigsRequest, resources=(resource,))),
                   upstream)  # fmt: skip


@pytest.mark.parametrize("module", [configs_request, alter_request, incremental_request], ids=lambda m: m.__name__)
def test_a_refused_config_resource_is_answered_by_the_proxy_and_the_others_forwarded(services: Services, module: Any):
    resource_cls = getattr(module, "DescribeConfigsResource", None) or module.AlterConfigsResource
    request_cls = next(getattr(module, n) for n in dir(module) if n.endswith("ConfigsRequest"))
    resources = tuple(
        entity(resource_cls, resource_type=kind, resource_name=name)
        for kind, name in ((TOPIC_RESOURCE, "feed-a"), (TOPIC_RESOURCE, "secret-b"), (BROKER_RESOURCE, "1"))
    )
    upstream = MemoryUpstream(configured)
    handled = handle(services, upstream, entity(request_cls, resources=resources))
    (sent,) = upstream.sent
    assert [(int(r.resource_type), r.resource_name) for r in sent.body.resources] == [(TOPIC_RESOURCE, "feed-a")]
    answer = handled.answer()
    assert config_errors(getattr(answer, "results", None) or answer.responses) == {
        (TOPIC_RESOURCE, "feed-a"): ErrorCode.none,
        (TOPIC_RESOURCE, "secret-b"): ErrorCode.topic_authorization_failed,
        (BROKER_RESOURCE, "1"): ErrorCode.cluster_authorization_failed,  # no cluster ACL
    }


# ------------------------------------------------------------------------------------------ OffsetForLeaderEpoch


def epochs(replica_id: int, *names: str) -> Any:
    topics = tuple(
        entity(epoch_request.OffsetForLeaderTopic, topic=n,
               partitions=(entity(epoch_request.OffsetForLeaderPartition, partition=0, leader_epoch=3),))
        for n in names
    )  # fmt: skip
    return entity(epoch_request.OffsetForLeaderEpochRequest, replica_id=replica_id, topics=topics)


def epoch_ends(api_key: ApiKey, version: int, request: Any) -> Any:
    cls = response_schema(api_key, version)
    topics = tuple(
        entity(nested(cls, "OffsetForLeaderTopicResult"), topic=t.topic,
               partitions=(entity(nested(cls, "EpochEndOffset"), partition=0, leader_epoch=3, end_offset=77),))
        for t in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def test_offset_for_leader_epoch_forwards_only_the_describable_topics(services: Services):
    upstream = MemoryUpstream(epoch_ends)
    handled = handle(services, upstream, epochs(-1, "feed-a", "secret-b"))
    assert [t.topic for t in upstream.bodies(ApiKey.OFFSET_FOR_LEADER_EPOCH)[0].topics] == ["feed-a"]
    answered = {t.topic: (p.error_code, int(p.end_offset)) for t in handled.answer().topics for p in t.partitions}
    assert answered == {"feed-a": (ErrorCode.none, 77), "secret-b": (ErrorCode.topic_authorization_failed, -1)}


def test_a_followers_offset_for_leader_epoch_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(epoch_ends)
    handled = handle(services, upstream, epochs(1, "feed-a"))
    assert upstream.sent == []
    assert {p.error_code for t in handled.answer().topics for p in t.partitions} == {
        ErrorCode.cluster_authorization_failed
    }


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), creatable(create_v7, "feed-a"))
    with pytest.raises(UpstreamUnavailable):  # DeleteTopics' own Metadata question
        handle(services, MemoryUpstream(unavailable), entity(DeleteTopicsRequest, topic_names=("seen-a",)))

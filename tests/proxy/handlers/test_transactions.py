"""``proxy.handlers.transactions`` against an in-memory upstream: each transaction API goes up as the client sent it
when everything it names is allowed; a refused transactional id, group or topic is answered with Kafka's error by the
proxy, and only the allowed part goes upstream (AddPartitionsToTxn: nothing, as Kafka adds nothing when one topic is
refused); DescribeTransactions and ListTransactions show only what the caller may describe; an upstream that fails
ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions
from kio.schema.describe_producers.v0 import request as producers_request
from kio.schema.describe_producers.v0 import response as producers_response
from kio.schema.describe_transactions.v0 import request as describe_request
from kio.schema.describe_transactions.v0 import response as describe_response
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v1 import request as list_request
from kio.schema.list_transactions.v1 import response as list_response
from kio.schema.txn_offset_commit.v3 import request as commit_request
from kio.schema.txn_offset_commit.v3 import response as commit_response

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.upstream import UpstreamUnavailable
from tests.proxy.memory_upstream import MemoryUpstream, allow, answer_of, assert_relayed, entity, handle, unavailable


@pytest.fixture(autouse=True)
def transactional(services: Services) -> None:
    allow(services, "User:alice", ResourceType.TRANSACTIONAL_ID, "feed-", AclOperation.WRITE, AclOperation.DESCRIBE)
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.READ)
    allow(services, "User:alice", ResourceType.TOPIC, "feed-", AclOperation.WRITE, AclOperation.READ,
          AclOperation.DESCRIBE)  # fmt: skip


def add_partitions_request(transactional_id: str, *topics: str) -> Any:
    named = tuple(entity(add_partitions.AddPartitionsToTxnTopic, name=name, partitions=(0, 1)) for name in topics)
    return entity(add_partitions.AddPartitionsToTxnRequest, v3_and_below_transactional_id=transactional_id,
                  v3_and_below_topics=named)  # fmt: skip


def partition_errors(answer: Any) -> dict[str, set[ErrorCode]]:
    return {
        topic.name: {p.partition_error_code for p in topic.results_by_partition}
        for topic in answer.results_by_topic_v3_and_below
    }


def test_add_partitions_all_allowed_is_relayed(services: Services):
    upstream = MemoryUpstream()
    assert_relayed(handle(services, upstream, add_partitions_request("feed-x", "feed-a")), upstream)


def test_add_partitions_with_a_denied_topic_adds_nothing(services: Services):
    upstream = MemoryUpstream()
    handled = handle(services, upstream, add_partitions_request("feed-x", "feed-a", "secret-b"))
    assert upstream.sent == []
    assert partition_errors(handled.answer()) == {
        "feed-a": {ErrorCode.operation_not_attempted},
        "secret-b": {ErrorCode.topic_authorization_failed},
    }


def test_add_partitions_of_a_denied_transactional_id_refuses_every_partition(services: Services):
    upstream = MemoryUpstream()
    handled = handle(services, upstream, add_partitions_request("secret-x", "feed-a"))
    assert upstream.sent == []
    assert partition_errors(handled.answer()) == {"feed-a": {ErrorCode.transactional_id_authorization_failed}}


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (entity(AddOffsetsToTxnRequest, transactional_id="feed-x", group_id="feed-g"), ErrorCode.none),
        (entity(AddOffsetsToTxnRequest, transactional_id="secret-x", group_id="feed-g"),
         ErrorCode.transactional_id_authorization_failed),
        (entity(AddOffsetsToTxnRequest, transactional_id="feed-x", group_id="secret-g"),
         ErrorCode.group_authorization_failed),
        (entity(EndTxnRequest, transactional_id="feed-x"), ErrorCode.none),
        (entity(EndTxnRequest, transactional_id="secret-x"), ErrorCode.transactional_id_authorization_failed),
    ],
)  # fmt: skip
def test_add_offsets_and_end_txn(services: Services, request_: Any, error: ErrorCode):
    upstream = MemoryUpstream()
    handled = handle(services, upstream, request_)
    if error is ErrorCode.none:
        assert_relayed(handled, upstream)
    else:
        assert upstream.sent == []
        assert handled.answer().error_code == error


def txn_commit(group_id: str, *topics: str) -> Any:
    named = tuple(
        entity(commit_request.TxnOffsetCommitRequestTopic, name=name,
               partitions=(entity(commit_request.TxnOffsetCommitRequestPartition, partition_index=0),))
        for name in topics
    )  # fmt: skip
    return entity(commit_request.TxnOffsetCommitRequest, transactional_id="feed-x", group_id=group_id, topics=named)


def txn_committed(api_key: ApiKey, version: int, request: Any) -> Any:
    topics = tuple(
        entity(commit_response.TxnOffsetCommitResponseTopic, name=topic.name, partitions=tuple(
            entity(commit_response.TxnOffsetCommitResponsePartition, partition_index=p.partition_index)
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return answer_of(api_key, version, topics=topics)


def test_txn_offset_commit_forwards_only_the_allowed_topics(services: Services):
    upstream = MemoryUpstream(txn_committed)
    handled = handle(services, upstream, txn_commit("feed-g", "feed-a", "secret-b"))
    assert [t.name for t in upstream.bodies(ApiKey.TXN_OFFSET_COMMIT)[0].topics] == ["feed-a"]
    answered = {t.name: p.error_code for t in handled.answer().topics for p in t.partitions}
    assert answered == {"feed-a": ErrorCode.none, "secret-b": ErrorCode.topic_authorization_failed}


def test_txn_offset_commit_to_a_denied_group_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(txn_committed)
    handled = handle(services, upstream, txn_commit("secret-g", "feed-a"))
    assert upstream.sent == []
    assert {p.error_code for t in handled.answer().topics for p in t.partitions} == {
        ErrorCode.group_authorization_failed
    }


def test_describe_producers_forwards_only_the_readable_topics(services: Services):
    def producers(api_key: ApiKey, version: int, request: Any) -> Any:
        topics = tuple(
            entity(producers_response.TopicResponse, name=t.name,
                   partitions=(entity(producers_response.PartitionResponse, partition_index=0),))
            for t in request.topics
        )  # fmt: skip
        return answer_of(api_key, version, topics=topics)

    upstream = MemoryUpstream(producers)
    named = tuple(
        entity(producers_request.TopicRequest, name=n, partition_indexes=(0,)) for n in ("feed-a", "secret-b")
    )
    handled = handle(services, upstream, entity(producers_request.DescribeProducersRequest, topics=named))
    assert [t.name for t in upstream.bodies(ApiKey.DESCRIBE_PRODUCERS)[0].topics] == ["feed-a"]
    answered = {t.name: p.error_code for t in handled.answer().topics for p in t.partitions}
    assert answered == {"feed-a": ErrorCode.none, "secret-b": ErrorCode.topic_authorization_failed}


def test_describe_transactions_refuses_a_denied_id_and_hides_topics_not_describable(services: Services):
    def described(api_key: ApiKey, version: int, request: Any) -> Any:
        topics = tuple(entity(describe_response.TopicData, topic=t, partitions=(0,)) for t in ("feed-a", "secret-b"))
        states = tuple(
            entity(describe_response.TransactionState, transactional_id=tid, transaction_state="Ongoing",
                   transaction_timeout=timedelta(seconds=60), transaction_start_time=datetime(2026, 1, 1, tzinfo=UTC),
                   topics=topics)
            for tid in request.transactional_ids
        )  # fmt: skip
        return answer_of(api_key, version, transaction_states=states)

    upstream = MemoryUpstream(described)
    request = entity(describe_request.DescribeTransactionsRequest, transactional_ids=("feed-x", "secret-x"))
    handled = handle(services, upstream, request)
    assert upstream.bodies(ApiKey.DESCRIBE_TRANSACTIONS)[0].transactional_ids == ("feed-x",)
    answered = {
        s.transactional_id: (s.error_code, [t.topic for t in s.topics]) for s in handled.answer().transaction_states
    }
    assert answered == {
        "feed-x": (ErrorCode.none, ["feed-a"]),
        "secret-x": (ErrorCode.transactional_id_authorization_failed, []),
    }


def test_list_transactions_lists_only_the_describable_ids(services: Services):
    def listed(api_key: ApiKey, version: int, _request: Any) -> Any:
        states = tuple(entity(list_response.TransactionState, transactional_id=t) for t in ("feed-x", "secret-x"))
        return answer_of(api_key, version, transaction_states=states)

    upstream = MemoryUpstream(listed)
    handled = handle(services, upstream, entity(list_request.ListTransactionsRequest))
    assert [sent.payload for sent in upstream.sent] == [handled.payload]
    assert [s.transactional_id for s in handled.answer().transaction_states] == ["feed-x"]


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), entity(EndTxnRequest, transactional_id="feed-x"))

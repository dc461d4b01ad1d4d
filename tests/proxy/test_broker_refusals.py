"""The broker's own refusals of what kafkaguard allowed (issue 38, ``proxy.broker_refusals``), against the in-memory
upstream: in passthrough (the upstream logged in as the client, ``as_client``) a topic kafkaguard allowed and the
broker answered TOPIC_AUTHORIZATION_FAILED is one broker event in the audit trail and one count of
``kafkaguard_broker_refusals_total``; with the service account, none; kafkaguard's own denial is never also the
broker's; a flood (10,000 partitions, 10,000 topics) gives a bounded number of events; ``explain --from-audit`` and
the Denials tab's reader say which side refused."""

from __future__ import annotations

import asyncio
import json
import struct
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as coordinator_v4
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.static.primitive import Records
from typer.testing import CliRunner

from kafkaguard.audit.records.broker_refusals import DEFAULT_MAX_EVENTS, BrokerRefusals, RefusalKind
from kafkaguard.audit.records.recent import recent_decisions
from kafkaguard.audit.records.routing import Router, parse_routes
from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.bootstrap import Services, build_services
from kafkaguard.cli.main import app
from kafkaguard.config import load_settings
from kafkaguard.console.metrics import ConsoleMetrics
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import encode_response, request_schema, response_schema
from kafkaguard.protocol.connection import MAX_QUEUED_ANSWERS
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.produce_walk import PassthroughProduceAnswerWalk
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.walks import NEED, TAIL
from tests.proxy.handlers.test_by_id import fetch
from tests.proxy.memory_upstream import (
    CLIENT_HOST,
    CollectingWriter,
    MemoryUpstream,
    allow,
    answer_of,
    client_request,
    entity,
    handle,
    make_scope,
)
from tests.proxy.test_topic_ids import Cluster

TOPIC = ResourceType.TOPIC
REFUSED = ErrorCode.topic_authorization_failed
BROKER_TYPE = "io.kafkaguard.broker.v1"
SCHEMA = Path(__file__).parents[2] / "docs" / "audit-event.schema.json"


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    built = build_services(load_settings(None, data_dir=tmp_path / "data", super_users="User:admin"))
    allow(built, "User:alice", TOPIC, "feed-", AclOperation.DESCRIBE, AclOperation.CREATE)
    yield built
    built.close()


def broker_refusing(*refused: str) -> Any:
    """An upstream answering Metadata and CreateTopics: the topics ``refused`` TOPIC_AUTHORIZATION_FAILED (its own
    ACLs), the others fine. It answers every topic asked for, and ``refused`` ones even when not asked."""

    refusing = set(refused)

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        cls = response_schema(api_key, version)
        names = list(dict.fromkeys([t.name for t in request.topics] + list(refused)))
        if api_key is ApiKey.CREATE_TOPICS:
            result_cls = nested(cls, "CreatableTopicResult")
            results = tuple(entity(result_cls, name=n, error_code=REFUSED if n in refusing else ErrorCode.none)
                            for n in names)  # fmt: skip
            return answer_of(api_key, version, topics=results)
        topic_cls = nested(cls, "MetadataResponseTopic")
        topics = tuple(entity(topic_cls, name=n, error_code=REFUSED if n in refusing else ErrorCode.none)
                       for n in names)  # fmt: skip
        return answer_of(api_key, version, topics=topics)

    return answer


def metadata(*names: str) -> Any:
    topics = tuple(entity(metadata_v12.MetadataRequestTopic, name=n, topic_id=uuid.UUID(int=0)) for n in names)
    return entity(metadata_v12.MetadataRequest, topics=topics, allow_auto_topic_creation=False)


def envelopes(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def broker_events(path: Path) -> list[dict[str, Any]]:
    return [e for e in envelopes(path) if e["type"] == BROKER_TYPE]


def test_a_topic_kafkaguard_allowed_and_the_broker_refused_is_one_event_and_one_count(
    services: Services, tmp_path: Path
) -> None:
    log = tmp_path / "audit.log"
    upstream, audit = MemoryUpstream(broker_refusing("feed-b"), as_client=True), AuditLog(log)
    handled = handle(services, upstream, metadata("feed-a", "feed-b"), audit=audit)
    # the client gets the broker's refusal, passed on
    assert {t.name: t.error_code for t in handled.answer().topics} == {"feed-a": ErrorCode.none, "feed-b": REFUSED}
    (event,) = broker_events(log)
    data = event["data"]
    assert event["subject"] == "TOPIC:feed-b"
    assert (data["principal"], data["host"], data["api"], data["operation"], data["resource_name"]) == (
        "User:alice", "10.0.0.7", "Metadata", "DESCRIBE", "feed-b"
    )  # fmt: skip
    assert (data["decision"], data["broker_error"], data["broker_error_code"], data["items"]) == (
        "ALLOWED", "TOPIC_AUTHORIZATION_FAILED", 29, 1
    )  # fmt: skip
    assert data["rule"].startswith("MatchingAcl(")  # kafkaguard's own deciding ACL
    assert services.broker_refusals.counts() == {RefusalKind("Metadata", "TOPIC_AUTHORIZATION_FAILED"): 1}
    text = ConsoleMetrics(lambda: 0, broker_refusals=services.broker_refusals).render().decode()
    assert 'kafkaguard_broker_refusals_total{api="Metadata",error="TOPIC_AUTHORIZATION_FAILED"} 1.0' in text
    # no record of another category: kafkaguard's trail stays its own decisions (audit_mode denied: none)
    assert [e["type"] for e in envelopes(log)] == [BROKER_TYPE]
    # the envelope is what the published schema admits (and a data object missing the broker's error is not)
    check = jsonschema_rs.Draft202012Validator(json.loads(SCHEMA.read_text("utf-8")))
    assert [error.message for error in check.iter_errors(event)] == []
    broken = {**event, "data": {k: v for k, v in data.items() if k != "broker_error"}}
    assert [error.message for error in check.iter_errors(broken)] != []


def test_with_the_service_account_the_broker_s_refusal_is_not_noted(services: Services, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    upstream = MemoryUpstream(broker_refusing("feed-b"), as_client=False)
    handled = handle(services, upstream, metadata("feed-a", "feed-b"), audit=AuditLog(log))
    assert {t.name: t.error_code for t in handled.answer().topics}["feed-b"] == REFUSED
    assert broker_events(log) == []
    assert services.broker_refusals.counts() == {}


def test_kafkaguard_s_own_denial_is_not_also_the_broker_s(services: Services, tmp_path: Path) -> None:
    """secret-c is denied by kafkaguard (never asked upstream); an upstream answer naming it refused anyway is not
    read as the broker refusing it."""
    log = tmp_path / "audit.log"
    upstream = MemoryUpstream(broker_refusing("feed-b", "secret-c"), as_client=True)
    handled = handle(services, upstream, metadata("feed-a", "feed-b", "secret-c"), audit=AuditLog(log))
    assert [t.name for t in upstream.bodies(ApiKey.METADATA)[0].topics] == ["feed-a", "feed-b"]
    assert {t.name: t.error_code for t in handled.answer().topics}["secret-c"] == REFUSED
    kinds = {(e["type"], e["data"]["resource_name"], e["data"]["decision"]) for e in envelopes(log)}
    assert kinds == {
        ("io.kafkaguard.authorization.v2", "secret-c", "DENIED"),  # kafkaguard's own
        (BROKER_TYPE, "feed-b", "ALLOWED"),  # the broker's
    }
    # and straight from an outcome: a name kafkaguard denied is never the broker's, whatever the answer says
    scope = _scope(services, upstream)
    outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: ["secret-c"]})
    before = services.broker_refusals.counts()
    noted(scope, outcome, TOPIC, [("secret-c", 29)] * 3)
    assert services.broker_refusals.counts() == before


def test_a_refusal_of_10000_partitions_is_one_event(services: Services, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    audit = AuditLog(log)
    upstream = MemoryUpstream(as_client=True)
    scope = _scope(services, upstream, audit)
    outcome = scope.authorize(REQUIREMENTS[ApiKey.METADATA], {TOPIC: ["feed-a"]})
    noted(scope, outcome, TOPIC, [("feed-a", 29)] * 10_000)  # one item per partition
    asyncio.run(audit.flush())
    (event,) = broker_events(log)
    assert (event["data"]["resource_name"], event["data"]["items"]) == ("feed-a", 10_000)
    assert services.broker_refusals.counts() == {RefusalKind("Metadata", "TOPIC_AUTHORIZATION_FAILED"): 1}


def test_a_refusal_of_10000_topics_gives_a_bounded_number_of_events(services: Services, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    names = [f"feed-{i}" for i in range(10_000)]
    upstream = MemoryUpstream(broker_refusing(*names), as_client=True)
    create = entity(create_v7.CreateTopicsRequest,
                    topics=tuple(entity(create_v7.CreatableTopic, name=n, num_partitions=1, replication_factor=1)
                                 for n in names))  # fmt: skip
    handle(services, upstream, create, audit=AuditLog(log))
    events = broker_events(log)
    assert len(events) == DEFAULT_MAX_EVENTS
    assert {e["data"]["operation"] for e in events} == {"CREATE"}
    # every one counted, though
    assert services.broker_refusals.counts() == {RefusalKind("CreateTopics", "TOPIC_AUTHORIZATION_FAILED"): 10_000}
    # the same refusal again within the interval: counted, not recorded again
    handle(services, upstream, metadata("feed-1"), audit=AuditLog(log))
    assert len(broker_events(log)) == DEFAULT_MAX_EVENTS


def test_the_interval_bounds_events_per_key_and_in_all() -> None:
    now = [0.0]
    refusals = BrokerRefusals(interval_seconds=60, max_events=2, clock=lambda: now[0])
    admit = refusals.admit
    assert admit("Metadata", "TOPIC_AUTHORIZATION_FAILED", "User:a", "TOPIC", "t1", "DESCRIBE")
    assert not admit("Metadata", "TOPIC_AUTHORIZATION_FAILED", "User:a", "TOPIC", "t1", "DESCRIBE")
    assert admit("Metadata", "TOPIC_AUTHORIZATION_FAILED", "User:b", "TOPIC", "t1", "DESCRIBE")
    assert not admit("Metadata", "TOPIC_AUTHORIZATION_FAILED", "User:c", "TOPIC", "t1", "DESCRIBE")  # 2 used up
    now[0] = 61.0
    assert admit("Metadata", "TOPIC_AUTHORIZATION_FAILED", "User:a", "TOPIC", "t1", "DESCRIBE")  # a new interval
    assert refusals.counts() == {RefusalKind("Metadata", "TOPIC_AUTHORIZATION_FAILED"): 5}


def test_explain_and_the_denials_reader_say_the_broker_refused(services: Services, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    upstream = MemoryUpstream(broker_refusing("feed-b"), as_client=True)
    handle(services, upstream, metadata("feed-a", "feed-b", "secret-c"), audit=AuditLog(log))
    (listed, denied) = recent_decisions(log, limit=10).decisions
    assert (listed.kind, listed.resource_name, listed.decision, listed.broker_error) == (
        "broker", "feed-b", "ALLOWED", "TOPIC_AUTHORIZATION_FAILED"
    )  # fmt: skip
    assert listed.explanation is not None and "the broker refused with TOPIC_AUTHORIZATION_FAILED" in listed.explanation
    assert (denied.kind, denied.resource_name) == ("denied", "secret-c")
    data_dir = str(tmp_path / "data")
    result = CliRunner().invoke(app, ["explain", "--from-audit", str(log), "--data-dir", data_dir])
    assert result.exit_code == 0, result.output
    assert "request  User:alice from 10.0.0.7: DESCRIBE on TOPIC:feed-b (Metadata)" in result.output
    assert (
        "refused  kafkaguard allowed (its ACL: MatchingAcl(" in result.output
        and "the broker refused with TOPIC_AUTHORIZATION_FAILED (its own ACLs: in passthrough both must allow)"
        in result.output
    ), result.output
    as_json = CliRunner().invoke(app, ["explain", "--from-audit", str(log), "--data-dir", data_dir, "--json"])
    answer = json.loads(as_json.stdout)
    assert (answer["refused_by"], answer["broker_error"], answer["logged_decision"]) == (
        "broker", "TOPIC_AUTHORIZATION_FAILED", "ALLOWED"
    )  # fmt: skip


def _scope(services: Services, upstream: MemoryUpstream, audit: AuditLog | None = None) -> ProxyScope:
    """A Metadata request's scope, for ``noted`` called straight from an outcome (no answer goes out)."""
    outbox = Outbox(CollectingWriter(), limit=MAX_QUEUED_ANSWERS, close=lambda: None, peer=CLIENT_HOST)
    payload = client_request(metadata("feed-a"))
    return make_scope(services, upstream, outbox, payload, principal="User:alice", audit=audit)


def test_a_commit_refused_on_9990_partitions_by_the_broker_is_one_event(services: Services, tmp_path: Path) -> None:
    """OffsetCommit partly denied by kafkaguard (secret-b) is read back: the broker refusing every one of feed-a's
    9,990 partitions (a request holds at most 10,000 items) is one event of 9,990 items; secret-b is kafkaguard's own
    denial only."""
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.READ)
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.READ)
    log = tmp_path / "audit.log"

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        cls = response_schema(api_key, version)
        topic_cls, partition_cls = (
            nested(cls, "OffsetCommitResponseTopic"),
            nested(cls, "OffsetCommitResponsePartition"),
        )
        topics = tuple(entity(topic_cls, name=t.name, partitions=tuple(
            entity(partition_cls, partition_index=p.partition_index, error_code=REFUSED) for p in t.partitions))
            for t in request.topics)  # fmt: skip
        return answer_of(api_key, version, topics=topics)

    def topic(name: str, partitions: int) -> Any:
        return entity(commit_v8.OffsetCommitRequestTopic, name=name, partitions=tuple(
            entity(commit_v8.OffsetCommitRequestPartition, partition_index=i) for i in range(partitions)))  # fmt: skip

    request = entity(commit_v8.OffsetCommitRequest, group_id="feed-g", topics=(topic("feed-a", 9_990),
                                                                               topic("secret-b", 1)))  # fmt: skip
    handled = handle(services, MemoryUpstream(answer, as_client=True), request, audit=AuditLog(log))
    errors = {t.name: {p.error_code for p in t.partitions} for t in handled.answer().topics}
    assert errors == {"feed-a": {REFUSED}, "secret-b": {REFUSED}}
    (event,) = broker_events(log)
    assert (event["data"]["resource_name"], event["data"]["operation"], event["data"]["items"]) == (
        "feed-a", "READ", 9_990
    )  # fmt: skip
    assert services.broker_refusals.counts() == {RefusalKind("OffsetCommit", "TOPIC_AUTHORIZATION_FAILED"): 1}
    denials = [e["data"]["resource_name"] for e in envelopes(log) if e["type"] == "io.kafkaguard.authorization.v2"]
    assert denials == ["secret-b"]


def test_a_group_the_broker_refuses_its_coordinator_for_is_the_broker_s_refusal(
    services: Services, tmp_path: Path
) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)
    log = tmp_path / "audit.log"

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        coordinator_cls = nested(response_schema(api_key, version), "Coordinator")
        found = tuple(
            entity(
                coordinator_cls, key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.group_authorization_failed
            )
            for key in request.coordinator_keys
        )
        return answer_of(api_key, version, coordinators=found)  # fmt: skip

    request = entity(coordinator_v4.FindCoordinatorRequest, key_type=0, coordinator_keys=("feed-g", "secret-g"))
    handle(services, MemoryUpstream(answer, as_client=True), request, audit=AuditLog(log))
    (event,) = broker_events(log)
    assert (event["subject"], event["data"]["operation"], event["data"]["broker_error"]) == (
        "GROUP:feed-g", "DESCRIBE", "GROUP_AUTHORIZATION_FAILED"
    )  # fmt: skip
    assert services.broker_refusals.counts() == {RefusalKind("FindCoordinator", "GROUP_AUTHORIZATION_FAILED"): 1}


def test_the_kafka_sink_routes_broker_refusals_by_category_and_result() -> None:
    router = Router(parse_routes([{"category": "broker", "result": "denied", "topic": "audit-broker"}]), "audit-events")
    data = {"principal": "User:alice", "decision": "ALLOWED", "broker_error": "TOPIC_AUTHORIZATION_FAILED"}
    assert router.route("broker", "TOPIC:feed-b", data) == "audit-broker"
    assert router.route("authorization", "TOPIC:feed-b", {**data, "decision": "DENIED"}) == "audit-events"
    with pytest.raises(ValueError, match="result 'allowed' is not one of category broker's results"):
        parse_routes([{"category": "broker", "result": "allowed", "topic": "t"}])


# ------------------------------------------------------------------------------------ Produce, on its fast path


def batch(*, transactional: bool) -> Records:
    """A v2 record batch's first bytes as the proxy reads them: magic at 16, the attributes (int16) at 21."""
    return Records(bytes(16) + b"\x02" + bytes(4) + struct.pack(">h", 0x10 if transactional else 0) + bytes(40))


def produce(version: int, *topics: str, transactional_id: str | None = None) -> Any:
    cls = request_schema(ApiKey.PRODUCE, version)
    topic_cls, partition_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    records = batch(transactional=transactional_id is not None)
    data = tuple(
        entity(topic_cls, name=name, partition_data=tuple(entity(partition_cls, index=i, records=records)
                                                          for i in range(2)))
        for name in topics
    )  # fmt: skip
    fields: dict[str, Any] = {"transactional_id": transactional_id} if version >= 3 else {}
    return entity(cls, acks=-1, timeout=timedelta(seconds=30), topic_data=data, **fields)


def broker_refusing_writes(*refused: str, code: ErrorCode = REFUSED) -> Any:
    """An upstream answering Produce: the partitions of the topics ``refused`` get ``code`` (``"*"``: every topic),
    the others offset 42."""

    def answer(api_key: ApiKey, version: int, request: Any) -> Any:
        assert api_key is ApiKey.PRODUCE
        cls = response_schema(api_key, version)
        topic_cls, part_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")

        def partition(name: str, index: int) -> Any:
            if name in refused or "*" in refused:
                return entity(part_cls, index=index, error_code=code, base_offset=-1)
            return entity(part_cls, index=index, base_offset=42)

        topics = tuple(entity(topic_cls, name=t.name, partition_responses=tuple(partition(t.name, p.index)
                                                                                for p in t.partition_data))
                       for t in request.topic_data)  # fmt: skip
        return answer_of(api_key, version, responses=topics)

    return answer


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_a_produce_the_broker_refused_on_the_fast_path_is_noted_and_passed_on_unchanged(
    services: Services, tmp_path: Path, version: int
) -> None:
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.WRITE)
    log = tmp_path / "audit.log"
    upstream, audit = MemoryUpstream(broker_refusing_writes("feed-b"), as_client=True), AuditLog(log)
    handled = handle(services, upstream, produce(version, "feed-a", "feed-b"), audit=audit)
    assert handled.client == [framed[4:] for framed in upstream.answered]  # the broker's own bytes, not rebuilt
    answered = {t.name: {p.error_code for p in t.partition_responses} for t in handled.answer().responses}
    assert answered == {"feed-a": {ErrorCode.none}, "feed-b": {REFUSED}}
    (event,) = broker_events(log)
    data = event["data"]
    assert (event["subject"], data["api"], data["operation"], data["broker_error"], data["items"]) == (
        "TOPIC:feed-b", "Produce", "WRITE", "TOPIC_AUTHORIZATION_FAILED", 2
    )  # fmt: skip
    assert services.broker_refusals.counts() == {RefusalKind("Produce", "TOPIC_AUTHORIZATION_FAILED"): 1}


def test_a_transactional_produce_the_broker_refused_names_the_transactional_id(
    services: Services, tmp_path: Path
) -> None:
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.WRITE)
    allow(services, "User:alice", ResourceType.TRANSACTIONAL_ID, "tx-", AclOperation.WRITE)
    log = tmp_path / "audit.log"
    refusing = broker_refusing_writes("*", code=ErrorCode.transactional_id_authorization_failed)
    upstream, audit = MemoryUpstream(refusing, as_client=True), AuditLog(log)
    handled = handle(services, upstream, produce(11, "feed-a", "feed-b", transactional_id="tx-1"), audit=audit)
    assert handled.client == [framed[4:] for framed in upstream.answered]
    (event,) = broker_events(log)  # one event for the id, none for the topics the error is not about
    data = event["data"]
    assert (event["subject"], data["operation"], data["broker_error"], data["items"]) == (
        "TRANSACTIONAL_ID:tx-1", "WRITE", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 4
    )  # fmt: skip


@pytest.mark.parametrize("as_client", [True, False], ids=["passthrough", "service account"])
def test_a_produce_the_broker_wrote_is_passed_on_unchanged_and_noted_nowhere(
    services: Services, tmp_path: Path, as_client: bool
) -> None:
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.WRITE)
    log = tmp_path / "audit.log"
    refusing = () if as_client else ("feed-b",)  # with the service account a refusal is the proxy's account's
    upstream, audit = MemoryUpstream(broker_refusing_writes(*refusing), as_client=as_client), AuditLog(log)
    handled = handle(services, upstream, produce(9, "feed-a", "feed-b"), audit=audit)
    assert handled.client == [framed[4:] for framed in upstream.answered]
    assert broker_events(log) == []
    assert services.broker_refusals.counts() == {}


def test_a_produce_answer_is_given_to_the_handler_only_when_it_may_hold_a_refusal() -> None:
    cls = response_schema(ApiKey.PRODUCE, 9)
    topic_cls, part_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")

    def body(code: ErrorCode, offset: int = 42) -> bytes:
        partition = entity(part_cls, index=0, error_code=code, base_offset=offset)
        answer = entity(cls, responses=(entity(topic_cls, name="t", partition_responses=(partition,)),))
        return encode_response(ApiKey.PRODUCE, 9, 7, answer)[8:]

    def step(payload: bytes) -> Any:
        return PassthroughProduceAnswerWalk(len(payload), api_version=9).step(payload)

    clean = body(ErrorCode.none)
    assert step(clean) == (TAIL, len(clean), 0)  # passed on as it came
    for refused in (ErrorCode.topic_authorization_failed, ErrorCode.transactional_id_authorization_failed):
        whole = body(refused)
        assert step(whole) == (TAIL, 0, len(whole))  # the handler's to read
    false_match = body(ErrorCode.none, offset=0x001D_0000)  # ``00 1d`` inside an offset: read, found clean
    assert step(false_match) == (TAIL, 0, len(false_match))
    assert PassthroughProduceAnswerWalk(len(clean) + 1, api_version=9).step(clean) == (NEED, len(clean) + 1, 0)


# ------------------------------------------------------------------------------------------------ Fetch

FEED_A, FEED_B, SECRET = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


class FetchRefusing(Cluster):
    """Metadata from ``Cluster`` (the topics' ids); Fetch answered per partition: the topics by id in ``refused``
    TOPIC_AUTHORIZATION_FAILED (the broker's own ACLs, Kafka's ``partitionResponse(tp, error)``), the others with
    ``records`` of a few bytes."""

    def __init__(self, *refused: uuid.UUID, **topics: uuid.UUID) -> None:
        super().__init__(**topics)
        self.refused = set(refused)

    def __call__(self, api_key: ApiKey, version: int, request: Any) -> Any:
        if api_key is ApiKey.METADATA:
            return super().__call__(api_key, version, request)
        assert api_key is ApiKey.FETCH
        cls = response_schema(api_key, version)
        topic_cls, partition_cls = nested(cls, "FetchableTopicResponse"), nested(cls, "PartitionData")

        def partition(index: int, topic_id: uuid.UUID) -> Any:
            if topic_id in self.refused:
                return entity(partition_cls, partition_index=index, error_code=REFUSED, high_watermark=-1,
                              last_stable_offset=-1, log_start_offset=-1, records=b"")  # fmt: skip
            return entity(partition_cls, partition_index=index, high_watermark=100, records=b"r" * 5000)

        responses = tuple(
            entity(topic_cls, topic_id=t.topic_id, partitions=tuple(partition(p.partition, t.topic_id)
                                                                     for p in t.partitions))
            for t in request.topics
        )  # fmt: skip
        return answer_of(api_key, version, responses=responses)


def fetch_by_id(version: int, *ids: uuid.UUID) -> Any:
    """A fetch of two partitions of each topic id (each refused partition an item of the broker's event)."""
    return fetch(version, *ids, partitions=2)


def fetch_upstream(*refused: uuid.UUID, as_client: bool = True) -> MemoryUpstream:
    cluster = FetchRefusing(*refused, **{"feed-a": FEED_A, "feed-b": FEED_B, "secret": SECRET})
    return MemoryUpstream(cluster, as_client=as_client)


@pytest.mark.parametrize("version", [13, 15, 16, 17])
def test_a_fetch_the_broker_refused_on_the_fast_path_is_noted_and_passed_on_unchanged(
    services: Services, tmp_path: Path, version: int
) -> None:
    """Every topic allowed by kafkaguard: the answer streams through unchanged (walked, v13-v15 too, in
    passthrough), and the broker's refusal of one topic's two partitions is one READ event."""
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.READ)
    log = tmp_path / "audit.log"
    upstream, audit = fetch_upstream(FEED_B), AuditLog(log)
    handled = handle(services, upstream, fetch_by_id(version, FEED_A, FEED_B), audit=audit)
    assert handled.client == [upstream.answered[-1][4:]]  # the broker's own bytes (after Metadata's, for the ids)
    answered = {t.topic_id: {p.error_code for p in t.partitions} for t in handled.answer().responses}
    assert answered == {FEED_A: {ErrorCode.none}, FEED_B: {REFUSED}}
    (event,) = broker_events(log)
    data = event["data"]
    assert (event["subject"], data["api"], data["operation"], data["broker_error"], data["items"]) == (
        "TOPIC:feed-b", "Fetch", "READ", "TOPIC_AUTHORIZATION_FAILED", 2
    )  # fmt: skip
    assert services.broker_refusals.counts() == {RefusalKind("Fetch", "TOPIC_AUTHORIZATION_FAILED"): 1}


@pytest.mark.parametrize("as_client", [True, False], ids=["passthrough", "service account"])
def test_a_fetch_the_broker_answered_is_noted_nowhere(services: Services, tmp_path: Path, as_client: bool) -> None:
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.READ)
    log = tmp_path / "audit.log"
    refused = () if as_client else (FEED_B,)  # with the service account a refusal is the proxy's account's
    upstream, audit = fetch_upstream(*refused, as_client=as_client), AuditLog(log)
    handled = handle(services, upstream, fetch_by_id(13, FEED_A, FEED_B), audit=audit)
    assert handled.client == [upstream.answered[-1][4:]]
    assert broker_events(log) == []
    assert services.broker_refusals.counts() == {}


def test_a_partly_denied_fetch_notes_the_broker_s_refusal_not_kafkaguard_s_own(
    services: Services, tmp_path: Path
) -> None:
    """kafkaguard denies ``secret`` (answered by it, never upstream); of what went up the broker refused feed-b:
    only that is the broker's event."""
    allow(services, "User:alice", TOPIC, "feed-", AclOperation.READ)
    log = tmp_path / "audit.log"
    upstream, audit = fetch_upstream(FEED_B, SECRET), AuditLog(log)
    handled = handle(services, upstream, fetch_by_id(16, FEED_A, FEED_B, SECRET), audit=audit)
    assert [t.topic_id for t in upstream.bodies(ApiKey.FETCH)[0].topics] == [FEED_A, FEED_B]
    answered = {t.topic_id: {p.error_code for p in t.partitions} for t in handled.answer().responses}
    assert answered == {FEED_A: {ErrorCode.none}, FEED_B: {REFUSED}, SECRET: {REFUSED}}
    assert [(e["subject"], e["data"]["items"]) for e in broker_events(log)] == [("TOPIC:feed-b", 2)]

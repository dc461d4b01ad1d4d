"""The topic and config administration APIs through ``kafkaguard proxy`` to a real Kafka broker.

confluent-kafka's AdminClient drives CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs; CreateTopics v7 (the configs of a created topic) and OffsetForLeaderEpoch
are sent raw (``tests/wire.py``), since no client here shows those fields. Every effect is checked on the broker
itself, as its admin.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding as BrokerAcl
from confluent_kafka.admin._acl import AclBindingFilter, AclPermissionType
from confluent_kafka.admin._acl import AclOperation as BrokerOp
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._resource import ResourcePatternType
from confluent_kafka.admin._resource import ResourceType as BrokerResource
from confluent_kafka.admin._resource import ResourceType as ConfigType
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from confluent_kafka.cimpl import NewPartitions, NewTopic
from kio.schema.alter_configs.v2.request import AlterableConfig, AlterConfigsRequest, AlterConfigsResource
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.delete_records.v2.request import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as IncrementalConfig
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource as IncrementalConfigsResource
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from kafkaguard.model import CLUSTER_NAME, AclOperation, ResourceType
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, LOOPBACK, KafkaBroker
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, grant, proxy_bootstrap, sasl, unique, user
from tests.serving import ServerHandle
from tests.wire import Wire

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
OP = AclOperation
TIMEOUT = 30
BROKER_ID = "1"  # the test broker's node.id
LITERAL = ResourcePatternType.LITERAL
_BROKER_TYPES = {TOPIC: BrokerResource.TOPIC, CLUSTER: BrokerResource.BROKER, ResourceType.GROUP: BrokerResource.GROUP}


def proxied_admin(proxy: ServerHandle, name: str) -> AdminClient:
    return AdminClient(sasl(proxy_bootstrap(proxy), name, PASSWORD))


def broker_admin(kafka: KafkaBroker) -> AdminClient:
    return AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))


def outcomes(futures: dict[Any, Any]) -> dict[Any, int | None]:
    """Each future's Kafka error code, None for success."""
    codes: dict[Any, int | None] = {}
    for key, future in futures.items():
        try:
            future.result(TIMEOUT)
            codes[key] = None
        except KafkaException as e:
            codes[key] = e.args[0].code()
    return codes


def broker_topics(kafka: KafkaBroker) -> dict[str, int]:
    """Topic → partition count, as the broker itself lists them."""
    metadata = broker_admin(kafka).list_topics(timeout=TIMEOUT)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def topic_config(kafka: KafkaBroker, topic: str, key: str) -> str | None:
    resource = ConfigResource(ConfigType.TOPIC, topic)
    admin = broker_admin(kafka)
    [future] = admin.describe_configs([resource]).values()
    entry = future.result(TIMEOUT).get(key)
    return None if entry is None else entry.value


def wire_login(proxy: ServerHandle, name: str) -> Wire:
    wire = Wire(proxy.sasl, timeout=TIMEOUT)
    wire.login(name, PASSWORD)
    return wire


# ------------------------------------------------------------------------------------------------ CreateTopics


def test_cluster_create_lets_a_client_create_any_topic(proxy: ServerHandle, kafka: KafkaBroker):
    first, second = unique("made"), unique("made")
    name = user(proxy)
    grant(proxy, f"User:{name}", CLUSTER, CLUSTER_NAME, OP.CREATE)
    admin = proxied_admin(proxy, name)
    futures = admin.create_topics([NewTopic(first, 2, 1), NewTopic(second, 1, 1)])
    assert outcomes(futures) == {first: None, second: None}
    topics = broker_topics(kafka)
    assert topics[first] == 2 and topics[second] == 1


def test_create_on_one_topic_creates_only_that_one(proxy: ServerHandle, kafka: KafkaBroker):
    allowed, denied = unique("mine"), unique("theirs")
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, allowed, OP.CREATE)
    admin = proxied_admin(proxy, name)
    futures = admin.create_topics([NewTopic(allowed, 1, 1), NewTopic(denied, 1, 1)])
    assert outcomes(futures) == {allowed: None, denied: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    topics = broker_topics(kafka)
    assert allowed in topics
    assert denied not in topics
    audit = [
        r for r in proxy.audit_records() if r.get("principal") == f"User:{name}" and r.get("api") == "CreateTopics"
    ]
    assert {r["decision"] for r in audit} == {"ALLOWED", "DENIED"}


def test_without_create_nothing_is_created(proxy: ServerHandle, kafka: KafkaBroker):
    topic = unique("nope")
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, topic, OP.DESCRIBE, OP.DESCRIBE_CONFIGS)  # not CREATE
    admin = proxied_admin(proxy, name)
    futures = admin.create_topics([NewTopic(topic, 1, 1)])
    assert outcomes(futures) == {topic: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert topic not in broker_topics(kafka)


def _create_v7(wire: Wire, *names: str) -> dict[str, Any]:
    request = CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=TopicName(n), num_partitions=i32(2), replication_factor=i16(1), assignments=(),
                configs=(CreatableTopicConfig(name="retention.ms", value="123456"),),
            )
            for n in names
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=TIMEOUT)),
        validate_only=False,
    )  # fmt: skip
    return {t.name: t for t in wire.request(request).topics}


def test_created_topic_configs_are_shown_only_with_describe_configs(proxy: ServerHandle, kafka: KafkaBroker):
    seen, hidden, refused = unique("seen"), unique("hidden"), unique("refused")
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, seen, OP.CREATE, OP.DESCRIBE_CONFIGS)
    grant(proxy, f"User:{name}", TOPIC, hidden, OP.CREATE)
    wire = wire_login(proxy, name)
    try:
        results = _create_v7(wire, seen, hidden, refused)
    finally:
        wire.close()
    assert results[seen].error_code == ErrorCode.none
    assert results[seen].num_partitions == 2
    assert ("retention.ms", "123456") in {(c.name, c.value) for c in results[seen].configs}
    # created, but its configs are not the caller's to see (as Kafka answers)
    assert results[hidden].error_code == ErrorCode.none
    assert results[hidden].topic_config_error_code == ErrorCode.topic_authorization_failed
    assert (results[hidden].num_partitions, results[hidden].replication_factor) == (-1, -1)
    assert results[hidden].configs == ()
    assert results[refused].error_code == ErrorCode.topic_authorization_failed
    assert results[refused].error_message == "Authorization failed."
    topics = broker_topics(kafka)
    assert topics.get(seen) == 2 and topics.get(hidden) == 2 and refused not in topics
    assert topic_config(kafka, hidden, "retention.ms") == "123456"


# ------------------------------------------------------------------------------------------------ DeleteTopics


def test_delete_topics_needs_describe_and_delete_per_topic(proxy: ServerHandle, kafka: KafkaBroker):
    gone, kept, unseen, missing = unique("gone"), unique("kept"), unique("unseen"), unique("missing")
    create_topics(kafka, gone, kept, unseen)
    name = user(proxy)
    principal = f"User:{name}"
    grant(proxy, principal, TOPIC, gone, OP.DESCRIBE, OP.DELETE)
    grant(proxy, principal, TOPIC, kept, OP.DESCRIBE)
    grant(proxy, principal, TOPIC, missing, OP.DESCRIBE)
    admin = proxied_admin(proxy, name)
    futures = admin.delete_topics([gone, kept, unseen, missing], operation_timeout=TIMEOUT)
    assert outcomes(futures) == {
        gone: None,
        kept: KafkaError.TOPIC_AUTHORIZATION_FAILED,
        unseen: KafkaError.TOPIC_AUTHORIZATION_FAILED,
        missing: KafkaError.UNKNOWN_TOPIC_OR_PART,  # may describe it, and it does not exist: Kafka says so
    }
    topics = broker_topics(kafka)
    assert gone not in topics
    assert kept in topics and unseen in topics


def test_an_unseen_missing_topic_is_not_revealed_as_missing(proxy: ServerHandle, kafka: KafkaBroker):
    missing = unique("ghost")
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, missing, OP.CREATE)  # no DESCRIBE (DELETE would imply it)
    admin = proxied_admin(proxy, name)
    futures = admin.delete_topics([missing], operation_timeout=TIMEOUT)
    assert outcomes(futures) == {missing: KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_cluster_delete_deletes_any_topic(proxy: ServerHandle, kafka: KafkaBroker):
    first, second = unique("doomed"), unique("doomed")
    create_topics(kafka, first, second)
    name = user(proxy)
    grant(proxy, f"User:{name}", CLUSTER, CLUSTER_NAME, OP.DELETE)
    admin = proxied_admin(proxy, name)
    futures = admin.delete_topics([first, second], operation_timeout=TIMEOUT)
    assert outcomes(futures) == {first: None, second: None}
    topics = broker_topics(kafka)
    assert first not in topics and second not in topics


# -------------------------------------------------------------------------------------------- CreatePartitions


def test_create_partitions_needs_alter_on_the_topic(proxy: ServerHandle, kafka: KafkaBroker):
    grown, fixed = unique("grown"), unique("fixed")
    create_topics(kafka, grown, fixed)
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, grown, OP.ALTER)
    grant(proxy, f"User:{name}", TOPIC, fixed, OP.DESCRIBE)
    admin = proxied_admin(proxy, name)
    futures = admin.create_partitions([NewPartitions(grown, 3), NewPartitions(fixed, 3)])
    assert outcomes(futures) == {grown: None, fixed: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    topics = broker_topics(kafka)
    assert topics[grown] == 3
    assert topics[fixed] == 1


# ----------------------------------------------------------------------------------------------- DeleteRecords


def _fill(kafka: KafkaBroker, topic: str, count: int) -> None:
    producer = Producer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    for i in range(count):
        producer.produce(topic, f"r{i}".encode())
    assert producer.flush(TIMEOUT) == 0


def _low_watermark(kafka: KafkaBroker, topic: str) -> int:
    consumer = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": unique("watermarks")}))
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    finally:
        consumer.close()
    return int(low)


def test_delete_records_needs_delete_on_the_topic(proxy: ServerHandle, kafka: KafkaBroker):
    trimmed, intact = unique("trimmed"), unique("intact")
    create_topics(kafka, trimmed, intact)
    _fill(kafka, trimmed, 5)
    _fill(kafka, intact, 5)
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, trimmed, OP.DELETE, OP.DESCRIBE)
    grant(proxy, f"User:{name}", TOPIC, intact, OP.DESCRIBE)
    admin = proxied_admin(proxy, name)
    futures = admin.delete_records([TopicPartition(trimmed, 0, 3), TopicPartition(intact, 0, 3)])
    codes = {tp.topic: code for tp, code in outcomes(futures).items()}
    assert codes == {trimmed: None, intact: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert _low_watermark(kafka, trimmed) == 3
    assert _low_watermark(kafka, intact) == 0


# ---------------------------------------------------------------------------------------------------- Configs


def test_describe_configs_per_topic_and_cluster(proxy: ServerHandle, kafka: KafkaBroker):
    readable, secret = unique("readable"), unique("secret")
    create_topics(kafka, readable, secret)
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, readable, OP.DESCRIBE_CONFIGS)
    grant(proxy, f"User:{name}", TOPIC, secret, OP.DESCRIBE)
    admin = proxied_admin(proxy, name)
    topic_resources = [ConfigResource(ConfigType.TOPIC, readable), ConfigResource(ConfigType.TOPIC, secret)]
    futures = admin.describe_configs(topic_resources)
    assert "retention.ms" in futures[topic_resources[0]].result(TIMEOUT)
    with pytest.raises(KafkaException) as refused:
        futures[topic_resources[1]].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker = ConfigResource(ConfigType.BROKER, BROKER_ID)
    with pytest.raises(KafkaException) as denied:
        admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(proxy, f"User:{name}", CLUSTER, CLUSTER_NAME, OP.DESCRIBE_CONFIGS)
    configs = admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert configs["num.partitions"].value == "1"


def test_incremental_alter_configs_needs_alter_configs(proxy: ServerHandle, kafka: KafkaBroker):
    tuned, locked = unique("tuned"), unique("locked")
    create_topics(kafka, tuned, locked)
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, tuned, OP.ALTER_CONFIGS)
    grant(proxy, f"User:{name}", TOPIC, locked, OP.DESCRIBE_CONFIGS)
    admin = proxied_admin(proxy, name)

    def retention(topic: str) -> ConfigResource:
        entry = ConfigEntry("retention.ms", "654321", incremental_operation=AlterConfigOpType.SET)
        return ConfigResource(ConfigType.TOPIC, topic, incremental_configs=[entry])

    resources = [retention(tuned), retention(locked)]
    codes = outcomes(admin.incremental_alter_configs(resources))
    assert codes == {resources[0]: None, resources[1]: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert topic_config(kafka, tuned, "retention.ms") == "654321"
    assert topic_config(kafka, locked, "retention.ms") != "654321"
    # a broker's config needs ALTER_CONFIGS on the cluster
    entry = ConfigEntry("log.cleaner.backoff.ms", "15001", incremental_operation=AlterConfigOpType.SET)
    broker = ConfigResource(ConfigType.BROKER, BROKER_ID, incremental_configs=[entry])
    assert outcomes(admin.incremental_alter_configs([broker], validate_only=True)) == {
        broker: KafkaError.CLUSTER_AUTHORIZATION_FAILED
    }
    grant(proxy, f"User:{name}", CLUSTER, CLUSTER_NAME, OP.ALTER_CONFIGS)
    assert outcomes(admin.incremental_alter_configs([broker], validate_only=True)) == {broker: None}


def test_legacy_alter_configs_needs_alter_configs(proxy: ServerHandle, kafka: KafkaBroker):
    tuned, locked = unique("tuned"), unique("locked")
    create_topics(kafka, tuned, locked)
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, tuned, OP.ALTER_CONFIGS)
    admin = proxied_admin(proxy, name)
    resources = [ConfigResource(ConfigType.TOPIC, t, set_config={"retention.ms": "765432"}) for t in (tuned, locked)]
    with pytest.warns(DeprecationWarning):  # confluent-kafka deprecates AlterConfigs; the broker still serves it
        futures = admin.alter_configs(resources)
    codes = outcomes(futures)
    assert codes == {resources[0]: None, resources[1]: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert topic_config(kafka, tuned, "retention.ms") == "765432"
    assert topic_config(kafka, locked, "retention.ms") != "765432"


# ---------------------------------------------------------------------------------------- OffsetForLeaderEpoch


def _epochs(wire: Wire, replica_id: int, *topics: str) -> dict[str, Any]:
    request = OffsetForLeaderEpochRequest(
        replica_id=BrokerId(replica_id),
        topics=tuple(
            OffsetForLeaderTopic(
                topic=TopicName(t),
                partitions=(OffsetForLeaderPartition(partition=i32(0), current_leader_epoch=i32(-1),
                                                     leader_epoch=i32(0)),),
            )
            for t in topics
        ),
    )  # fmt: skip
    return {t.topic: t.partitions[0] for t in wire.request(request).topics}


def test_offset_for_leader_epoch_needs_describe_and_never_serves_followers(proxy: ServerHandle, kafka: KafkaBroker):
    known, hidden = unique("epoch"), unique("epoch")
    create_topics(kafka, known, hidden)
    _fill(kafka, known, 2)
    name = user(proxy)
    grant(proxy, f"User:{name}", TOPIC, known, OP.DESCRIBE)
    wire = wire_login(proxy, name)
    try:
        consumer = _epochs(wire, -1, known, hidden)
        follower = _epochs(wire, 1, known)
    finally:
        wire.close()
    assert consumer[known].error_code == ErrorCode.none and consumer[known].end_offset == 2
    assert consumer[hidden].error_code == ErrorCode.topic_authorization_failed
    assert (consumer[hidden].leader_epoch, consumer[hidden].end_offset) == (-1, -1)
    assert follower[known].error_code == ErrorCode.cluster_authorization_failed


# ------------------------------------------------------------------------------- the same answers as Kafka itself


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a comparison: the broker itself (its own ACLs decide) or the proxy (kafkaguard's ACLs decide),
    each with its own resource names (``token`` in them) and its own user."""

    label: str
    address: tuple[str, int]
    token: str
    user: str

    def name(self, base: str) -> str:
        return f"{self.token}-{base}"


def broker_side(kafka: KafkaBroker, acls: list[tuple[ResourceType, str, AclOperation]]) -> Side:
    """A user on the broker itself with ``acls`` (names without the side's token), once the broker applies them."""
    side = Side("broker", (LOOPBACK, kafka.port), unique("k"), unique("kafka-user"))
    admin = broker_admin(kafka)
    upsert = UserScramCredentialUpsertion(
        side.user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT)
    principal = f"User:{side.user}"
    bindings = [
        BrokerAcl(_BROKER_TYPES[rtype], CLUSTER_NAME if rtype is CLUSTER else side.name(name), LITERAL, principal,
                  "*", BrokerOp[op.name], AclPermissionType.ALLOW)
        for rtype, name, op in acls
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT)
    anyone: Any = None
    mine = AclBindingFilter(BrokerResource.ANY, anyone, ResourcePatternType.ANY, principal, anyone, BrokerOp.ANY,
                            AclPermissionType.ANY)  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    while len(admin.describe_acls(mine).result(TIMEOUT)) < len(bindings):
        assert time.monotonic() < deadline, "the broker never applied the ACLs"
        time.sleep(0.2)  # polling the broker's metadata propagation, bounded by the deadline
    return side


def proxy_side(proxy: ServerHandle, acls: list[tuple[ResourceType, str, AclOperation]]) -> Side:
    side = Side("proxy", proxy.sasl, unique("p"), user(proxy))
    for rtype, name, op in acls:
        grant(proxy, f"User:{side.user}", rtype, CLUSTER_NAME if rtype is CLUSTER else side.name(name), op)
    return side


def both_sides(
    proxy: ServerHandle, kafka: KafkaBroker, acls: list[tuple[ResourceType, str, AclOperation]]
) -> tuple[Side, Side]:
    return broker_side(kafka, acls), proxy_side(proxy, acls)


def answer(side: Side, request: Any) -> Any:
    """The side's answer to ``request``, as plain data with the side's token replaced and the topic ids (which
    differ per topic) left out; lists of results sorted, so that order does not count. A partition of a topic just
    created may not have its leader yet (NOT_LEADER_OR_FOLLOWER): asked again until it has (bounded)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        wire = Wire(side.address, timeout=TIMEOUT)
        try:
            wire.login(side.user, PASSWORD)
            response = wire.request(request)
        finally:
            wire.close()
        plain = _plain(dataclasses.asdict(response), side.token)
        if ErrorCode.not_leader_or_follower not in _error_codes(plain) or time.monotonic() > deadline:
            return plain
        time.sleep(0.2)  # the broker electing the new partition's leader, bounded by the deadline


def _error_codes(value: Any) -> set[Any]:
    if isinstance(value, dict):
        found = {v for k, v in value.items() if k == "error_code"}
        return found.union(*(_error_codes(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_error_codes(v) for v in value))
    return set()


def _plain(value: Any, token: str) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v, token) for k, v in value.items() if k not in {"topic_id", "throttle_time"}}
    if isinstance(value, (list, tuple)):
        items = [_plain(v, token) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, str):
        return value.replace(token, "T")
    return value


TOPIC_ACLS = [
    (TOPIC, "new-seen", OP.CREATE),
    (TOPIC, "new-seen", OP.DESCRIBE_CONFIGS),
    (TOPIC, "new-hidden", OP.CREATE),
    (TOPIC, "kept", OP.DESCRIBE),
    (TOPIC, "missing", OP.DESCRIBE),
    (TOPIC, "alterable", OP.ALTER),
    (TOPIC, "alterable", OP.ALTER_CONFIGS),
    (TOPIC, "readable", OP.DESCRIBE_CONFIGS),
    (TOPIC, "readable", OP.DESCRIBE),
]


def _topic_requests(side: Side) -> dict[str, Any]:
    n = side.name
    timeout = i32Timedelta.parse(timedelta(seconds=TIMEOUT))
    new = [n("new-seen"), n("new-hidden"), n("new-refused"), n("twice"), n("twice")]
    retention = ("retention.ms", "86400000")
    broker = (4, BROKER_ID)
    return {
        "CreateTopics": CreateTopicsRequest(
            topics=tuple(
                CreatableTopic(
                    name=TopicName(t), num_partitions=i32(1), replication_factor=i16(1), assignments=(), configs=()
                )
                for t in new
            ),
            timeout=timeout,
            validate_only=False,
        ),
        "CreateTopics-internal": CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=TopicName("__cluster_metadata"),
                    num_partitions=i32(1),
                    replication_factor=i16(1),
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=timeout,
            validate_only=True,
        ),
        "DeleteTopics": DeleteTopicsRequest(
            topic_names=tuple(TopicName(t) for t in (n("kept"), n("missing"), n("secret"), n("dup"), n("dup"))),
            timeout=timeout,
        ),
        "CreatePartitions": CreatePartitionsRequest(
            topics=tuple(
                CreatePartitionsTopic(name=TopicName(t), count=i32(2), assignments=None)
                for t in (n("alterable"), n("kept"), n("secret"))
            ),
            timeout=timeout,
            validate_only=True,
        ),
        "DeleteRecords": DeleteRecordsRequest(
            topics=tuple(
                DeleteRecordsTopic(
                    name=TopicName(t), partitions=(DeleteRecordsPartition(partition_index=i32(0), offset=i64(0)),)
                )
                for t in (n("kept"), n("secret"))
            ),
            timeout=timeout,
        ),
        "DescribeConfigs": DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(
                    resource_type=i8(kind), resource_name=name, configuration_keys=("retention.ms", "num.partitions")
                )
                for kind, name in ((2, n("readable")), (2, n("secret")), broker)
            ),
            include_synonyms=False,
            include_documentation=False,
        ),
        "AlterConfigs": AlterConfigsRequest(
            resources=tuple(
                AlterConfigsResource(
                    resource_type=i8(kind),
                    resource_name=name,
                    configs=(AlterableConfig(name=retention[0], value=retention[1]),),
                )
                for kind, name in ((2, n("alterable")), (2, n("secret")), broker)
            ),
            validate_only=True,
        ),
        "IncrementalAlterConfigs": IncrementalAlterConfigsRequest(
            resources=tuple(
                IncrementalConfigsResource(
                    resource_type=i8(kind),
                    resource_name=name,
                    configs=(IncrementalConfig(name=retention[0], config_operation=i8(0), value=retention[1]),),
                )
                for kind, name in ((2, n("alterable")), (2, n("secret")), broker)
            ),
            validate_only=True,
        ),
        "DescribeConfigs-unknown-type": DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(resource_type=i8(kind), resource_name=name, configuration_keys=None)
                for kind, name in ((2, n("readable")), (99, n("odd")))
            ),
            include_synonyms=False,
            include_documentation=False,
        ),
        "IncrementalAlterConfigs-unknown-type": IncrementalAlterConfigsRequest(
            resources=tuple(
                IncrementalConfigsResource(resource_type=i8(kind), resource_name=name, configs=())
                for kind, name in ((2, n("alterable")), (99, n("odd")))
            ),
            validate_only=True,
        ),
        "DescribeConfigs-other-types": DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(resource_type=i8(kind), resource_name=name, configuration_keys=None)
                for kind, name in ((8, BROKER_ID), (16, n("metrics")))
            ),
            include_synonyms=False,
            include_documentation=False,
        ),
        "IncrementalAlterConfigs-other-types": IncrementalAlterConfigsRequest(
            resources=tuple(
                IncrementalConfigsResource(resource_type=i8(kind), resource_name=name, configs=())
                for kind, name in ((8, BROKER_ID), (16, n("metrics")), (32, n("group")))
            ),
            validate_only=True,
        ),
        "AlterConfigs-other-types": AlterConfigsRequest(
            resources=tuple(
                AlterConfigsResource(resource_type=i8(kind), resource_name=name, configs=())
                for kind, name in ((8, BROKER_ID), (16, n("metrics")), (32, n("group")))
            ),
            validate_only=True,
        ),
        "AlterConfigs-unknown-type": AlterConfigsRequest(
            resources=tuple(
                AlterConfigsResource(resource_type=i8(kind), resource_name=name, configs=())
                for kind, name in ((2, n("alterable")), (99, n("odd")))
            ),
            validate_only=True,
        ),
        "OffsetForLeaderEpoch": OffsetForLeaderEpochRequest(
            replica_id=BrokerId(-1),
            topics=tuple(
                OffsetForLeaderTopic(
                    topic=TopicName(t),
                    partitions=(
                        OffsetForLeaderPartition(partition=i32(0), current_leader_epoch=i32(-1), leader_epoch=i32(0)),
                    ),
                )
                for t in (n("readable"), n("secret"))
            ),
        ),
    }


@pytest.mark.parametrize("api", list(_topic_requests(Side("", ("", 0), "x", "")).keys()))
def test_refusals_are_kafkas_own(proxy: ServerHandle, kafka: KafkaBroker, api: str):
    """The same request by users with the same ACLs, on the broker and through the proxy: the same answer."""
    kafka_side, proxy_side_ = both_sides(proxy, kafka, TOPIC_ACLS)
    answers = []
    for side in (kafka_side, proxy_side_):
        create_topics(kafka, *(side.name(t) for t in ("kept", "alterable", "readable", "secret")))
        answers.append(answer(side, _topic_requests(side)[api]))
    assert answers[1] == answers[0]

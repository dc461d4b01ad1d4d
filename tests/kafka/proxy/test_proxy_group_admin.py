"""The group administration APIs through ``kafkaguard proxy`` to a real Kafka broker: DescribeGroups, ListGroups,
DeleteGroups (confluent-kafka's AdminClient) and OffsetDelete (kafka-python's KafkaAdminClient; confluent-kafka has
no call for it).

A client finds a group's coordinator first (FindCoordinator: DESCRIBE on the group), so a group the caller may not
describe is refused there, before DescribeGroups; the DescribeGroups refusal itself is checked with a raw request
(``tests/wire.py``). Effects are checked on the broker itself, as its admin.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclOperation as ClientOp
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from kafkaguard.model import CLUSTER_NAME, AclOperation, ResourceType
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.test_proxy_admin import Side, answer, both_sides
from tests.kafka.proxy.test_proxy_clients import PASSWORD, create_topics, grant, proxy_bootstrap, sasl, unique, user
from tests.serving import ServerHandle
from tests.wire import Wire

with warnings.catch_warnings():  # kafka-python loads its schemas with the deprecated importlib.resources calls
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.errors import (  # type: ignore[import-untyped]
        GroupAuthorizationFailedError,
        NoError,
        TopicAuthorizationFailedError,
    )

pytestmark = pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning")

GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
OP = AclOperation
TIMEOUT = 30
#: Kafka's OPERATIONS_NOT_REQUESTED / AUTHORIZED_OPERATIONS_OMITTED.
OMITTED = -(2**31)


def commit(kafka: KafkaBroker, group: str, offsets: dict[str, int]) -> None:
    """Give ``group`` committed offsets (partition 0 of each topic), straight on the broker as its admin; the group
    is left without members (Empty)."""
    consumer = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": group}))
    try:
        consumer.commit(offsets=[TopicPartition(t, 0, o) for t, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(kafka: KafkaBroker, group: str, topic: str) -> int:
    """The group's committed offset on partition 0 of ``topic``, read on the broker (-1001: none)."""
    consumer = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": group}))
    try:
        [found] = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
    finally:
        consumer.close()
    return int(found.offset)


def broker_groups(kafka: KafkaBroker) -> set[str]:
    admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    result = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    return {listing.group_id for listing in result.valid}


def outcomes(futures: dict[str, Any]) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for key, future in futures.items():
        try:
            future.result(TIMEOUT)
            codes[key] = None
        except KafkaException as e:
            codes[key] = e.args[0].code()
    return codes


# ---------------------------------------------------------------------------------------------- DescribeGroups


def test_describe_groups_answers_allowed_groups_with_the_callers_operations(proxy: ServerHandle, kafka: KafkaBroker):
    topic, seen = unique("described"), unique("seen")
    create_topics(kafka, topic)
    commit(kafka, seen, {topic: 4})
    name = user(proxy)
    grant(proxy, f"User:{name}", GROUP, seen, OP.DESCRIBE, OP.DELETE)
    admin = AdminClient(sasl(proxy_bootstrap(proxy), name, PASSWORD))
    futures = admin.describe_consumer_groups([seen], include_authorized_operations=True, request_timeout=TIMEOUT)
    description = futures[seen].result(TIMEOUT)
    assert description.group_id == seen
    # the caller's operations under kafkaguard's ACLs, not the proxy's own (a super user: every group operation)
    assert set(description.authorized_operations) == {ClientOp.DESCRIBE, ClientOp.DELETE}


def test_describe_groups_refuses_a_group_without_describe(proxy: ServerHandle, kafka: KafkaBroker):
    topic, seen, hidden = unique("described"), unique("seen"), unique("hidden")
    create_topics(kafka, topic)
    commit(kafka, seen, {topic: 1})
    commit(kafka, hidden, {topic: 2})
    name = user(proxy)
    grant(proxy, f"User:{name}", GROUP, seen, OP.DESCRIBE)
    wire = Wire(proxy.sasl, timeout=TIMEOUT)
    try:
        wire.login(name, PASSWORD)
        request = DescribeGroupsRequest(groups=(GroupId(seen), GroupId(hidden)), include_authorized_operations=True)
        groups = {g.group_id: g for g in wire.request(request).groups}
    finally:
        wire.close()
    assert groups[seen].error_code == ErrorCode.none
    assert groups[seen].group_state == "Empty"
    assert groups[seen].authorized_operations == 1 << OP.DESCRIBE.code
    refused = groups[hidden]
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert (refused.group_state, refused.protocol_type, refused.protocol_data, refused.members) == ("", "", "", ())
    assert refused.authorized_operations == OMITTED
    audit = [
        r for r in proxy.audit_records() if r.get("principal") == f"User:{name}" and r.get("api") == "DescribeGroups"
    ]
    assert {(r["resource_name"], r["decision"]) for r in audit} >= {(seen, "ALLOWED"), (hidden, "DENIED")}


# ------------------------------------------------------------------------------------------------- ListGroups


def test_list_groups_shows_only_describable_groups_unless_cluster_describe(proxy: ServerHandle, kafka: KafkaBroker):
    topic, seen, hidden = unique("listed"), unique("seen"), unique("hidden")
    create_topics(kafka, topic)
    commit(kafka, seen, {topic: 1})
    commit(kafka, hidden, {topic: 1})
    name = user(proxy)
    grant(proxy, f"User:{name}", GROUP, seen, OP.DESCRIBE)
    admin = AdminClient(sasl(proxy_bootstrap(proxy), name, PASSWORD))

    def listed() -> set[str]:
        result = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        assert result.errors == []
        return {listing.group_id for listing in result.valid}

    visible = listed()
    assert seen in visible
    assert hidden not in visible
    assert {seen, hidden} <= broker_groups(kafka)  # both exist
    grant(proxy, f"User:{name}", CLUSTER, CLUSTER_NAME, OP.DESCRIBE)
    assert {seen, hidden} <= listed()


# ------------------------------------------------------------------------------------------------ DeleteGroups


def test_delete_groups_needs_delete_on_the_group(proxy: ServerHandle, kafka: KafkaBroker):
    topic, doomed, kept = unique("grouped"), unique("doomed"), unique("kept")
    create_topics(kafka, topic)
    commit(kafka, doomed, {topic: 3})
    commit(kafka, kept, {topic: 3})
    name = user(proxy)
    grant(proxy, f"User:{name}", GROUP, doomed, OP.DELETE)  # implies DESCRIBE (FindCoordinator)
    grant(proxy, f"User:{name}", GROUP, kept, OP.DESCRIBE)  # finds the coordinator, may not delete
    admin = AdminClient(sasl(proxy_bootstrap(proxy), name, PASSWORD))
    futures = admin.delete_consumer_groups([doomed, kept], request_timeout=TIMEOUT)
    assert outcomes(futures) == {doomed: None, kept: KafkaError.GROUP_AUTHORIZATION_FAILED}
    groups = broker_groups(kafka)
    assert doomed not in groups
    assert kept in groups
    assert committed(kafka, kept, topic) == 3


# ------------------------------------------------------------------------------------------------ OffsetDelete


def kafka_python_admin(proxy: ServerHandle, name: str) -> Any:
    return KafkaAdminClient(
        bootstrap_servers=proxy_bootstrap(proxy),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=name,
        sasl_plain_password=PASSWORD,
        request_timeout_ms=TIMEOUT * 1000,
    )


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(proxy: ServerHandle, kafka: KafkaBroker):
    readable, unreadable, group = unique("readable"), unique("unreadable"), unique("offsets")
    create_topics(kafka, readable, unreadable)
    commit(kafka, group, {readable: 5, unreadable: 6})
    name = user(proxy)
    grant(proxy, f"User:{name}", GROUP, group, OP.DELETE)
    grant(proxy, f"User:{name}", TOPIC, readable, OP.READ)
    admin = kafka_python_admin(proxy, name)
    try:
        results = admin.delete_group_offsets(
            group, [KafkaPythonPartition(readable, 0), KafkaPythonPartition(unreadable, 0)]
        )
    finally:
        admin.close()
    assert results == {
        KafkaPythonPartition(readable, 0): NoError,
        KafkaPythonPartition(unreadable, 0): TopicAuthorizationFailedError,
    }
    assert committed(kafka, group, readable) == -1001  # deleted on the broker
    assert committed(kafka, group, unreadable) == 6


def test_offset_delete_without_delete_on_the_group_is_refused_whole(proxy: ServerHandle, kafka: KafkaBroker):
    topic, group = unique("readable"), unique("offsets")
    create_topics(kafka, topic)
    commit(kafka, group, {topic: 5})
    name = user(proxy)
    grant(proxy, f"User:{name}", GROUP, group, OP.DESCRIBE, OP.READ)  # finds the coordinator; no DELETE
    grant(proxy, f"User:{name}", TOPIC, topic, OP.READ)
    admin = kafka_python_admin(proxy, name)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            admin.delete_group_offsets(group, [KafkaPythonPartition(topic, 0)])
    finally:
        admin.close()
    assert committed(kafka, group, topic) == 5


# ------------------------------------------------------------------------------- the same answers as Kafka itself

GROUP_ACLS = [
    (GROUP, "seen", OP.DESCRIBE),
    (GROUP, "deletable", OP.DELETE),
    (GROUP, "offsets", OP.DELETE),
    (TOPIC, "readable", OP.READ),
]


def _group_requests(side: Side) -> dict[str, Any]:
    n = side.name

    def offset_delete(group: str) -> OffsetDeleteRequest:
        topics = tuple(
            OffsetDeleteRequestTopic(
                name=TopicName(n(t)), partitions=(OffsetDeleteRequestPartition(partition_index=i32(0)),)
            )
            for t in ("readable", "secret")
        )
        return OffsetDeleteRequest(group_id=GroupId(n(group)), topics=topics)

    return {
        "DescribeGroups": DescribeGroupsRequest(
            groups=(GroupId(n("seen")), GroupId(n("hidden"))), include_authorized_operations=True
        ),
        "DeleteGroups": DeleteGroupsRequest(groups_names=tuple(GroupId(n(g)) for g in ("seen", "deletable", "hidden"))),
        "OffsetDelete-refused-group": offset_delete("seen"),
        "OffsetDelete-missing-group": offset_delete("deletable"),
        "OffsetDelete-per-topic": offset_delete("offsets"),
    }


@pytest.mark.parametrize("api", list(_group_requests(Side("", ("", 0), "x", "")).keys()))
def test_refusals_are_kafkas_own(proxy: ServerHandle, kafka: KafkaBroker, api: str):
    """The same request by users with the same ACLs, on the broker and through the proxy: the same answer."""
    answers = []
    for side in both_sides(proxy, kafka, GROUP_ACLS):
        create_topics(kafka, side.name("readable"), side.name("secret"))
        commit(kafka, side.name("offsets"), {side.name("readable"): 3, side.name("secret"): 4})
        answers.append(answer(side, _group_requests(side)[api]))
    assert answers[1] == answers[0]

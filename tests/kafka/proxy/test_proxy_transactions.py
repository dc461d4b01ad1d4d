"""Transactions and idempotence through ``kafkaguard proxy`` to a real Kafka broker, authorized as ``KafkaApis``.

confluent-kafka drives the client flows (a transactional producer, ``send_offsets_to_transaction``, an idempotent
producer); its consumers read with librdkafka's default ``isolation.level=read_committed``. The per-item answers
Kafka gives (OPERATION_NOT_ATTEMPTED beside a refused topic, partial TxnOffsetCommit, the DescribeProducers /
DescribeTransactions / ListTransactions filters) are checked with raw requests (``tests/wire.py``), since no client
installed here exposes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding as BrokerAcl
from confluent_kafka.admin._acl import AclOperation as BrokerOp
from confluent_kafka.admin._acl import AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType
from confluent_kafka.admin._resource import ResourceType as BrokerResource
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.handlers.transactions import decode_describe_transactions
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.test_proxy_clients import (
    PASSWORD,
    consume,
    create_topics,
    grant,
    produce,
    proxy_bootstrap,
    sasl,
    unique,
    user,
)
from tests.serving import ServerHandle
from tests.wire import Wire, encode_request

TXN, TOPIC, GROUP, CLUSTER = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TIMEOUT = 30
LITERAL, ALLOW = ResourcePatternType.LITERAL, AclPermissionType.ALLOW


def transactional_producer(proxy: ServerHandle, name: str, transactional_id: str) -> Producer:
    return Producer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"transactional.id": transactional_id,
                         "transaction.timeout.ms": 60_000}))  # fmt: skip


def committed_offset(kafka: KafkaBroker, group: str, topic: str, partition: int = 0) -> int:
    """The group's committed offset, read straight on the broker as its admin (-1001: none)."""
    admin = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": group}))
    try:
        [committed] = admin.committed([TopicPartition(topic, partition)], timeout=TIMEOUT)
    finally:
        admin.close()
    return int(committed.offset)


def produce_on_broker(kafka: KafkaBroker, topic: str, *values: bytes, **extra: Any) -> None:
    producer = Producer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **extra))
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0


def audited(proxy: ServerHandle, name: str, api: str) -> list[dict[str, Any]]:
    return [r for r in proxy.audit_records() if r.get("principal") == f"User:{name}" and r.get("api") == api]


# ------------------------------------------------------------------------------------ confluent-kafka clients


def test_a_transactional_producer_commits_and_a_read_committed_consumer_sees_only_the_commit(
    proxy: ServerHandle, kafka: KafkaBroker
):
    topic, group, txn = unique("ledger"), unique("auditors"), unique("txn")
    create_topics(kafka, topic)
    name = user(proxy)
    grant(proxy, f"User:{name}", TXN, txn, WRITE)
    grant(proxy, f"User:{name}", TOPIC, topic, WRITE, READ)
    grant(proxy, f"User:{name}", GROUP, group, READ)
    producer = transactional_producer(proxy, name, txn)
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"aborted{i}".encode())
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    producer.commit_transaction(TIMEOUT)
    # the aborted records come first in the log: a read_committed consumer skips them
    assert consume(proxy, name, topic, group, 5) == [f"m{i}".encode() for i in range(5)]
    api_names = {r["api"] for r in proxy.audit_records() if r.get("principal") == f"User:{name}"}
    assert {"InitProducerId", "AddPartitionsToTxn", "EndTxn", "Produce"} <= api_names


def test_init_transactions_without_write_on_the_transactional_id_is_refused(proxy: ServerHandle, kafka: KafkaBroker):
    topic = unique("ledger")
    create_topics(kafka, topic)
    nobody, describer = user(proxy), user(proxy)
    txn_a, txn_b = unique("txn"), unique("txn")
    grant(proxy, f"User:{describer}", TXN, txn_b, DESCRIBE)  # finds its coordinator, may not write
    for name, txn in ((nobody, txn_a), (describer, txn_b)):
        grant(proxy, f"User:{name}", TOPIC, topic, WRITE)
        producer = transactional_producer(proxy, name, txn)
        with pytest.raises(KafkaException) as refused:
            producer.init_transactions(TIMEOUT)
        assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # the describer got as far as InitProducerId, refused there (by the proxy: the broker never saw it)
    assert {r["decision"] for r in audited(proxy, describer, "InitProducerId")} == {"DENIED"}
    assert audited(proxy, nobody, "InitProducerId") == []  # refused at FindCoordinator already


def failing_transaction(bootstrap: str, name: str, txn: str, topic: str) -> tuple[KafkaError, KafkaError | None]:
    """A transaction writing ``topic``: the error of its commit, then the error of its abort (None: aborted)."""
    producer = Producer(sasl(bootstrap, name, PASSWORD, **{"transactional.id": txn}))
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(topic, b"forbidden")
    with pytest.raises(KafkaException) as failed:
        producer.commit_transaction(TIMEOUT)
    try:
        producer.abort_transaction(TIMEOUT)
    except KafkaException as e:
        return failed.value.args[0], e.args[0]
    return failed.value.args[0], None


def broker_user(kafka: KafkaBroker, txn: str, topic: str) -> str:
    """A SCRAM user of the broker itself with the broker's ACLs WRITE on ``txn`` and DESCRIBE on ``topic``."""
    name = unique("direct")
    admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upserts = [UserScramCredentialUpsertion(name, credential, PASSWORD.encode())]
    for future in admin.alter_user_scram_credentials(upserts).values():  # type: ignore[arg-type]
        future.result(TIMEOUT)
    acls = [
        BrokerAcl(BrokerResource.TRANSACTIONAL_ID, txn, LITERAL, f"User:{name}", "*", BrokerOp.WRITE, ALLOW),
        BrokerAcl(BrokerResource.TOPIC, topic, LITERAL, f"User:{name}", "*", BrokerOp.DESCRIBE, ALLOW),
    ]
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT)
    return name


def test_a_transaction_on_a_topic_without_write_fails_and_nothing_is_visible(proxy: ServerHandle, kafka: KafkaBroker):
    topic, group, txn = unique("ledger"), unique("auditors"), unique("txn")
    create_topics(kafka, topic)
    name, reader = user(proxy), user(proxy)
    grant(proxy, f"User:{name}", TXN, txn, WRITE)
    grant(proxy, f"User:{name}", TOPIC, topic, DESCRIBE)  # sees the topic, may not write it
    commit, abort = failing_transaction(proxy_bootstrap(proxy), name, txn, topic)
    assert commit.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and commit.txn_requires_abort()
    # librdkafka still sends EndTxn(abort) although no partition joined the transaction, and the coordinator,
    # its transaction Empty, answers INVALID_TXN_STATE: fatal for the producer. The broker itself does the same:
    assert abort is not None and abort.code() == KafkaError.INVALID_TXN_STATE and abort.fatal()
    direct_txn = unique("txn")
    direct = failing_transaction(kafka.bootstrap, broker_user(kafka, direct_txn, topic), direct_txn, topic)
    assert [(e.code(), e.txn_requires_abort(), e.fatal()) if e else None for e in direct] == [
        (e.code(), e.txn_requires_abort(), e.fatal()) if e else None for e in (commit, abort)
    ]
    denied = audited(proxy, name, "AddPartitionsToTxn")
    assert {(r["resource_type"], r["resource_name"], r["decision"]) for r in denied} == {
        ("TRANSACTIONAL_ID", txn, "ALLOWED"),
        ("TOPIC", topic, "DENIED"),
    }
    # only a record written afterwards, outside any transaction, is there to read
    produce_on_broker(kafka, topic, b"sentinel")
    grant(proxy, f"User:{reader}", TOPIC, topic, READ)
    grant(proxy, f"User:{reader}", GROUP, group, READ)
    assert consume(proxy, reader, topic, group, 1) == [b"sentinel"]


@pytest.mark.parametrize("group_read", [True, False], ids=["group-read", "no-group-read"])
def test_send_offsets_to_transaction_needs_read_on_the_group(proxy: ServerHandle, kafka: KafkaBroker, group_read: bool):
    source, sink, group, txn = unique("in"), unique("out"), unique("pipeline"), unique("txn")
    create_topics(kafka, source, sink)
    name = user(proxy)
    grant(proxy, f"User:{name}", TXN, txn, WRITE)
    grant(proxy, f"User:{name}", TOPIC, source, READ)
    grant(proxy, f"User:{name}", TOPIC, sink, WRITE)
    if group_read:
        grant(proxy, f"User:{name}", GROUP, group, READ)
    consumer = Consumer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"group.id": group}))
    producer = transactional_producer(proxy, name, txn)
    try:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.produce(sink, b"derived")
        offsets = [TopicPartition(source, 0, 3)]
        if group_read:
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT)
            producer.commit_transaction(TIMEOUT)
        else:
            with pytest.raises(KafkaException) as refused:
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT)
            assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
            producer.abort_transaction(TIMEOUT)
    finally:
        consumer.close()
    assert committed_offset(kafka, group, source) == (3 if group_read else -1001)
    decisions = {(r["resource_name"], r["decision"]) for r in audited(proxy, name, "AddOffsetsToTxn")}
    assert (group, "ALLOWED" if group_read else "DENIED") in decisions


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(proxy: ServerHandle, kafka: KafkaBroker):
    topic = unique("events")
    create_topics(kafka, topic)
    on_cluster, on_topic, neither = user(proxy), user(proxy), user(proxy)
    grant(proxy, f"User:{on_cluster}", CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
    grant(proxy, f"User:{on_cluster}", TOPIC, topic, WRITE)
    grant(proxy, f"User:{on_topic}", TOPIC, topic, WRITE)  # KIP-679: WRITE on any topic is enough
    grant(proxy, f"User:{neither}", TOPIC, topic, DESCRIBE)
    idempotent = {"enable.idempotence": True, "message.timeout.ms": 15_000}
    assert produce(proxy, on_cluster, topic, 3, **idempotent) == [None] * 3
    assert produce(proxy, on_topic, topic, 3, **idempotent) == [None] * 3
    producer = Producer(sasl(proxy_bootstrap(proxy), neither, PASSWORD, **idempotent))
    producer.produce(topic, b"refused")  # no delivery callback: confluent-kafka would call it with the error set
    with pytest.raises(KafkaException) as refused:  # confluent-kafka raises librdkafka's fatal error
        producer.flush(TIMEOUT)
    error = refused.value.args[0]
    assert (error.code(), error.fatal()) == (KafkaError.CLUSTER_AUTHORIZATION_FAILED, True)
    assert {r["decision"] for r in audited(proxy, neither, "InitProducerId")} == {"DENIED"}


# ----------------------------------------------------------------------------------------- raw requests


RETRIABLE = {
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
}


def settled(send: Callable[[], Any], error_of: Callable[[Any], ErrorCode] = lambda r: r.error_code) -> Any:
    """``send()`` again while the coordinator is still starting (the first transaction creates its topic)."""
    for _ in range(60):
        response = send()
        if error_of(response) not in RETRIABLE:
            return response
        time.sleep(0.5)
    raise AssertionError(f"the coordinator never settled: {response}")


def logged_in(proxy: ServerHandle, name: str) -> Wire:
    wire = Wire(proxy.sasl, timeout=TIMEOUT)
    wire.login(name, PASSWORD)
    return wire


def begin(wire: Wire, txn: str) -> tuple[int, int]:
    """FindCoordinator for ``txn`` then InitProducerId: its (producer id, epoch)."""
    find = FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(txn,))
    settled(lambda: wire.request(find), lambda r: r.coordinators[0].error_code)
    init = InitProducerIdRequest(
        transactional_id=TransactionalId(txn),
        transaction_timeout=i32Timedelta.parse(timedelta(minutes=1)),
        producer_id=ProducerId(-1),
        producer_epoch=i16(-1),
    )
    answer = settled(lambda: wire.request(init))
    assert answer.error_code == ErrorCode.none, answer
    return int(answer.producer_id), int(answer.producer_epoch)


def add_partitions(wire: Wire, txn: str, pid: int, epoch: int, **topics: tuple[int, ...]) -> dict[tuple[str, int], Any]:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(txn),
        v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=tuple(
            AddPartitionsToTxnTopic(name=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in topics.items()
        ),
    )
    answer = settled(lambda: wire.request(request), lambda r: _first_error(r.results_by_topic_v3_and_below))
    return {
        (t.name, int(p.partition_index)): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def _first_error(topics: Any) -> ErrorCode:
    codes = [p.partition_error_code for t in topics for p in t.results_by_partition]
    return codes[0] if codes else ErrorCode.none


def txn_offset_commit(wire: Wire, txn: str, pid: int, epoch: int, group: str, **offsets: int) -> dict[str, Any]:
    request = TxnOffsetCommitRequest(
        transactional_id=TransactionalId(txn),
        group_id=GroupId(group),
        producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
        topics=tuple(
            TxnOffsetCommitRequestTopic(
                name=TopicName(t),
                partitions=(
                    TxnOffsetCommitRequestPartition(
                        partition_index=i32(0), committed_offset=i64(o), committed_metadata=None
                    ),
                ),
            )
            for t, o in offsets.items()
        ),
    )
    answer = wire.request(request)
    return {t.name: {int(p.partition_index): p.error_code for p in t.partitions} for t in answer.topics}


def test_transaction_apis_refuse_per_item_as_kafka(proxy: ServerHandle, kafka: KafkaBroker):
    ok, hidden, refused, group, other_group = unique("ok"), unique("hidden"), unique("no"), unique("g"), unique("g")
    create_topics(kafka, ok, hidden, refused)
    txn = unique("txn")
    writer, stranger = user(proxy), user(proxy)
    grant(proxy, f"User:{writer}", TXN, txn, WRITE)
    grant(proxy, f"User:{writer}", TOPIC, ok, WRITE, READ)
    grant(proxy, f"User:{writer}", TOPIC, hidden, WRITE)
    grant(proxy, f"User:{writer}", TOPIC, refused, DESCRIBE)
    grant(proxy, f"User:{writer}", TOPIC, "__consumer_offsets", WRITE)  # never enough: internal topics
    grant(proxy, f"User:{writer}", GROUP, group, READ)
    with logged_in(proxy, writer) as wire, logged_in(proxy, stranger) as other:
        pid, epoch = begin(wire, txn)
        # one refused topic fails the whole request: the others are not attempted (and not added)
        assert add_partitions(wire, txn, pid, epoch, **{ok: (0,), refused: (0,)}) == {
            (ok, 0): ErrorCode.operation_not_attempted,
            (refused, 0): ErrorCode.topic_authorization_failed,
        }
        assert add_partitions(wire, txn, pid, epoch, __consumer_offsets=(0,)) == {
            ("__consumer_offsets", 0): ErrorCode.topic_authorization_failed
        }
        assert add_partitions(other, txn, pid, epoch, **{ok: (0,)}) == {
            (ok, 0): ErrorCode.transactional_id_authorization_failed
        }
        assert add_partitions(wire, txn, pid, epoch, **{ok: (0,), hidden: (0,)}) == {
            (ok, 0): ErrorCode.none,
            (hidden, 0): ErrorCode.none,
        }

        def add_offsets(client: Wire, group_id: str) -> ErrorCode:
            request = AddOffsetsToTxnRequest(
                transactional_id=TransactionalId(txn),
                producer_id=ProducerId(pid),
                producer_epoch=i16(epoch),
                group_id=GroupId(group_id),
            )
            return settled(lambda: client.request(request)).error_code  # type: ignore[no-any-return]

        assert add_offsets(other, group) == ErrorCode.transactional_id_authorization_failed
        assert add_offsets(wire, other_group) == ErrorCode.group_authorization_failed
        assert add_offsets(wire, group) == ErrorCode.none

        assert txn_offset_commit(other, txn, pid, epoch, group, **{ok: 7}) == {
            ok: {0: ErrorCode.transactional_id_authorization_failed}
        }
        assert txn_offset_commit(wire, txn, pid, epoch, other_group, **{ok: 7, refused: 9}) == {
            ok: {0: ErrorCode.group_authorization_failed},
            refused: {0: ErrorCode.group_authorization_failed},
        }
        assert txn_offset_commit(wire, txn, pid, epoch, group, **{ok: 7, refused: 9}) == {
            ok: {0: ErrorCode.none},
            refused: {0: ErrorCode.topic_authorization_failed},
        }

        def end(client: Wire) -> ErrorCode:
            request = EndTxnRequest(
                transactional_id=TransactionalId(txn),
                producer_id=ProducerId(pid),
                producer_epoch=i16(epoch),
                committed=True,
            )
            return settled(lambda: client.request(request)).error_code  # type: ignore[no-any-return]

        assert end(other) == ErrorCode.transactional_id_authorization_failed
        assert end(wire) == ErrorCode.none
    assert committed_offset(kafka, group, ok) == 7  # the allowed part of the TxnOffsetCommit was committed
    assert committed_offset(kafka, group, refused) == -1001
    topics_checked = {r["resource_name"] for r in audited(proxy, writer, "AddPartitionsToTxn")}
    assert "__consumer_offsets" not in topics_checked  # never asked, as Kafka never asks


def describe_transactions(wire: Wire, *ids: str) -> dict[str, Any]:
    """DescribeTransactions v0, decoded as the proxy decodes it (kio refuses the -1 start time of an Empty one)."""
    wire.send_frame(
        encode_request(
            DescribeTransactionsRequest(transactional_ids=tuple(TransactionalId(i) for i in ids)),
            wire.next_correlation_id(),
        )
    )
    payload = wire.recv_frame()
    assert payload is not None
    return {state.transactional_id: state for state in decode_describe_transactions(payload).transaction_states}


def list_transactions(wire: Wire) -> set[str]:
    answer = wire.request(ListTransactionsRequest())
    assert answer.error_code == ErrorCode.none
    return {state.transactional_id for state in answer.transaction_states}


def test_describe_and_list_show_only_what_the_caller_may_describe(proxy: ServerHandle, kafka: KafkaBroker):
    ok, hidden, refused = unique("ok"), unique("hidden"), unique("no")
    create_topics(kafka, ok, hidden, refused)
    produce_on_broker(kafka, ok, b"a", b"b", **{"enable.idempotence": True})  # an active producer on ok-0
    txn, other_txn, missing = unique("txn"), unique("txn"), unique("txn")
    writer, other_writer, observer = user(proxy), user(proxy), user(proxy)
    grant(proxy, f"User:{writer}", TXN, txn, WRITE)
    grant(proxy, f"User:{writer}", TOPIC, ok, WRITE, READ)
    grant(proxy, f"User:{writer}", TOPIC, hidden, WRITE)
    grant(proxy, f"User:{other_writer}", TXN, other_txn, WRITE)
    grant(proxy, f"User:{observer}", TXN, txn, DESCRIBE)
    grant(proxy, f"User:{observer}", TXN, missing, DESCRIBE)
    grant(proxy, f"User:{observer}", TOPIC, ok, DESCRIBE)
    with logged_in(proxy, writer) as wire, logged_in(proxy, other_writer) as other, logged_in(proxy, observer) as obs:
        pid, epoch = begin(wire, txn)
        other_pid, _ = begin(other, other_txn)
        # Empty after InitProducerId: Kafka's start time is -1
        empty = describe_transactions(other, other_txn)[other_txn]
        assert (empty.error_code, empty.transaction_state, empty.transaction_start_time) == (
            ErrorCode.none,
            "Empty",
            -1,
        )
        assert int(empty.producer_id) == other_pid
        add_partitions(wire, txn, pid, epoch, **{ok: (0,), hidden: (0,)})

        seen = describe_transactions(obs, txn, other_txn, missing)
        assert seen[txn].error_code == ErrorCode.none and seen[txn].transaction_state == "Ongoing"
        assert {t.topic for t in seen[txn].topics} == {ok}  # the observer may not describe `hidden`
        assert seen[other_txn].error_code == ErrorCode.transactional_id_authorization_failed
        assert (int(seen[other_txn].producer_id), seen[other_txn].topics) == (0, ())
        assert seen[missing].error_code == ErrorCode.transactional_id_not_found  # forwarded: Kafka's own answer
        own = describe_transactions(wire, txn)[txn]
        assert {t.topic for t in own.topics} == {ok, hidden} and int(own.producer_id) == pid

        assert txn in list_transactions(wire) and other_txn not in list_transactions(wire)
        assert other_txn in list_transactions(other) and txn not in list_transactions(other)
        assert txn in list_transactions(obs) and other_txn not in list_transactions(obs)

        asked = DescribeProducersRequest(
            topics=(
                TopicRequest(name=TopicName(ok), partition_indexes=(i32(0),)),
                TopicRequest(name=TopicName(refused), partition_indexes=(i32(0),)),
            )
        )
        producers = {t.name: t.partitions[0] for t in wire.request(asked).topics}
        assert producers[ok].error_code == ErrorCode.none and producers[ok].active_producers
        assert (producers[refused].error_code, producers[refused].error_message) == (
            ErrorCode.topic_authorization_failed,
            "Topic authorization failed.",
        )
        assert producers[refused].active_producers == ()
    assert {
        r["decision"] for r in audited(proxy, observer, "DescribeTransactions") if r["resource_name"] == hidden
    } == {"DENIED"}

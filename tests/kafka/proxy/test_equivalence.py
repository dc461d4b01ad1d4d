"""Authorization equivalence: the same users, ACLs and clients, once straight to a real Kafka broker that holds the
ACLs, once through ``kafkaguard proxy`` (in front of the same broker, whose ACLs never apply to the proxy): every
client-visible outcome must be equal — delivered messages, error codes per partition, visible topics, group
membership, committed offsets.

Each side gets its users and ACLs through its own Kafka admin API (the broker's, and the proxy's, which answers the
ACL and SCRAM APIs from kafkaguard's store), with the same names but for a per-side token, so the two runs share no
topic or group. Outcomes are compared with the token replaced by ``T``.

The proxied side runs in each of the proxy's modes (``conftest.PROXY_MODES``). In passthrough the users exist on
Kafka only (made with the broker's Admin API; the clients log in through the proxy with their Kafka credentials),
and the ACLs are in both places, kafkaguard's store and the broker's, since both must allow. On ``--workers 2`` a
client's connections land on either worker, so the side is provisioned until both have every user and ACL
(``settled``).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from confluent_kafka.cimpl import NewTopic

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import ModeProxy

PASSWORD = "equivalence-pw"  # noqa: S105 - a test password
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER  # BROKER: librdkafka's CLUSTER
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
COUNT = 5


@dataclass(frozen=True)
class Side:
    label: str
    bootstrap: str
    token: str
    #: The broker behind a proxy in passthrough: the users are made there only, the ACLs there and in kafkaguard.
    upstream: str | None = None
    #: Seconds a write may take to reach every process serving the side (``ModeProxy.lag``; 0: one process).
    lag: float = 0.0

    def name(self, base: str) -> str:
        return f"eq-{self.token}-{base}"

    def config(
        self, user: str, *, password: str = PASSWORD, extra: Mapping[str, object] | None = None
    ) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
                **(extra or {})}  # fmt: skip


def allow(resource: ResourceType, name: str, principal: str, op: AclOperation, pattern: Any = LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:  # fmt: skip
    return AclBinding(resource, name, pattern, f"User:{principal}", "*", op, permission)


def acls(side: Side) -> list[AclBinding]:
    n = side.name
    return [
        allow(TOPIC, n("orders"), n("producer"), AclOperation.WRITE),
        allow(TOPIC, n("orders"), n("producer"), AclOperation.DESCRIBE),
        allow(TOPIC, n("orders"), n("consumer"), AclOperation.READ),
        allow(TOPIC, n("secret"), n("consumer"), AclOperation.DESCRIBE),
        allow(GROUP, n("group"), n("consumer"), AclOperation.READ, PREFIXED),
        allow(CLUSTER, "kafka-cluster", n("idempotent"), AclOperation.IDEMPOTENT_WRITE),
        allow(TOPIC, n("orders"), n("idempotent"), AclOperation.WRITE),
        allow(TOPIC, n("orders"), n("writeonly"), AclOperation.WRITE),
        allow(TOPIC, n(""), n("ops"), AclOperation.DESCRIBE, PREFIXED),
        allow(TOPIC, n("hidden"), n("ops"), AclOperation.DESCRIBE, permission=AclPermissionType.DENY),
    ]


_ANY: Any = None  # AclBindingFilter's "any" for a name, principal and host
EVERY_ACL = AclBindingFilter(ResourceType.ANY, _ANY, ResourcePatternType.ANY, _ANY, _ANY, AclOperation.ANY,
                             AclPermissionType.ANY)  # fmt: skip
USERS = ("producer", "consumer", "idempotent", "writeonly", "ops", "nobody")


def prepare(side: Side, kafka: KafkaBroker) -> None:
    """Topics on the broker (as its admin), users and ACLs through the side's own admin API."""
    broker_admin = AdminClient(Side("broker", kafka.bootstrap, side.token).config(ADMIN, password=ADMIN_PASSWORD))
    topics = [NewTopic(side.name(t), 2, 1) for t in ("orders", "secret", "hidden")]
    for future in broker_admin.create_topics(topics).values():
        future.result(60)
    provision(side, USERS, acls(side))


def proxy_side(proxy: ModeProxy, kafka: KafkaBroker, token: str) -> Side:
    """The side through ``proxy`` (its bootstrap port), in its mode."""
    handle = proxy.handle
    return Side("proxy", handle.bootstrap(next(iter(handle.ports))), f"p{token}",
                upstream=kafka.bootstrap if proxy.passthrough else None, lag=proxy.lag)  # fmt: skip


def provision(side: Side, users: Sequence[str], wanted: list[AclBinding]) -> None:
    """``users`` (SCRAM-SHA-256, ``PASSWORD``) and the ACLs ``wanted`` through the side's own admin API, waited for
    until the side lists every ACL and every user logs in. A side in passthrough makes its users with the broker's
    admin API only, and its ACLs with both (kafkaguard's, through the proxy, and the broker's). A side of several
    processes (``side.lag``) is waited for until every one of them has it (``settled``)."""
    admin = AdminClient(side.config(ADMIN, password=ADMIN_PASSWORD))
    acl_admins = [admin]
    user_admin = admin
    if side.upstream is not None:
        broker = AdminClient(Side("broker", side.upstream, side.token).config(ADMIN, password=ADMIN_PASSWORD))
        acl_admins.append(broker)
        user_admin = broker
    upserts = [UserScramCredentialUpsertion(side.name(u), ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                            PASSWORD.encode()) for u in users]  # fmt: skip
    for future in user_admin.alter_user_scram_credentials(upserts).values():  # type: ignore[arg-type]
        future.result(60)
    for acl_admin in acl_admins:
        for future in acl_admin.create_acls(wanted).values():
            future.result(60)

        def stored(acl_admin: AdminClient = acl_admin) -> int:
            return sum(side.token in b.principal for b in acl_admin.describe_acls(EVERY_ACL).result(30))

        eventually(stored, len(wanted))
    for user in users:  # the side knows every credential before the traffic starts
        eventually(functools.partial(logs_in, side, side.name(user)), True)
    if side.lag:
        settled(side, users, len(wanted))


#: ``settled``'s least number of rounds in a row without a miss, each of 1 + len(users) fresh clients.
SETTLED_ROUNDS = 3


def settled(side: Side, users: Sequence[str], count: int, timeout: float = 30.0) -> None:
    """Until every process serving ``side`` lists the side's ``count`` ACLs and lets every user log in.

    A write through one of ``--workers N`` reaches the others only at their next poll of the store, within
    ``side.lag`` (``tests.kafka.proxy.processes``), and a check answered by the worker that made the write proves
    nothing of the others; nor can a client choose its worker (the kernel hashes each connection's addresses:
    SO_REUSEPORT). So the checks run again, every one through a fresh client (new connections, new source ports),
    round after round until ``SETTLED_ROUNDS`` rounds in a row, spanning at least ``side.lag``, saw no miss: the
    span covers the lag, and the rounds' many connections would meet a worker still behind. A miss starts the run
    again."""
    deadline = time.monotonic() + timeout
    clean, since = 0, time.monotonic()
    while clean < SETTLED_ROUNDS or time.monotonic() - since < side.lag:
        assert time.monotonic() < deadline, f"{side.label} did not settle in {timeout} s"
        admin = AdminClient(side.config(ADMIN, password=ADMIN_PASSWORD))
        listed = sum(side.token in b.principal for b in admin.describe_acls(EVERY_ACL).result(30))
        if listed == count and all(logs_in(side, side.name(user)) for user in users):
            clean += 1
        else:
            clean, since = 0, time.monotonic()


def eventually(probe: Callable[[], Any], expected: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (value := probe()) != expected:
        assert time.monotonic() < deadline, f"still {value!r}, expected {expected!r}"
        time.sleep(0.2)  # polling the broker's metadata propagation, bounded by the deadline


def logs_in(side: Side, user: str) -> bool:
    try:
        AdminClient(side.config(user)).list_topics(timeout=5)
        return True
    except KafkaException:
        return False


def produce(side: Side, user: str, topics: list[str], **extra: Any) -> dict[str, list[str]]:
    """Per topic, each message's delivery outcome: "ok" or the Kafka error name."""
    settings: dict[str, object] = {"linger.ms": 5, "message.timeout.ms": 10_000, **extra}
    producer = Producer(side.config(user, extra=settings))
    outcomes: dict[str, list[str]] = {}

    def delivered(topic: str, error: KafkaError | None, _message: object) -> None:
        outcomes.setdefault(topic, []).append("ok" if error is None else KafkaError(error.code()).name())

    for topic in topics:
        for i in range(COUNT):
            report = functools.partial(delivered, topic)
            producer.produce(side.name(topic), f"{topic}-{i}".encode(), partition=i % 2, on_delivery=report)
    producer.flush(30)
    return {topic: sorted(result) for topic, result in outcomes.items()}


def consume(side: Side, user: str, topic: str, group: str, count: int) -> dict[str, Any]:
    """What a subscribing consumer sees: the values it got (at least ``count``, and any more that come in the half
    second after them), or the first error's name; and its committed offsets."""
    settings = {"group.id": side.name(group), "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumer = Consumer(side.config(user, extra=settings))
    consumer.subscribe([side.name(topic)])
    values: list[str] = []
    error: str | None = None
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                if len(values) >= count:  # all of them, and nothing more for half a second: no duplicate pending
                    break
                continue
            problem = message.error()
            if problem is not None:
                error = problem.name()
                break
            values.append((message.value() or b"").decode())
        committed: list[int] = []
        if error is None and values:
            consumer.commit(asynchronous=False)
            found = consumer.committed([TopicPartition(side.name(topic), p) for p in (0, 1)], timeout=30)
            committed = [tp.offset for tp in found]
    except KafkaException as e:
        error = e.args[0].name()
        committed = []
    finally:
        consumer.close()
    return {"values": sorted(values), "error": error, "committed": committed}


def visible_topics(side: Side, user: str) -> list[str]:
    topics = AdminClient(side.config(user)).list_topics(timeout=30).topics
    return sorted(t.replace(side.token, "T") for t in topics if side.token in t)


def outcomes(side: Side) -> dict[str, Any]:
    produced = {
        "producer writes orders, not secret": produce(side, side.name("producer"), ["orders", "secret"]),
        "nobody writes nothing": produce(side, side.name("nobody"), ["orders"]),
        "idempotent producer with IDEMPOTENT_WRITE": produce(
            side, side.name("idempotent"), ["orders"], **{"enable.idempotence": True}
        ),
        "idempotent producer with topic WRITE only (KIP-679)": produce(
            side, side.name("writeonly"), ["orders"], **{"enable.idempotence": True}
        ),
    }
    # What this side acknowledged on orders: the consumer reads that many, then looks for more (``consume``). It
    # once waited for 4 x COUNT of the 3 x COUNT written, its whole 40 s deadline, on both sides of every mode.
    written = sum(result.get("orders", []).count("ok") for result in produced.values())
    return {
        **produced,
        "consumer reads orders in its group": consume(side, side.name("consumer"), "orders", "group-a", written),
        "consumer outside its groups": consume(side, side.name("consumer"), "orders", "other", 1),
        "consumer without READ on secret": consume(side, side.name("consumer"), "secret", "group-b", 1),
        "ops sees the prefix but the denied topic": visible_topics(side, side.name("ops")),
        "nobody sees nothing": visible_topics(side, side.name("nobody")),
    }


@pytest.mark.timeout(600)
def test_clients_see_the_same_outcomes_through_the_proxy_as_on_kafka(mode_proxy: ModeProxy, kafka: KafkaBroker):
    token = uuid.uuid4().hex[:6]
    direct = Side("kafka", kafka.bootstrap, f"k{token}")
    proxied = proxy_side(mode_proxy, kafka, token)
    results = {}
    for side in (direct, proxied):
        prepare(side, kafka)
        results[side.label] = outcomes(side)
    assert results["kafka"]["consumer reads orders in its group"]["values"], "the scenario must move messages"
    for scenario, expected in results["kafka"].items():
        assert results["proxy"][scenario] == expected, scenario

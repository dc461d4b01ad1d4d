"""The audit pipeline on Apache Kafka's own ``kafka-authorizer.log``: real client traffic (confluent-kafka) against
the real broker under a set of ACLs for a few users, the broker's ACLs exported through ``kafkaguard export``, then
``kafkaguard audit replay --format kafka-log`` must parse every line and agree with every decision Kafka logged,
and ``kafkaguard audit usage`` must count, per ACL, exactly the requests the log says that ACL decided (counted
here independently, straight from the lines' ``based on rule MatchingAcl(acl=StandardAcl(…))``)."""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.admin._scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.cimpl import NewTopic
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.java_tools import unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PASSWORD = "traffic-secret"  # noqa: S105 - a test password
RULE = re.compile(
    r"is (Allowed|Denied) operation = .* based on rule MatchingAcl\(acl=StandardAcl\(resourceType=([A-Z_]+), "
    r"resourceName=(.*), patternType=([A-Z]+), principal=(.*), host=(.*), operation=([A-Z_]+), "
    r"permissionType=([A-Z]+)\)\) \(kafka\.authorizer\.logger\)$"
)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """The test run's local SparkSession (``getOrCreate``: the same one tests/pipeline uses, which stops it)."""
    from kafkaguard.pipeline.session import start_spark

    yield start_spark(
        "kafkaguard-tests",
        master="local[2]",
        config={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "1g"},
    )


def client_config(kafka: KafkaBroker, user: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": kafka.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
        "logger": logging.getLogger("rdkafka-traffic"),
    }


def eventually(probe: Callable[[], object], expected: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while (got := probe()) != expected:
        assert time.monotonic() < deadline, f"still {got!r}, expected {expected!r}"
        time.sleep(0.2)  # the broker's metadata image catches up with the controller, bounded by the deadline


@dataclass(frozen=True)
class Names:
    base: str
    orders: str
    secret: str
    hidden: str
    group: str
    bad_group: str
    tx: str
    producer: str
    consumer: str
    transactional: str
    idempotent: str
    ops: str


def allow(kind: ResourceType, name: str, principal: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:  # fmt: skip
    return AclBinding(kind, name, pattern, f"User:{principal}", "*", op, permission)


def acls_for(n: Names) -> list[AclBinding]:
    topic, group, tx = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
    cluster = ResourceType.BROKER  # librdkafka's name for the CLUSTER resource type
    return [
        allow(topic, n.orders, n.producer, AclOperation.WRITE),
        allow(topic, n.orders, n.producer, AclOperation.DESCRIBE),
        allow(topic, n.orders, n.consumer, AclOperation.READ),
        allow(group, n.group, n.consumer, AclOperation.READ, ResourcePatternType.PREFIXED),
        allow(tx, n.tx, n.transactional, AclOperation.WRITE),
        allow(topic, n.orders, n.transactional, AclOperation.WRITE),
        allow(cluster, "kafka-cluster", n.idempotent, AclOperation.IDEMPOTENT_WRITE),
        allow(topic, n.orders, n.idempotent, AclOperation.WRITE),
        allow(cluster, "kafka-cluster", n.ops, AclOperation.DESCRIBE),
        allow(topic, n.base, n.ops, AclOperation.DESCRIBE, ResourcePatternType.PREFIXED),
        allow(topic, n.hidden, n.ops, AclOperation.DESCRIBE, permission=AclPermissionType.DENY),
        allow(group, n.group, n.ops, AclOperation.DESCRIBE, ResourcePatternType.PREFIXED),
    ]


def setup_cluster(kafka: KafkaBroker, n: Names) -> None:
    admin = AdminClient(client_config(kafka, ADMIN, ADMIN_PASSWORD))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (n.orders, n.secret, n.hidden)]).values():
        future.result(timeout=60)
    users = (n.producer, n.consumer, n.transactional, n.idempotent, n.ops)
    upserts = [
        UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode())
        for u in users
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():  # type: ignore[arg-type]
        future.result(timeout=60)
    wanted = acls_for(n)
    for future in admin.create_acls(wanted).values():
        future.result(timeout=60)
    anyone: Any = None
    everything = AclBindingFilter(ResourceType.ANY, anyone, ResourcePatternType.ANY, anyone, anyone,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip

    def ours() -> int:
        found = admin.describe_acls(everything).result(timeout=30)
        return sum(1 for b in found if b.principal.split(":", 1)[1] in users)

    eventually(ours, len(wanted))
    for user in users:  # the broker knows every credential before the traffic starts
        eventually(functools.partial(logs_in, kafka, user), True)


def teardown_cluster(kafka: KafkaBroker, n: Names) -> None:
    admin = AdminClient(client_config(kafka, ADMIN, ADMIN_PASSWORD))
    users = (n.producer, n.consumer, n.transactional, n.idempotent, n.ops)
    deletions = [UserScramCredentialDeletion(u, ScramMechanism.SCRAM_SHA_256) for u in users]
    for future in admin.alter_user_scram_credentials(deletions).values():  # type: ignore[arg-type]
        future.result(timeout=60)
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in acls_for(n)]  # fmt: skip
    for future in admin.delete_acls(filters).values():
        future.result(timeout=60)
    for future in admin.delete_topics([n.orders, n.secret, n.hidden]).values():
        future.result(timeout=60)


def logs_in(kafka: KafkaBroker, user: str) -> bool:
    admin = AdminClient(client_config(kafka, user))
    try:
        admin.describe_cluster(request_timeout=5).result(timeout=8)
    except KafkaException:
        return False
    return True


def produce(kafka: KafkaBroker, user: str, topic: str, extra: dict[str, Any] | None = None) -> list[str]:
    """Produce three records; the delivery errors (empty when all were written)."""
    errors: list[str] = []
    config = client_config(kafka, user) | {"message.timeout.ms": 6000, "enable.idempotence": False} | (extra or {})
    producer = Producer(config)

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err.name())

    for i in range(3):
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=delivered)
    producer.flush(15)
    return errors


def consume(kafka: KafkaBroker, user: str, topic: str, group: str, seconds: float) -> tuple[int, set[str]]:
    """(records received, error names) from a group consumer polling for ``seconds``."""
    consumer = Consumer(client_config(kafka, user) | {"group.id": group, "auto.offset.reset": "earliest",
                                                       "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    received, errors = 0, set()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.add(str(msg.error().name()))  # type: ignore[union-attr]  # error() was just checked
                continue
            received += 1
            if received == 3:
                consumer.commit(asynchronous=False)
                break
    except KafkaException as e:
        errors.add(e.args[0].name())
    finally:
        consumer.close()
    return received, errors


def traffic(kafka: KafkaBroker, n: Names) -> None:
    assert produce(kafka, n.producer, n.orders) == []
    assert set(produce(kafka, n.producer, n.secret)) == {"TOPIC_AUTHORIZATION_FAILED"}

    tx = Producer(client_config(kafka, n.transactional) | {"transactional.id": n.tx})
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce(n.orders, value=b"in-a-transaction")
    tx.commit_transaction(30)

    assert produce(kafka, n.idempotent, n.orders, {"enable.idempotence": True}) == []

    received, errors = consume(kafka, n.consumer, n.orders, f"{n.group}-billing", 30)
    assert received == 3 and errors == set(), errors
    received, errors = consume(kafka, n.consumer, n.orders, n.bad_group, 6)
    assert received == 0 and "GROUP_AUTHORIZATION_FAILED" in errors, errors

    ops = AdminClient(client_config(kafka, n.ops))
    visible = set(ops.list_topics(timeout=20).topics)
    assert {n.orders, n.secret} <= visible and n.hidden not in visible
    assert ops.describe_acls(AclBindingFilter(ResourceType.TOPIC, n.orders, ResourcePatternType.LITERAL, None, None,  # type: ignore[arg-type]
                                              AclOperation.ANY, AclPermissionType.ANY)).result(timeout=30)  # fmt: skip
    denied = allow(ResourceType.TOPIC, n.orders, n.ops, AclOperation.READ)
    with pytest.raises(KafkaException):
        ops.create_acls([denied])[denied].result(timeout=30)
    with pytest.raises(KafkaException):
        ops.create_topics([NewTopic(f"{n.base}-new", 1, 1)])[f"{n.base}-new"].result(timeout=30)
    groups = ops.list_consumer_groups().result(timeout=30)
    assert f"{n.group}-billing" in {g.group_id for g in groups.valid}


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def summary_number(output: str, key: str) -> int:
    match = re.search(rf"^\s*{key}\s+([0-9,]+)$", output, re.MULTILINE)
    assert match is not None, output
    return int(match.group(1).replace(",", ""))


@dataclass(frozen=True)
class Recorded:
    names: Names
    lines: list[str]
    snapshot: Path
    acls: Path
    exported: list[dict[str, str]]
    root: Path


@pytest.fixture(scope="module")
def recorded(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """The traffic, run once: the authorizer log's lines it produced (copied), and the broker's ACLs exported.
    Afterwards the users, ACLs and topics are removed from the shared broker."""
    root = tmp_path_factory.mktemp("audit-kafka-log")
    base = unique("audit")
    n = Names(base, f"{base}-orders", f"{base}-secret", f"{base}-hidden", f"{base}-grp", f"{base}-nogroup",
              f"{base}-tx", f"{base}-producer", f"{base}-consumer", f"{base}-txuser", f"{base}-idem",
              f"{base}-ops")  # fmt: skip
    setup_cluster(kafka, n)
    start = kafka.authorizer_log.stat().st_size
    traffic(kafka, n)
    time.sleep(1)  # let the broker finish answering (and logging) the last requests
    with kafka.authorizer_log.open("rb") as log:
        log.seek(start)
        window = log.read()
    window = window[: window.rfind(b"\n") + 1]  # whole lines only
    snapshot = root / "kafka-authorizer.log"
    snapshot.write_bytes(window)
    lines = window.decode().splitlines()

    config = kafka.client_properties(root / "admin.properties")
    acls = root / "acls.json"
    cli("export", "--bootstrap-server", kafka.bootstrap, "--command-config", str(config), "--format", "json",
        "-o", str(acls))  # fmt: skip
    exported = json.loads(acls.read_text())["acls"]
    try:
        yield Recorded(n, lines, snapshot, acls, exported, root)
    finally:
        teardown_cluster(kafka, n)


def logged_hits(lines: list[str]) -> Counter[tuple[str, ...]]:
    """Per ACL (resource type, name, pattern, principal, host, operation, permission): how many logged decisions
    Kafka says it decided, read straight from ``based on rule MatchingAcl(acl=StandardAcl(…))``."""
    hits: Counter[tuple[str, ...]] = Counter()
    for line in lines:
        match = RULE.search(line)
        if match:
            hits[match.groups()[1:]] += 1
    return hits


def usage_counts(spark: SparkSession, recorded: Recorded, out: Path) -> dict[tuple[str, ...], int]:
    used = cli("audit", "usage", "--format", "kafka-log", "--log", str(recorded.snapshot), "--acls",
               str(recorded.acls), "--super-users", f"User:{ADMIN}", "--out", str(out))  # fmt: skip
    assert summary_number(used, "unparseable_lines") == 0
    usage = spark.read.parquet(str(out / "acl_usage")).collect()
    counted: dict[tuple[str, ...], int] = {
        (r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation, r.permission_type):
            int(r.decisive_requests)
        for r in usage
    }  # fmt: skip
    assert len(counted) == len(recorded.exported)
    return counted


def test_the_traffic_left_its_decisions_in_the_log(recorded: Recorded) -> None:
    n = recorded.names
    ours = [line for line in recorded.lines if f"User:{n.base}-" in line]
    assert len(ours) > 20
    assert any(" is Denied " in line and f"Topic:LITERAL:{n.secret} " in line for line in ours)
    assert any(" is Denied " in line and f"Group:LITERAL:{n.bad_group} " in line for line in ours)
    assert any(" is Allowed operation = WRITE " in line and f"TransactionalId:LITERAL:{n.tx} " in line for line in ours)
    assert any(" is Allowed operation = IDEMPOTENT_WRITE " in line for line in ours)
    # Metadata for all topics filters out the hidden topic without logging the denial (logIfDenied=false: TRACE)
    assert not any(f"Topic:LITERAL:{n.hidden} " in line for line in ours)
    assert any(" is Denied operation = ALTER " in line and "Cluster:LITERAL:kafka-cluster" in line for line in ours)
    assert sum(1 for a in recorded.exported if a["principal"].startswith(f"User:{n.base}-")) == len(acls_for(n))


def rule_kind(rule: str) -> str:
    return (
        "SuperUser" if rule.startswith("SuperUser") else "MatchingAcl" if rule.startswith("MatchingAcl(") else "Default"
    )


def test_replay_agrees_with_every_logged_decision(spark: SparkSession, recorded: Recorded) -> None:
    out = recorded.root / "replay"
    replayed = cli("audit", "replay", "--format", "kafka-log", "--log", str(recorded.snapshot), "--acls",
                   str(recorded.acls), "--super-users", f"User:{ADMIN}", "--out", str(out))  # fmt: skip
    lines = recorded.lines
    assert summary_number(replayed, "records") == len(lines)
    assert summary_number(replayed, "unparseable_lines") == 0
    assert summary_number(replayed, "differing_accesses") == 0
    decisions = spark.read.parquet(str(out / "decisions")).collect()
    assert [r for r in decisions if r.decision != r.logged_decision] == []
    logged = Counter(("ALLOWED" if " is Allowed " in line else "DENIED") for line in lines)
    replayed_counts: Counter[str] = Counter()
    for r in decisions:
        replayed_counts[r.decision] += r.requests
    assert replayed_counts == logged
    # the deciding rule's kind (super user, an ACL, default) is Kafka's for every request
    kinds = Counter(rule_kind(line.rsplit(" based on rule ", 1)[-1]) for line in lines)
    replayed_kinds: Counter[str] = Counter()
    for r in decisions:
        replayed_kinds[rule_kind(str(r.rule))] += r.requests
    assert replayed_kinds == kinds


def test_usage_counts_the_requests_kafka_says_acls_decided(spark: SparkSession, recorded: Recorded) -> None:
    """Per resource and principal, usage's decisive requests are the log's; the total over all ACLs too."""
    counted = usage_counts(spark, recorded, recorded.root / "usage")
    hits = logged_hits(recorded.lines)
    assert sum(hits.values()) > 0 and sum(counted.values()) == sum(hits.values())

    def by_resource_and_principal(counts: dict[tuple[str, ...], int]) -> Counter[tuple[str, ...]]:
        out: Counter[tuple[str, ...]] = Counter()
        for key, value in counts.items():
            if value:
                out[(key[0], key[1], key[2], key[3], key[6])] += value
        return out

    assert by_resource_and_principal(counted) == by_resource_and_principal(dict(hits))


def test_usage_names_the_same_deciding_acl_as_kafka(spark: SparkSession, recorded: Recorded) -> None:
    """Per ACL, not only per resource: kafkaguard's explain names the ACL Kafka's log names (the first DENY, else
    the last ALLOW of Kafka's scan order; authorizer.standard._kafka_scan_position)."""
    counted = usage_counts(spark, recorded, recorded.root / "usage-per-acl")
    assert {k: v for k, v in counted.items() if v} == dict(logged_hits(recorded.lines))

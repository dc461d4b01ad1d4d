"""Principal groups and CIDR hosts through ``kafkaguard proxy`` to a real Kafka broker, with confluent-kafka clients:
a group's ACLs reach its members (open connections included, on their next request), a DENY on a group from a CIDR
block holding the client wins, and the audit records name the user and the group."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException, Producer

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
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.test_proxy_clients import (
    PASSWORD,
    consume,
    create_topics,
    produce,
    proxy_bootstrap,
    sasl,
    unique,
    user,
)
from tests.serving import ServerHandle

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(principal: str, resource_type: ResourceType, name: str, op: AclOperation, perm=ALLOW, host="*") -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, PatternType.LITERAL), AccessControlEntry(principal, host, op, perm)
    )


def code(error: KafkaError | None) -> int | None:
    return None if error is None else int(error.code())


def test_group_and_cidr_acls_decide_real_produce_and_consume(proxy: ServerHandle, kafka: KafkaBroker):
    topic, consumers, group = unique("ledger"), unique("ledger-readers"), unique("payments-team")
    create_topics(kafka, topic)
    alice, bob = user(proxy), user(proxy)
    created = proxy.services.acls.create_acls(
        [
            # The team may write and read the topic from loopback (the clients' address) ...
            acl(f"Group:{group}", ResourceType.TOPIC, topic, AclOperation.WRITE, host="127.0.0.0/8"),
            acl(f"Group:{group}", ResourceType.TOPIC, topic, AclOperation.READ, host="127.0.0.0/8"),
            acl(f"Group:{group}", ResourceType.GROUP, consumers, AclOperation.READ, host="127.0.0.0/8"),
            # ... and from 10.0.0.0/8, which the clients are not in: this DENY never applies to them.
            acl(f"Group:{group}", ResourceType.TOPIC, topic, AclOperation.READ, DENY, host="10.0.0.0/8"),
        ],
        actor=ACTOR,
    )
    assert all(r.succeeded for r in created)

    # alice is in no group yet: refused.
    assert code(produce(proxy, alice, topic, 1)[0]) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # One producer kept open across the membership change: refused before, allowed after, without a new login.
    # (librdkafka remembers a topic's authorization failure until its next metadata refresh, so it may refuse
    # locally for a moment: retry for a few seconds.)
    producer = Producer(
        sasl(proxy_bootstrap(proxy), alice, PASSWORD, **{"linger.ms": 5, "topic.metadata.refresh.interval.ms": 500})
    )
    outcomes: list[KafkaError | None] = []
    producer.produce(topic, b"before", on_delivery=lambda err, _msg: outcomes.append(err))
    assert producer.flush(30) == 0 and code(outcomes[-1]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    proxy.services.groups.add_members(group, [f"User:{alice}"], actor=ACTOR)
    deadline = time.monotonic() + 20
    while not outcomes or outcomes[-1] is not None:
        assert time.monotonic() < deadline, f"still refused after joining the group: {outcomes[-1]}"
        try:
            producer.produce(topic, b"after", on_delivery=lambda err, _msg: outcomes.append(err))
            assert producer.flush(30) == 0
        except KafkaException as e:
            assert e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            producer.poll(0.5)

    assert produce(proxy, alice, topic, 4) == [None] * 4
    assert code(produce(proxy, bob, topic, 1)[0]) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # not a member
    assert sorted(consume(proxy, alice, topic, consumers, 5)) == sorted([b"after", b"m0", b"m1", b"m2", b"m3"])

    # A DENY on the group from a block that holds the client wins over the group's ALLOW.
    deny = acl(f"Group:{group}", ResourceType.TOPIC, topic, AclOperation.WRITE, DENY, host="127.0.0.1/32")
    assert all(r.succeeded for r in proxy.services.acls.create_acls([deny], actor=ACTOR))
    assert code(produce(proxy, alice, topic, 1)[0]) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # The audit names the user (principal) and the group (the deciding ACL in the rule).
    records = [r for r in proxy.audit_records() if r["principal"] == f"User:{alice}" and r["resource_name"] == topic]
    allowed = [r for r in records if r["decision"] == "ALLOWED" and r["operation"] == "WRITE"]
    denied_by_group = [
        r for r in records if r["decision"] == "DENIED" and f"principal=Group:{group}" in (r["rule"] or "")
    ]
    assert allowed and all(f"principal=Group:{group}" in r["rule"] for r in allowed)
    assert denied_by_group and all("host=127.0.0.1/32" in r["rule"] for r in denied_by_group)

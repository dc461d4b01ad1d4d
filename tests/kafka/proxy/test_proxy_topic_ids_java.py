"""Java's own clients on the APIs that name topics by id, straight to Kafka 3.9 with its ACLs and through the proxy
with the same ACLs in kafkaguard: the same outcomes (``TopicIdsProbe.java``, run from source against the tarball's
kafka-clients jar).

* AdminClient ``describeTopics(names)``: DescribeTopicPartitions v0 (KIP-966) since 3.8;
* AdminClient ``describeTopics(TopicCollection.ofTopicIds)``: Metadata v12 by id;
* AdminClient ``deleteTopics(TopicCollection.ofTopicIds)``: DeleteTopics v6;
* a classic-protocol ``KafkaConsumer``: Fetch v13+ (topics by id) — checked on the requests the proxy forwarded.

And at the packet level: every byte the proxy sent its clients during these runs is searched for an upstream
broker's address (its host followed by one of its listener ports, as Metadata and KIP-951 ``NodeEndpoint`` encode a
broker): none may be there.
"""

from __future__ import annotations

import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import AclOperation as GuardOperation
from kafkaguard.model import ResourceType as GuardResource
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, LOOPBACK, KafkaBroker, java
from tests.kafka.proxy.conftest import api_versions_of
from tests.kafka.proxy.test_proxy_clients import create_topics, grant, sasl, unique
from tests.serving import ServerHandle

pytestmark = pytest.mark.integration

PROBE = Path(__file__).parent.parent / "TopicIdsProbe.java"
PASSWORD = "topic-ids-pw"  # noqa: S105 - a test password
RECORDS = 5


def probe(kafka: KafkaBroker, bootstrap: str, user: str, password: str, mode: str, *args: str) -> list[str]:
    done = subprocess.run(
        [java(), "-cp", kafka.classpath, str(PROBE), bootstrap, user, password, mode, *args],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if line[:1].isdigit()]


def broker_user(kafka: KafkaBroker, name: str, readable: str, visible: str) -> None:
    """``name`` on the broker itself: a SCRAM credential, READ on ``readable``, DESCRIBE on ``visible``."""
    admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          PASSWORD.encode())  # fmt: skip
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(60)
    literal, allow = ResourcePatternType.LITERAL, AclPermissionType.ALLOW
    bindings = [
        AclBinding(ResourceType.TOPIC, readable, literal, f"User:{name}", "*", AclOperation.READ, allow),
        AclBinding(ResourceType.TOPIC, visible, literal, f"User:{name}", "*", AclOperation.DESCRIBE, allow),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(60)


def proxy_user(proxy: ServerHandle, name: str, readable: str, visible: str) -> None:
    proxy.add_user(name, PASSWORD)
    grant(proxy, f"User:{name}", GuardResource.TOPIC, readable, GuardOperation.READ)
    grant(proxy, f"User:{name}", GuardResource.TOPIC, visible, GuardOperation.DESCRIBE)


@pytest.fixture
def sides(proxy: ServerHandle, kafka: KafkaBroker) -> Iterator[dict[str, tuple[str, dict[str, str], str]]]:
    """Per side (``kafka``, ``proxy``): its bootstrap, its topics by role, its limited user."""
    made = {}
    for side, bootstrap in (("kafka", kafka.bootstrap), ("proxy", proxy.bootstrap(next(iter(proxy.ports))))):
        prefix = unique(f"ids-{side}")
        topics = {role: f"{prefix}-{role}" for role in ("readable", "visible", "hidden", "doomed")}
        create_topics(kafka, *topics.values(), partitions=2)
        producer = Producer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
        for i in range(RECORDS):
            producer.produce(topics["readable"], f"r{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        name = f"{prefix}-user"
        if side == "kafka":
            broker_user(kafka, name, topics["readable"], topics["visible"])
        else:
            proxy_user(proxy, name, topics["readable"], topics["visible"])
        made[side] = (bootstrap, topics, name)
    time.sleep(1)  # the broker applies new credentials and ACLs asynchronously (well within this)
    yield made


def outcomes(kafka: KafkaBroker, bootstrap: str, topics: dict[str, str], name: str) -> dict[str, list[str]]:
    roles = ("readable", "visible", "hidden")
    named = [topics[role] for role in roles] + [topics["readable"] + "-missing"]
    ids = [line.split()[1] for line in probe(kafka, bootstrap, ADMIN, ADMIN_PASSWORD, "ids", *named[:3],
                                             topics["doomed"])]  # fmt: skip
    unknown = "MDEyMzQ1Njc4OWFiY2RlZg"  # a topic id no topic has
    return {
        "describe": probe(kafka, bootstrap, name, PASSWORD, "describe", *named),
        "describe-admin": probe(kafka, bootstrap, ADMIN, ADMIN_PASSWORD, "describe", *named),
        "describe-ids": probe(kafka, bootstrap, name, PASSWORD, "describe-ids", *ids[:3], unknown),
        "consume": probe(kafka, bootstrap, name, PASSWORD, "consume", topics["readable"], str(RECORDS)),
        "consume-hidden": probe(kafka, bootstrap, name, PASSWORD, "consume", topics["hidden"], "1"),
        "delete-ids": probe(kafka, bootstrap, name, PASSWORD, "delete-ids", ids[1], ids[3], unknown),
        "delete-ids-admin": probe(kafka, bootstrap, ADMIN, ADMIN_PASSWORD, "delete-ids", ids[3], unknown),
    }


def test_java_clients_see_the_same_outcomes_by_id_through_the_proxy(
    proxy: ServerHandle,
    kafka: KafkaBroker,
    sides: dict[str, tuple[str, dict[str, str], str]],
    to_clients: bytearray,
    upstream_requests: list[bytes],
):
    straight = outcomes(kafka, *sides["kafka"])
    upstream_requests.clear()
    to_clients.clear()
    proxied = outcomes(kafka, *sides["proxy"])
    assert proxied == straight
    # not vacuous: what Kafka itself answers
    assert straight["describe"][:3] == ["0 OK 2 false", "1 OK 2 false", "2 ERROR TopicAuthorizationException"]
    assert straight["describe-ids"][2:] == ["2 ERROR UnknownTopicIdException", "3 ERROR UnknownTopicIdException"]
    assert straight["consume"] == [f"0 RECORDS {RECORDS}"]
    assert straight["consume-hidden"] == ["0 ERROR TopicAuthorizationException"]
    assert straight["delete-ids"] == ["0 ERROR TopicAuthorizationException", "1 ERROR TopicAuthorizationException",
                                      "2 ERROR UnknownTopicIdException"]  # fmt: skip
    assert straight["delete-ids-admin"] == ["0 OK", "1 ERROR UnknownTopicIdException"]

    forwarded, answers = api_versions_of(list(upstream_requests)), bytes(to_clients)
    assert any(key == ApiKey.FETCH and version >= 13 for key, version in forwarded), "the consumer fetched by id"
    assert (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0) in forwarded, "describeTopics used DescribeTopicPartitions"
    assert (ApiKey.DELETE_TOPICS, 6) in forwarded, "deleteTopics by id used DeleteTopics v6"
    upstream_ports = {kafka.port, kafka.mtls_port, kafka.oauth_port, kafka.controller_port}
    leaks = [port for port in upstream_ports if LOOPBACK.encode() + struct.pack(">i", port) in answers]
    assert leaks == [], "an answer to a client carried an upstream broker's address"
    assert len(answers) > 10_000, "the capture saw the answers"

"""The real Kafka broker, one per test session (tests isolate themselves by resource names and users), and a
two-broker cluster for tests that need an upstream of several brokers (started only when a test asks for it).

Tests in this folder run whenever ``KAFKA_TGZ`` or ``KAFKA_HOME`` is set (``.ci/run`` sets ``KAFKA_TGZ`` to the
tarball in ``../shared/kafka``); without either they are skipped, and the test summary says so in one line
(``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka.broker import KafkaBroker, KafkaCluster, KafkaNotConfigured, kafka_home, kafka_source
from tests.kafka.identity_broker import IdentityKafka, start_identity_kafka


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/kafka/" in item.nodeid:
            item.add_marker(pytest.mark.kafka)
            if kafka_source() is None:
                item.add_marker(pytest.mark.skip(reason="real-Kafka tests need KAFKA_TGZ or KAFKA_HOME"))


@pytest.fixture(scope="session")
def kafka_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Kafka distribution, unpacked once per session for the broker and the cluster."""
    try:
        return kafka_home(tmp_path_factory.mktemp("kafka-dist"))
    except KafkaNotConfigured as e:
        pytest.fail(f"the real-Kafka fixture cannot start: {e}")


@pytest.fixture(scope="session")
def kafka(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running broker: SASL_PLAINTEXT + SCRAM on 127.0.0.1, StandardAuthorizer, super user User:admin."""
    broker = KafkaBroker(kafka_dist, tmp_path_factory.mktemp("kafka") / "broker")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_cluster(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A running open cluster: one controller and brokers 1 and 2, PLAINTEXT on 127.0.0.1, no authorizer.

    A test that stops a broker starts it again before it ends (``stop_broker`` / ``start_broker``).
    """
    cluster = KafkaCluster(kafka_dist, tmp_path_factory.mktemp("kafka-cluster"), brokers=2, listener="PLAINTEXT",
                           authorizer=False)  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def identity_kafka(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityKafka]:
    """A second broker with identity listeners (``tests/kafka/identity_broker.py``): MTLS (SSL, client certificate
    required, mapping rules) and OAUTH (SASL_SSL, OAUTHBEARER against a JWKS file), beside SASL_PLAINTEXT."""
    started = start_identity_kafka(kafka_dist, tmp_path_factory.mktemp("identity-kafka"))
    try:
        yield started
    finally:
        started.broker.stop()

"""The real Kafka broker, one per test session (tests isolate themselves by resource names and users).

Tests in this folder run whenever ``KAFKA_TGZ`` or ``KAFKA_HOME`` is set (``.ci/run`` sets ``KAFKA_TGZ`` to the
tarball in ``../shared/kafka``); without either they are skipped, and the test summary says so in one line
(``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka.broker import KafkaBroker, KafkaNotConfigured, kafka_home, kafka_source


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/kafka/" in item.nodeid:
            item.add_marker(pytest.mark.kafka)
            if kafka_source() is None:
                item.add_marker(pytest.mark.skip(reason="real-Kafka tests need KAFKA_TGZ or KAFKA_HOME"))


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running broker: SASL_PLAINTEXT + SCRAM on 127.0.0.1, StandardAuthorizer, super user User:admin."""
    root = tmp_path_factory.mktemp("kafka")
    try:
        home = kafka_home(root / "dist")
    except KafkaNotConfigured as e:
        pytest.fail(f"the real-Kafka fixture cannot start: {e}")
    broker = KafkaBroker(home, root / "broker")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()

"""Authorization equivalence with kafka-python and aiokafka: the scenario of ``test_equivalence`` (same users and
ACLs straight to Kafka and through the proxy), driven by the two other client libraries."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]

from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import ModeProxy
from tests.kafka.proxy.test_equivalence import PASSWORD, Side, prepare, proxy_side

with warnings.catch_warnings():  # kafka-python's imports use importlib.resources' deprecated read_text
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
    from kafka.errors import KafkaError as PythonKafkaError  # type: ignore[import-untyped]

pytestmark = pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
COUNT = 4


def kafka_python_options(side: Side, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": side.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORD,
    }


def kafka_python(side: Side) -> dict[str, Any]:
    producer = KafkaProducer(**kafka_python_options(side, side.name("producer")), max_block_ms=10_000, retries=0)
    sent: dict[str, list[str]] = {}
    for topic in ("orders", "secret"):
        for i in range(COUNT):
            try:
                producer.send(side.name(topic), f"py-{i}".encode(), partition=i % 2).get(timeout=15)
                sent.setdefault(topic, []).append("ok")
            except PythonKafkaError as e:
                sent.setdefault(topic, []).append(type(e).__name__)
    producer.close()
    consumer = KafkaConsumer(side.name("orders"), **kafka_python_options(side, side.name("consumer")),
                             group_id=side.name("group-py"), auto_offset_reset="earliest",
                             consumer_timeout_ms=15_000, enable_auto_commit=False)  # fmt: skip
    values = sorted(m.value.decode() for _, m in zip(range(COUNT), consumer, strict=False))
    consumer.commit()
    committed = sorted(consumer.committed(tp) or 0 for tp in consumer.assignment())
    consumer.close()
    return {"sent": sent, "values": values, "committed": committed}


async def aiokafka_run(side: Side) -> dict[str, Any]:
    options = {"bootstrap_servers": side.bootstrap, "security_protocol": "SASL_PLAINTEXT",
               "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_password": PASSWORD}  # fmt: skip
    producer = AIOKafkaProducer(**options, sasl_plain_username=side.name("producer"), request_timeout_ms=10_000)
    await producer.start()
    sent: dict[str, list[str]] = {}
    try:
        for topic in ("orders", "secret"):
            for i in range(COUNT):
                try:
                    await asyncio.wait_for(producer.send_and_wait(side.name(topic), f"aio-{i}".encode(),
                                                                  partition=i % 2), 15)  # fmt: skip
                    sent.setdefault(topic, []).append("ok")
                except Exception as e:  # noqa: BLE001 - the error class is the outcome compared
                    sent.setdefault(topic, []).append(type(e).__name__)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(side.name("orders"), **options, sasl_plain_username=side.name("consumer"),
                                group_id=side.name("group-aio"), auto_offset_reset="earliest",
                                enable_auto_commit=False)  # fmt: skip
    await consumer.start()
    values: list[str] = []
    try:
        async with asyncio.timeout(30):
            while len(values) < COUNT:
                batch = await consumer.getmany(timeout_ms=1000)
                values += [m.value.decode() for records in batch.values() for m in records]
        await consumer.commit()
    finally:
        await consumer.stop()
    return {"sent": sent, "values": sorted(values)[:COUNT]}


@pytest.mark.timeout(600)
def test_kafka_python_and_aiokafka_see_the_same_outcomes_through_the_proxy(mode_proxy: ModeProxy, kafka: KafkaBroker):
    token = uuid.uuid4().hex[:6]
    sides = (Side("kafka", kafka.bootstrap, f"k{token}"), proxy_side(mode_proxy, kafka, token))
    results: dict[str, dict[str, Any]] = {}
    for side in sides:
        prepare(side, kafka)
        results[side.label] = {"kafka-python": kafka_python(side), "aiokafka": asyncio.run(aiokafka_run(side))}
    direct = results["kafka"]
    assert direct["kafka-python"]["sent"]["orders"] == ["ok"] * COUNT, "the scenario must deliver messages"
    assert set(direct["kafka-python"]["sent"]["secret"]) != {"ok"}, "and must be refused somewhere"
    assert len(direct["aiokafka"]["values"]) == COUNT
    for library in ("kafka-python", "aiokafka"):
        assert results["proxy"][library] == direct[library], library

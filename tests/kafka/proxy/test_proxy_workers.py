"""``kafkaguard proxy --workers 2`` in front of the real broker (issue 39, "Workers" proof): an idempotent producer's
every acknowledged write is on the broker, once, while each worker in turn is SIGKILLed (so whichever served the
producer's connections lost them) and the supervisor replaces it; then SIGTERM stops the node, exit 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import free_port_range
from tests.kafka.proxy.processes import KAFKAGUARD, TIMEOUT, environment, wait_for
from tests.kafka.proxy.test_proxy_clients import sasl, unique
from tests.server.test_cli_serve import wait_until_listening

PASSWORD = "workers-pw"  # noqa: S105 - a test password
MESSAGES = 3000


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _on_broker(kafka: KafkaBroker, topic: str) -> list[bytes]:
    consumer = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": unique("g"),
                                                                        "enable.auto.commit": False}))  # fmt: skip
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(values) < high - low and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                value = message.value()
                assert value is not None
                values.append(value)
        return values
    finally:
        consumer.close()


def test_no_acknowledged_write_is_lost_while_workers_are_killed(kafka: KafkaBroker, tmp_path: Path) -> None:
    data_dir, topic = tmp_path / "data", unique("workers-topic")
    broker_admin = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))
    broker_admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    subprocess.run([str(KAFKAGUARD), "users", "add", "ops", "--password", PASSWORD, "--data-dir", str(data_dir)],
                   check=True, capture_output=True, timeout=60, env=environment())  # fmt: skip
    port = free_port_range()
    log = tmp_path / "proxy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(KAFKAGUARD), "proxy", "--workers", "2", "--data-dir", str(data_dir),
             "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--upstream", kafka.bootstrap,
             "--upstream-security-protocol", "SASL_PLAINTEXT", "--upstream-user", ADMIN, "--super-users", "User:ops"],
            stdout=out, stderr=subprocess.STDOUT, env=environment(KAFKAGUARD_UPSTREAM_PASSWORD=ADMIN_PASSWORD),
        )  # fmt: skip
    try:
        wait_until_listening(process, port, timeout=TIMEOUT)
        for number in (1, 2):  # each worker has its client listener and the broker's port (node 1: port + 2)
            wait_for(log, rf"worker={number} .*listening on SASL_PLAINTEXT://127\.0\.0\.1:{port + 2}:", process)
        pids = {int(n): int(p) for n, p in re.findall(r"worker (\d+) started \(pid (\d+)\)", log.read_text())}
        assert sorted(pids) == [1, 2]

        acknowledged: list[bytes] = []
        failed: list[KafkaError] = []

        def delivered(err: KafkaError | None, message: Message) -> None:
            if err is None:
                value = message.value()
                assert value is not None
                acknowledged.append(value)
            else:
                failed.append(err)

        producer = Producer(sasl(f"127.0.0.1:{port}", "ops", PASSWORD, **{
            "enable.idempotence": True, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
        }))  # fmt: skip
        done = threading.Event()

        def produce() -> None:
            for index in range(MESSAGES):
                producer.produce(topic, f"m-{index}".encode(), on_delivery=delivered)
                producer.poll(0)
                time.sleep(0.002)  # a steady stream across the kills
            producer.flush(TIMEOUT)
            done.set()

        thread = threading.Thread(target=produce, name="producer")
        thread.start()
        for number in (1, 2):  # one of them serves the producer's connections: both are killed in turn
            while len(acknowledged) < MESSAGES * number // 3:
                assert thread.is_alive(), "the producer stopped early"
                time.sleep(0.05)  # polling the producer's progress
            os.kill(pids[number], signal.SIGKILL)
            wait_for(log, rf"worker {number} \(pid {pids[number]}\) killed by SIGKILL", process)
            started = wait_for(log, rf"worker {number} started \(pid (?!{pids[number]}\))(\d+)\)", process)
            pids[number] = int(started.group(1))
            wait_for(log, rf"worker={number} .*listening on SASL_PLAINTEXT://127\.0\.0\.1:{port + 2}:", process)
        thread.join(TIMEOUT * 2)
        assert done.is_set(), "the producer did not finish"
        assert failed == []
        assert len(acknowledged) == MESSAGES
        on_broker = _on_broker(kafka, topic)
        assert sorted(on_broker) == sorted(acknowledged)  # every acknowledged write, none twice
        assert len(set(on_broker)) == MESSAGES
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(TIMEOUT)
    text = log.read_text(errors="replace")
    assert process.returncode == 0, text[-3000:]
    assert not any(_alive(pid) for pid in pids.values())
    assert "Traceback" not in text, text[-3000:]
    assert ADMIN_PASSWORD not in text

"""Graceful drain of ``kafkaguard proxy`` (issue 39) in front of the real broker: an idempotent producer
(confluent-kafka) keeps producing through the proxy while it gets SIGTERM and a new proxy takes its ports (a rolling
restart in place: what a balancer's next connect reaches); a long-polling Fetch that waits upstream when the signal
comes is answered. Every acknowledged write is in the topic, exactly once; the longest pause between two
acknowledgements is reported (``longest_pause_seconds``), not asserted.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import free_port_range
from tests.kafka.proxy.test_proxy_clients import create_topics, sasl, unique
from tests.server.test_cli_serve import wait_until_listening
from tests.wire import Wire, decode_response, encode_request

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")
USER, PASSWORD = "ops", "drain-ops-pw"  # a super user of the proxies: the test is the drain, not the ACLs
GRACE = 30.0
TIMEOUT = 60.0

log = logging.getLogger(__name__)


def environment(**extra: str) -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    return {**clean, **extra}


@dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_log(self, pattern: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while re.search(pattern, self.log_text(), re.M) is None:
            assert self.process.poll() is None or re.search(pattern, self.log_text(), re.M), self.log_text()[-3000:]
            assert time.monotonic() < deadline, f"no {pattern!r} in the log: {self.log_text()[-3000:]}"
            time.sleep(0.02)  # polling the log, bounded by the deadline


@dataclass
class Proxies:
    """Proxies started on the same ports, one after the other (each with its own data directory)."""

    kafka: KafkaBroker
    directory: Path
    port: int = field(default_factory=free_port_range)
    started: list[Proxy] = field(default_factory=list)
    prepared: int = 0

    def prepare(self) -> Path:
        """The next proxy's config file, its data directory holding the user (done ahead: it takes a second)."""
        name = f"proxy-{self.prepared}"
        self.prepared += 1
        data_dir = self.directory / name
        subprocess.run([str(KAFKAGUARD), "users", "add", USER, "--password", PASSWORD, "--data-dir", str(data_dir)],
                       check=True, capture_output=True, timeout=60, env=environment())  # fmt: skip
        config = self.directory / f"{name}.yaml"
        config.write_text(json.dumps({
            "data_dir": str(data_dir),
            "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{self.port}"],
            "upstream": self.kafka.bootstrap,
            "upstream_security_protocol": "SASL_PLAINTEXT",
            "upstream_user": ADMIN,
            "super_users": f"User:{USER}",
            "shutdown_grace_seconds": GRACE,
            "log_level": "INFO",
        }))  # fmt: skip
        return config

    def start(self, config: Path | None = None) -> Proxy:
        """Start the proxy of ``config`` (None: a new one); returns once its client and node ports listen."""
        config = config or self.prepare()
        log = config.with_suffix(".log")
        with log.open("wb") as out:
            env = environment(KAFKAGUARD_UPSTREAM_PASSWORD=ADMIN_PASSWORD)
            process = subprocess.Popen([str(KAFKAGUARD), "proxy", "--config", str(config)], stdout=out,
                                       stderr=subprocess.STDOUT, env=env)  # fmt: skip
        proxy = Proxy(process, log)
        self.started.append(proxy)
        wait_until_listening(process, self.port, timeout=TIMEOUT)
        wait_until_listening(process, self.port + 2, timeout=TIMEOUT)  # node 1 of the broker
        return proxy


@pytest.fixture
def proxies(kafka: KafkaBroker, tmp_path: Path) -> Iterator[Proxies]:
    made = Proxies(kafka, tmp_path)
    yield made
    for proxy in made.started:
        if proxy.process.poll() is None:
            proxy.process.send_signal(signal.SIGTERM)
            proxy.process.wait(TIMEOUT)
        assert "Traceback" not in proxy.log_text(), proxy.log_text()[-3000:]


class Producing:
    """An idempotent producer in a thread of its own, producing 0, 1, 2 … until told to stop; it keeps every
    acknowledged value with the time of its acknowledgement, and every failure."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer(sasl(bootstrap, USER, PASSWORD, **{
            "enable.idempotence": True, "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
        }))  # fmt: skip
        self.topic = topic
        self.acked: list[tuple[int, float]] = []
        self.failed: list[tuple[int, str]] = []
        self.sent = 0  # values produced (set when the thread ends)
        self.left = -1  # unacknowledged after the last flush (set when the thread ends)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producing", daemon=True)

    def __enter__(self) -> Producing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        value = int(message.value() or b"-1")
        if error is None:
            self.acked.append((value, time.monotonic()))
        else:
            self.failed.append((value, str(error)))

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, str(sent).encode(), on_delivery=self._delivered)
                sent += 1
            except BufferError:  # its queue is full while no proxy answers: wait for room
                self.producer.poll(0.05)
            self.producer.poll(0)
            time.sleep(0.002)
        self.sent = sent
        self.left = self.producer.flush(TIMEOUT)

    def wait_for_acks(self, count: int) -> None:
        deadline = time.monotonic() + TIMEOUT
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"{len(self.acked)} of {count} writes acknowledged; {self.failed[:3]}"
            time.sleep(0.01)  # polling the delivery reports, bounded by the deadline

    def longest_pause(self) -> float:
        times = sorted(at for _, at in self.acked)
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def long_poll(port: int, topic: str) -> Wire:
    """A connection whose Fetch of the empty ``topic`` waits upstream (min_bytes 1, max wait 4 s)."""
    wire = Wire(("127.0.0.1", port), timeout=TIMEOUT)
    wire.login(USER, PASSWORD, "SCRAM-SHA-512")
    wait = i32Timedelta.parse(timedelta(seconds=4))
    fetch = FetchRequest(max_wait=wait, min_bytes=i32(1), forgotten_topics_data=(), topics=(
        FetchTopic(topic=TopicName(topic), partitions=(
            FetchPartition(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)),)),))  # fmt: skip
    wire.send_frame(encode_request(fetch, 4242))
    return wire


def consumed(kafka: KafkaBroker, topic: str) -> list[int]:
    """Every value in partition 0 of ``topic``, read straight from the broker."""
    consumer = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": unique("drain-check"),
                                                                         "enable.auto.commit": False}))  # fmt: skip
    try:
        partition = TopicPartition(topic, 0)
        low, high = consumer.get_watermark_offsets(partition, timeout=30)
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[int] = []
        deadline = time.monotonic() + TIMEOUT
        while len(values) < high - low:
            assert time.monotonic() < deadline, f"read {len(values)} of {high - low} records back"
            for message in consumer.consume(500, timeout=1):
                assert message.error() is None, message.error()
                values.append(int(message.value() or b"-1"))
        return values
    finally:
        consumer.close()


def test_a_producer_loses_no_acknowledged_write_while_the_proxy_drains_and_a_long_poll_is_answered(
    proxies: Proxies, kafka: KafkaBroker, record_property: Any
) -> None:
    topic, empty = unique("drain"), unique("drain-empty")
    create_topics(kafka, topic, empty)
    first = proxies.start()
    next_config = proxies.prepare()
    with Producing(f"127.0.0.1:{proxies.port}", topic) as producing:
        producing.wait_for_acks(300)
        polling = long_poll(proxies.port, empty)
        time.sleep(0.5)  # the Fetch has gone upstream: the broker holds it for up to 4 s
        signalled = time.monotonic()
        first.process.send_signal(signal.SIGTERM)
        first.wait_for_log(r"draining: stopped accepting on")
        # its ports are free: the next proxy takes them while it drains (what a balancer's next connect reaches)
        launched = time.monotonic()
        second = proxies.start(next_config)
        listening = time.monotonic()
        acked_before = len(producing.acked)

        payload = polling.recv_frame()  # the long poll in flight is answered, then its connection ends
        answered = time.monotonic()
        assert payload is not None, "the long-polling Fetch in flight got no answer"
        correlation_id, answer = decode_response(payload, FetchRequest.__api_key__, 12)
        assert correlation_id == 4242 and int(answer.error_code.value) == 0
        assert [int(p.error_code.value) for t in answer.responses for p in t.partitions] == [0]
        assert polling.recv_frame() is None
        polling.close()

        assert first.process.wait(TIMEOUT) == 0
        exited = time.monotonic()
        producing.wait_for_acks(acked_before + 300)
    assert producing.left == 0, "writes still unacknowledged after the flush"

    text = first.log_text()
    assert re.search(r"drained in [\d.]+ s: \d+ connections closed at a request boundary, 0 forced closed", text), \
        text[-3000:]  # fmt: skip
    assert exited - signalled < GRACE
    assert answered > signalled  # it was in flight across the drain, not answered before the signal
    assert producing.failed == [], producing.failed[:5]
    values = consumed(kafka, topic)
    acked = sorted(value for value, _ in producing.acked)
    assert len(values) == len(set(values)), "a write is in the topic twice"
    assert sorted(values) == acked  # every acknowledged write is there, and nothing else: 0 lost
    assert len(acked) == producing.sent  # every write was acknowledged
    pause = producing.longest_pause()
    record_property("longest_pause_seconds", round(pause, 3))
    record_property("acknowledged_writes", len(acked))
    record_property("next_proxy_listening_after_seconds", round(listening - launched, 3))
    log.info(f"drain: {len(acked)} writes acknowledged, all in the topic once; longest pause {pause:.3f} s (the next "
          f"proxy listened {listening - launched:.3f} s after its launch, {launched - signalled:.3f} s after SIGTERM); "
          f"long poll answered {answered - signalled:.3f} s after SIGTERM; first proxy exited after "
          f"{exited - signalled:.3f} s")  # fmt: skip
    second.process.send_signal(signal.SIGTERM)
    assert second.process.wait(TIMEOUT) == 0

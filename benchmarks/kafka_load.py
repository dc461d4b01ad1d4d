"""Client-side Kafka load for benchmarks, with confluent-kafka (librdkafka): produce and consume throughput, and
latency at a fixed produce rate.

Every function takes a ``ClientSettings`` (where to connect and as whom) and applies the same producer and consumer
settings (``PRODUCER``, ``CONSUMER``) whatever it connects to, so two runs differ only in the bootstrap address.
Clocks: ``time.perf_counter`` / ``perf_counter_ns`` of this process; the fixed-rate messages carry their send time
in their first 8 bytes, so produce → consume latency is read on the same clock.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

#: Producer settings of every run: batched (linger 5 ms, 256 KiB batches), acks=all, no compression, no idempotence.
PRODUCER: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 256 * 1024,
    "batch.num.messages": 10_000,
    "acks": "all",
    "compression.type": "none",
    "enable.idempotence": False,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 512 * 1024,
}

#: Consumer settings of every run (fetch settings spelled out, so both runs fetch alike).
CONSUMER: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 50 * 1024 * 1024,
    "max.partition.fetch.bytes": 1024 * 1024,
    "queued.min.messages": 100_000,
    # librdkafka waits this long before fetching again once its queue holds queued.min.messages; its default of
    # 1000 ms stalls a consumer that fetches faster than the application reads (direct to Kafka, 1M messages, the
    # direct runs took 2.5 s where 1 s was enough), which measures the pause, not the path
    "fetch.queue.backoff.ms": 10,
    "check.crcs": False,
}


@dataclass(frozen=True)
class ClientSettings:
    """Where a client connects and as whom (SCRAM over SASL_PLAINTEXT unless said otherwise; over SASL_SSL the
    server's certificate is checked against ``ssl_cafile``, its host name included)."""

    bootstrap: str
    user: str
    password: str
    mechanism: str = "SCRAM-SHA-512"
    security_protocol: str = "SASL_PLAINTEXT"
    ssl_cafile: str | None = None

    def config(self, **extra: Any) -> dict[str, Any]:
        tls = {"ssl.ca.location": self.ssl_cafile} if self.ssl_cafile is not None else {}
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.user,
            "sasl.password": self.password,
            "client.id": "kafkaguard-bench",
            **tls,
            **extra,
        }


#: The fixed-rate sender's pacing: every tick it sends the messages due so far.
TICK_S = 0.001


class LoadError(Exception):
    """A run could not complete (delivery errors, a timeout, a consumer error)."""


def pct(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of already sorted values (nearest rank); NaN when there are none."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


# ------------------------------------------------------------------------------------------------ throughput


@dataclass
class Throughput:
    """``count`` messages of ``payload_bytes`` in total over ``seconds``."""

    count: int
    payload_bytes: int
    seconds: float
    #: Consume only: seconds from subscribing to the first message (group join, coordinator, first fetch).
    startup_s: float = float("nan")

    @property
    def msgs_per_s(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("nan")

    @property
    def mb_per_s(self) -> float:
        """Payload megabytes (10^6 bytes) per second."""
        return self.payload_bytes / 1e6 / self.seconds if self.seconds > 0 else float("nan")


#: A run gives up when it makes no progress for this long (a dead proxy must not hang the benchmark).
STALL_S = 30.0


def _produce(producer: Producer, topic: str, value: bytes) -> None:
    """``produce``, serving delivery reports while librdkafka's queue is full (for at most ``STALL_S``)."""
    try:
        producer.produce(topic, value)
        return
    except BufferError:
        pass
    deadline = time.monotonic() + STALL_S
    while time.monotonic() < deadline:
        producer.poll(0.005)
        try:
            producer.produce(topic, value)
            return
        except BufferError:
            continue
    raise LoadError(f"librdkafka's queue stayed full for {STALL_S:g} s: nothing is being delivered")


def _flush(producer: Producer, progress: Callable[[], int], timeout: float) -> int:
    """``flush`` in steps, giving up early when no message is delivered for ``STALL_S``; messages left."""
    deadline = time.monotonic() + timeout
    while True:
        before = progress()
        left = producer.flush(min(STALL_S, max(0.0, deadline - time.monotonic())))
        if not left or time.monotonic() >= deadline or progress() == before:
            return left


def wait_ready(settings: ClientSettings, topic: str, timeout: float = 30.0) -> None:
    """Until ``topic``'s metadata (with a leader) comes back for this user: logins and credentials are in place.

    :raises LoadError: not within ``timeout`` seconds (with the last error).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    producer = Producer(settings.config(**{"socket.timeout.ms": 5000}))
    try:
        while time.monotonic() < deadline:
            try:
                meta = producer.list_topics(topic, timeout=5.0)
                found = meta.topics.get(topic)
                if (
                    found is not None
                    and found.error is None
                    and found.partitions
                    and all(p.leader >= 0 for p in found.partitions.values())
                ):
                    return
                last = found.error if found is not None else "no such topic"
            except KafkaException as e:
                last = e
            time.sleep(0.5)  # retrying until the deadline: credentials/ACLs propagate asynchronously in KRaft
    finally:
        producer.flush(5)
    raise LoadError(
        f"{settings.bootstrap}: metadata of {topic} not available to {settings.user} in {timeout:g} s: {last}"
    )


def broker_addresses(settings: ClientSettings, timeout: float = 30.0) -> dict[int, str]:
    """The brokers (``{node id: "host:port"}``) a Metadata response through ``settings.bootstrap`` lists."""
    producer = Producer(settings.config())
    try:
        meta = producer.list_topics(timeout=timeout)
        return {int(node_id): f"{b.host}:{b.port}" for node_id, b in meta.brokers.items()}
    finally:
        producer.flush(5)


def produce_throughput(
    settings: ClientSettings,
    topic: str,
    count: int,
    size: int,
    window: AbstractContextManager[object] | None = None,
    timeout: float = 300.0,
) -> Throughput:
    """Produce ``count`` messages of ``size`` random bytes as fast as librdkafka takes them; the clock runs from the
    first ``produce`` to the end of ``flush`` (every message acknowledged), and ``window`` (a meter) is entered and
    left with it. Connection and metadata come first.

    :raises LoadError: a message was not delivered, or the flush timed out.
    """
    errors: list[KafkaError] = []
    delivered = 0

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(err)
        else:
            delivered += 1

    producer = Producer(settings.config(**PRODUCER, on_delivery=on_delivery))
    producer.list_topics(topic, timeout=30.0)
    value = os.urandom(size)
    with window or nullcontext():
        start = time.perf_counter()
        for i in range(count):
            _produce(producer, topic, value)
            if i % 1000 == 0:
                producer.poll(0)
        left = _flush(producer, lambda: delivered + len(errors), timeout)
        seconds = time.perf_counter() - start
    if left or errors or delivered != count:
        raise LoadError(f"{settings.bootstrap}: {delivered}/{count} delivered, {left} unflushed, errors {errors[:3]}")
    return Throughput(count, count * size, seconds)


def consume_throughput(
    settings: ClientSettings,
    topic: str,
    group: str,
    count: int,
    window: AbstractContextManager[object] | None = None,
    timeout: float = 300.0,
    extra: Mapping[str, Any] | None = None,
) -> Throughput:
    """Subscribe (group ``group``, no commits, so reading starts at the earliest offset every time) and read ``count``
    messages. Throughput is over the messages after the first batch, from its arrival to the last message's (and
    ``window`` is entered and left with that clock); ``startup_s`` is from ``subscribe`` to the first batch.
    ``extra``: consumer settings over ``CONSUMER`` (``group.protocol=consumer`` for a KIP-848 consumer).

    :raises LoadError: a consumer error, or fewer than ``count`` messages within ``timeout`` seconds.
    """
    consumer = Consumer(settings.config(**(CONSUMER | dict(extra or {})), **{"group.id": group}))
    try:
        with ExitStack() as metering:

            def begin() -> None:  # at the first batch
                metering.enter_context(window or nullcontext())

            return _consume(consumer, settings, topic, count, timeout, begin)
    finally:
        consumer.close()


def _consume(
    consumer: Consumer, settings: ClientSettings, topic: str, count: int, timeout: float, begin: Callable[[], None]
) -> Throughput:
    consumer.subscribe([topic])
    subscribed = time.perf_counter()
    deadline = subscribed + timeout
    first_at = last_at = 0.0
    first_batch = received = payload = 0
    progress_at = subscribed
    while received < count:
        now = time.perf_counter()
        if now > deadline or now - progress_at > STALL_S:
            raise LoadError(f"{settings.bootstrap}: {received}/{count} messages in {now - subscribed:.0f} s")
        batch = consumer.consume(num_messages=min(1000, count - received), timeout=1.0)
        if not batch:
            continue
        now = progress_at = time.perf_counter()
        for msg in batch:
            error = msg.error()
            if error is not None:
                raise LoadError(f"{settings.bootstrap}: consumer error {error}")
            payload += len(msg.value() or b"")
        if not received:
            begin()
            first_at, first_batch = now, len(batch)
            payload = 0
        received += len(batch)
        last_at = now
    steady = received - first_batch
    return Throughput(steady, payload, last_at - first_at, startup_s=first_at - subscribed)


# ------------------------------------------------------------------------------------------------ fixed rate


@dataclass
class Latency:
    """Latencies (ms, sorted) of messages sent at a fixed rate after the warm-up."""

    rate: float  # the target, messages/s
    seconds: float  # the measured window
    sent: int  # messages sent in the window and delivered
    ack_ms: list[float] = field(default_factory=list)  # produce() → delivery report
    e2e_ms: list[float] = field(default_factory=list)  # produce() → the consumer has it
    errors: int = 0
    behind_s: float = 0.0  # how far the sender fell behind its schedule at worst

    @property
    def achieved_rate(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> dict[str, float]:
        return {
            "ack_p50_ms": pct(self.ack_ms, 0.50),
            "ack_p99_ms": pct(self.ack_ms, 0.99),
            "ack_p999_ms": pct(self.ack_ms, 0.999),
            "ack_max_ms": self.ack_ms[-1] if self.ack_ms else float("nan"),
            "e2e_p50_ms": pct(self.e2e_ms, 0.50),
            "e2e_p99_ms": pct(self.e2e_ms, 0.99),
            "e2e_p999_ms": pct(self.e2e_ms, 0.999),
            "e2e_max_ms": self.e2e_ms[-1] if self.e2e_ms else float("nan"),
            "ack_mean_ms": statistics.fmean(self.ack_ms) if self.ack_ms else float("nan"),
        }


class _TailReader(threading.Thread):
    """Reads ``topic``'s partitions from given offsets and records produce → consume latency (ns) of every
    ``keep_every``-th message sent at or after ``cut_ns``. librdkafka's ``consume`` releases the GIL while it waits."""

    def __init__(self, consumer: Consumer, partitions: list[TopicPartition], keep_every: int) -> None:
        super().__init__(name="bench-tail-reader", daemon=True)
        self.consumer = consumer
        self.partitions = partitions
        self.keep_every = keep_every
        self.cut_ns = 2**63
        self.samples: list[int] = []
        self.received = 0
        self.errors = 0
        self.stop_after: int | None = None  # stop once this many messages arrived
        self.stopped = threading.Event()

    def run(self) -> None:
        self.consumer.assign(self.partitions)
        samples, consumer, keep_every = self.samples, self.consumer, self.keep_every
        counted = 0
        while not self.stopped.is_set():
            if self.stop_after is not None and self.received >= self.stop_after:
                break
            msg = consumer.poll(0.05)  # returns as soon as a message is there (consume() would wait for a batch)
            if msg is None:
                continue
            now = time.perf_counter_ns()
            value = msg.value()
            if msg.error() is not None or value is None:
                self.errors += 1
                continue
            self.received += 1
            sent = int.from_bytes(value[:8], "big")
            if sent >= self.cut_ns:
                counted += 1
                if counted % keep_every == 0:
                    samples.append(now - sent)


def fixed_rate(
    settings: ClientSettings,
    topic: str,
    rate: float,
    seconds: float,
    warmup: float,
    size: int,
    group: str,
    keep_every: int = 1,
    window: AbstractContextManager[object] | None = None,
    drain_timeout: float = 30.0,
) -> Latency:
    """Send ``rate`` messages/s for ``warmup + seconds`` (one producer, paced in 1 ms ticks, each message stamped with
    its send time), and read them back with a consumer assigned at the partitions' ends (``group`` is its group id;
    it joins no group and commits nothing). Messages sent during the warm-up are not counted; of the others every
    ``keep_every``-th one's latencies are kept (1: all). ``produce → ack`` ends when the delivery report is served
    by ``poll`` (which waits for reports until the next tick), ``produce → consume`` when ``poll`` returns it.
    ``window`` (a meter) is entered when sending starts and left when every message is acknowledged and read.

    :raises LoadError: the producer could not flush its messages within ``drain_timeout``.
    """
    ack: list[int] = []
    errors = counted = 0
    cut_ns = 2**63

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        nonlocal errors, counted
        value = msg.value()
        if err is not None or value is None:
            errors += 1
            return
        sent = int.from_bytes(value[:8], "big")
        if sent >= cut_ns:
            counted += 1
            if counted % keep_every == 0:
                ack.append(time.perf_counter_ns() - sent)

    producer = Producer(settings.config(**PRODUCER, on_delivery=on_delivery))
    consumer = Consumer(settings.config(**CONSUMER, **{"group.id": group}))
    meta = producer.list_topics(topic, timeout=30.0)
    partitions = []
    for p in sorted(meta.topics[topic].partitions):
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30.0)
        partitions.append(TopicPartition(topic, p, high))
    reader = _TailReader(consumer, partitions, keep_every)
    try:
        pad = os.urandom(size - 8)
        total = int(rate * (warmup + seconds))
        reader.start()
        time.sleep(0.5)  # let the reader's first fetch be in flight before the first message
        with window or nullcontext():
            start = time.perf_counter()
            cut_ns = reader.cut_ns = time.perf_counter_ns() + int(warmup * 1e9)
            sent = 0
            behind = 0.0  # beyond one tick
            while sent < total:
                elapsed = time.perf_counter() - start
                due = min(total, int(elapsed * rate) + 1)
                behind = max(behind, (due - sent) / rate - TICK_S)
                while sent < due:
                    _produce(producer, topic, time.perf_counter_ns().to_bytes(8, "big") + pad)
                    sent += 1
                # Serve delivery reports until the next tick: poll returns early when it served one, but librdkafka
                # takes whole milliseconds (a shorter wait would not block), so the last fraction is slept.
                next_tick = start + (int(elapsed / TICK_S) + 1) * TICK_S
                while (wait := next_tick - time.perf_counter()) > 0:
                    if wait >= 0.001:
                        producer.poll(wait)
                    else:
                        producer.poll(0)
                        time.sleep(wait)
            left = _flush(producer, lambda: counted + errors, drain_timeout)
            if left:
                raise LoadError(f"{settings.bootstrap}: {left} messages not delivered in {drain_timeout:g} s")
            reader.stop_after = total - errors
            reader.join(drain_timeout)
    finally:
        reader.stopped.set()
        if reader.ident is not None:  # started
            reader.join(10)
        consumer.close()
    result = Latency(rate, seconds, counted, errors=errors + reader.errors, behind_s=behind)
    result.ack_ms = sorted(d / 1e6 for d in ack)
    result.e2e_ms = sorted(d / 1e6 for d in reader.samples)
    return result

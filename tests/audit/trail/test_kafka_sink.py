"""The Kafka sink's bookkeeping, with a scripted producer (the real cluster's side is in
tests/kafka/test_audit_topic_sink.py): the longest acknowledged prefix is committed, what was acknowledged after a
failure is not sent again, routing drops never reach the spool, and a full spool's drops are counted and logged."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

from kafkaguard.audit.records.routing import Router, parse_routes
from kafkaguard.audit.records.spool import Spool
from kafkaguard.audit.records.trail_statistics import DROPPED, ROUTED_DROP, SENT, SPOOLED
from kafkaguard.audit.trail.kafka_sink import KafkaSink
from kafkaguard.audit.trail.sinks import Outgoing


class ScriptedProducer:
    """Acknowledges every record at its next poll, but fails those whose value is in ``fail_once`` the first time."""

    def __init__(self, fail_once: set[bytes]) -> None:
        self.fail_once = fail_once
        self.sent: list[bytes] = []
        self._waiting: list[tuple[bytes, Any]] = []

    def produce(self, topic: str, *, value: bytes, key: bytes, on_delivery: Any) -> None:
        self._waiting.append((value, on_delivery))

    def poll(self, _timeout: float = 0) -> int:
        waiting, self._waiting = self._waiting, []
        for value, callback in waiting:
            if value in self.fail_once:
                self.fail_once.discard(value)
                callback("_MSG_TIMED_OUT", None)
            else:
                self.sent.append(value)
                callback(None, None)
        return len(waiting)

    def flush(self, _timeout: float = 0) -> int:
        self.poll()
        return 0


def event(n: int, subject: str = "TOPIC:t") -> Outgoing:
    return Outgoing("authorization", subject, {"principal": "User:a", "decision": "ALLOWED"}, f"e{n:03d}")


def sink_with(tmp_path: Path, producer: ScriptedProducer, routes: list[dict[str, str]] | None = None,
              max_bytes: int = 1024 * 1024) -> KafkaSink:  # fmt: skip
    return KafkaSink({"bootstrap.servers": "unused:9092"}, Router(parse_routes(routes or []), "audit"),
                     Spool(tmp_path, max_bytes=max_bytes), delivery_timeout_seconds=1.0, retry_backoff_seconds=0.01,
                     producer_factory=lambda _config: producer)  # fmt: skip


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)  # polling the sender thread, bounded


def test_a_failure_in_the_middle_resends_only_what_was_not_acknowledged(tmp_path: Path):
    producer = ScriptedProducer(fail_once={b"e003"})
    sink = sink_with(tmp_path, producer)
    sink.start()
    try:
        sink.write([event(n) for n in range(8)])
        wait_for(lambda: sink.statistics.get("kafka", SENT) == 8)
    finally:
        sink.close()
    assert sorted(producer.sent) == [f"e{n:03d}".encode() for n in range(8)]  # each exactly once
    assert producer.sent[-1] == b"e003"  # the failed one, sent again after its neighbours were acknowledged
    assert sink.statistics.get("kafka", SPOOLED) == 1
    assert sink.spool.pending_bytes == 0


def test_routed_drops_are_counted_and_never_spooled(tmp_path: Path):
    producer = ScriptedProducer(set())
    sink = sink_with(tmp_path, producer, routes=[{"resource": "TOPIC:noise", "topic": "drop"}])
    sink.start()
    try:
        sink.write([event(1), event(2, "TOPIC:noise-1"), event(3)])
        wait_for(lambda: sink.statistics.get("kafka", SENT) == 2)
    finally:
        sink.close()
    assert producer.sent == [b"e001", b"e003"]
    assert sink.statistics.get("kafka", ROUTED_DROP) == 1


def test_a_full_spool_counts_and_logs_its_drops(tmp_path: Path, caplog):
    producer = ScriptedProducer(set())
    sink = sink_with(tmp_path, producer, max_bytes=1024)
    sink.spool.open()  # no sender: nothing leaves the spool
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.trail.kafka_sink"):
        sink.write([event(n) for n in range(200)])
    dropped = sink.statistics.get("kafka", DROPPED)
    assert 0 < dropped < 200 and dropped == sink.spool.dropped
    assert any(f"{dropped} record(s) dropped" in r.getMessage() for r in caplog.records)
    sink.spool.close()


def noisy_and_quiet(count: int) -> list[Outgoing]:
    """``count`` events of User:noisy's requests, one in 50 a login of User:quiet (each ~400 bytes)."""
    events = []
    for n in range(count):
        if n % 50 == 0:
            events.append(Outgoing("authentication", "User:quiet", {"result": "SUCCESS"}, f"q{n:05d}".ljust(400, "."),
                                   "User:quiet"))  # fmt: skip
        else:
            events.append(Outgoing("authorization", "TOPIC:t", {"principal": "User:noisy"}, f"n{n:05d}".ljust(400, "."),
                                   "User:noisy"))  # fmt: skip
    return events


def test_a_full_spool_takes_from_the_noisy_and_counts_per_principal_and_category(tmp_path: Path, caplog):
    producer = ScriptedProducer(set())
    sink = sink_with(tmp_path, producer, max_bytes=64 * 1024)
    sink.spool.open()  # no sender: nothing leaves the spool
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.trail.kafka_sink"):
        for event_ in noisy_and_quiet(1000):
            sink.write([event_])
        sink._warn_drops(force=True)
    drops = sink.statistics.spool_drops()
    assert set(drops) == {("User:noisy", "authorization")}  # the quiet principal lost nothing
    assert drops["User:noisy", "authorization"] == sink.statistics.get("kafka", DROPPED) == sink.spool.dropped > 800
    warnings = [r.getMessage() for r in caplog.records if "spool is full" in r.getMessage()]
    counts = [int(found.group(1)) for w in warnings if (found := re.search(r": (\d+) record\(s\) dropped", w))]
    assert sum(counts) == sink.spool.dropped  # the first at once, the rest at the next (here: forced)
    for warning, count in zip(warnings, counts, strict=True):
        assert warning.endswith(f"lost the most: User:noisy {count} (authorization {count})")
    values = [item.value[:6] for _, item in sink.spool.read(10_000, max_bytes=1 << 30)]
    assert [v for v in values if v.startswith(b"q")] == [f"q{n:05d}".encode() for n in range(0, 1000, 50)]
    sink.spool.close()


def test_a_principal_in_a_warning_is_printable(tmp_path: Path, caplog):
    sink = sink_with(tmp_path, ScriptedProducer(set()), max_bytes=4 * 1024)
    sink.spool.open()
    evil = "User:x\nWARNING forged line"
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.trail.kafka_sink"):
        sink.write([Outgoing("authorization", "TOPIC:t", {}, "v" * 500, evil) for _ in range(20)])
        sink._warn_drops(force=True)
    [warning] = [r.getMessage() for r in caplog.records if "spool is full" in r.getMessage()]
    assert "\n" not in warning and "User:x\\nWARNING forged line" in warning
    sink.spool.close()


class UnreachableProducer(ScriptedProducer):
    """Every delivery fails, as with the cluster down; counts the records produced per round (per poll that
    answers)."""

    def __init__(self) -> None:
        super().__init__(set())
        self.rounds: list[int] = []

    def poll(self, _timeout: float = 0) -> int:
        waiting, self._waiting = self._waiting, []
        if waiting:
            self.rounds.append(len(waiting))
        for _value, callback in waiting:
            callback("_TRANSPORT", None)
        return len(waiting)


def test_while_the_cluster_is_unreachable_only_a_probe_is_in_flight(tmp_path: Path):
    producer = UnreachableProducer()
    sink = sink_with(tmp_path, producer, max_bytes=64 * 1024)
    sink.start()
    try:
        sink.write(noisy_and_quiet(100))
        wait_for(lambda: len(producer.rounds) >= 4)
        sink.write(noisy_and_quiet(1000))  # the spool is full: it makes room in all but the probe
        wait_for(lambda: len(producer.rounds) >= 6)
    finally:
        sink.close()
    # the first round: a batch (the cluster was not known to be down), at most a quarter of the spool
    assert 1 < producer.rounds[0] <= (64 * 1024 // 4) // 400
    assert set(producer.rounds[1:]) == {1}  # then one record at a time
    assert sink.spool.dropped > 0 and sink.spool.evicted == sink.spool.dropped
    assert ("User:quiet", "authentication") not in sink.statistics.spool_drops()

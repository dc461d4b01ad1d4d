"""``kafkaguard audit collect`` against the real broker: envelopes produced in transactions (one aborted) across
midnight, collect run as a subprocess and SIGKILLed at several points (before it is assigned, right after a file's
rename — where its commit may not have happened — and with other partitions' files half buffered), then run until
idle: the dataset holds every committed record exactly once (ids and offsets), nothing of the aborted transaction,
no overlapping files, no temporary file; the group's offsets stand where the files end; and a run on the finished
dataset writes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkaguard.pipeline import collect_files
from kafkaguard.pipeline.collect_plan import FileRange, overlaps
from tests.kafka.broker import KafkaBroker
from tests.kafka.java_tools import unique

pytestmark = pytest.mark.integration

PARTITIONS = 3
START = datetime(2025, 3, 14, 23, 50, tzinfo=UTC)  # ten minutes before midnight: files split by day
BATCHES = 4
PER_BATCH = 400
PER_FILE = 40
SRC = str(Path(__file__).resolve().parents[2] / "src")


def envelope(i: int) -> bytes:
    when = (START + timedelta(seconds=i)).isoformat().replace("+00:00", "Z")
    category = "management" if i % 10 == 3 else "authorization"
    data: dict[str, Any] = (
        {"version": 1, "action": "acl.created", "actor": {"principal": "User:ops"}, "result": "SUCCESS"}
        if category == "management"
        else {"version": 2, "time": when, "principal": f"User:u{i % 7}", "host": "10.0.0.1", "api": "Fetch",
              "operation": "READ", "resource_type": "TOPIC", "pattern_type": "LITERAL", "resource_name": "orders",
              "decision": "ALLOWED", "rule": None, "count": 1 + i % 4}
    )  # fmt: skip
    return json.dumps(
        {"specversion": "1.0", "id": f"ev-{i:06d}", "source": "kafkaguard://node-1",
         "type": f"io.kafkaguard.{category}.v1" if category == "management" else "io.kafkaguard.authorization.v2",
         "time": when, "subject": "TOPIC:orders", "datacontenttype": "application/json",
         "dataschema": "https://kafkaguard.dev/schemas/audit/v2.json", "data": data}
    ).encode()  # fmt: skip


def produce(kafka: KafkaBroker, topic: str) -> tuple[dict[tuple[int, int], bytes], set[tuple[int, int]]]:
    """Committed records by (partition, offset) → value, and the offsets of an aborted transaction's records."""
    producer = Producer({**kafka.client_config(), "transactional.id": f"{topic}-tx", "linger.ms": 5})
    producer.init_transactions(30)
    delivered: dict[tuple[int, int], bytes] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered[(msg.partition(), msg.offset())] = msg.value()

    aborted: set[tuple[int, int]] = set()
    i = 0
    for batch in range(BATCHES + 1):
        abort = batch == 2
        producer.begin_transaction()
        before = set(delivered)
        for k in range(PER_BATCH if not abort else 50):
            value = envelope(i) if k % 97 != 5 else f"not an envelope {i}".encode()  # a few bad lines
            producer.produce(topic, value, key=f"k{i}".encode(), on_delivery=on_delivery)
            i += 1
            producer.poll(0)
        producer.flush(30)
        if abort:
            producer.abort_transaction(30)
            aborted = set(delivered) - before
            for key in aborted:
                del delivered[key]
        else:
            producer.commit_transaction(30)
    del producer
    return delivered, aborted


def collect_command(kafka: KafkaBroker, topic: str, dataset: Path, props: Path, *extra: str,
                    group: str = "collect") -> list[str]:  # fmt: skip
    return [sys.executable, "-m", "kafkaguard.cli.main", "audit", "collect", "--bootstrap-servers", kafka.bootstrap,
            "--command-config", str(props), "--topic", topic, "--to", str(dataset), "--group", f"{topic}-{group}",
            "--max-records-per-file", str(PER_FILE), *extra]  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run_and_kill(command: list[str], after_files: int | None, after_seconds: float | None = None) -> int:
    """Start collect; SIGKILL it once it printed ``after_files`` "wrote" lines (or after ``after_seconds``).
    Returns how many files it said it wrote."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env())
    assert process.stdout is not None
    wrote = 0
    try:
        if after_seconds is not None:
            time.sleep(after_seconds)  # a kill at a point in time, not at a line: before the first assignment
        else:
            for line in process.stdout:
                wrote += line.startswith("wrote ")
                if wrote == after_files:
                    break
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
    return wrote


def listing(dataset: Path) -> dict[str, int]:
    return {str(p.relative_to(dataset)): p.stat().st_mtime_ns for p in dataset.rglob("*") if p.is_file()}


def test_collect_killed_at_several_points_holds_every_record_once(kafka: KafkaBroker, tmp_path: Path) -> None:
    topic = unique("audit.collect")
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    delivered, aborted = produce(kafka, topic)
    assert aborted and len(delivered) == BATCHES * PER_BATCH
    props = kafka.client_properties(tmp_path / "admin.properties")
    # A killed member holds its partitions until its session times out: the broker's least, not Kafka's 45 s.
    props.write_text(props.read_text() + "session.timeout.ms=6000\n")
    dataset = tmp_path / "dataset"
    command = collect_command(kafka, topic, dataset, props, "--max-seconds-per-file", "600")

    assert run_and_kill(command, None, after_seconds=0.3) == 0
    kills = [run_and_kill(command, after_files=n) for n in (1, 5, 12)]
    assert all(k > 0 for k in kills)
    # A temporary file as a collector killed while writing leaves it: removed, never read.
    ranges, _ = collect_files.scan(collect_files.open_dataset(str(dataset)), topic)
    stray = dataset / ranges[0].directory() / FileRange(0, 10**9, 10**9, ranges[0].day).temp_name(topic, "dead")
    stray.write_bytes(b"half a parquet file")

    done = subprocess.run([*command, "--until-idle", "4"], capture_output=True, text=True, env=env(), timeout=240,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not stray.exists()

    opened = collect_files.open_dataset(str(dataset))
    ranges, temps = collect_files.scan(opened, topic)
    assert temps == []
    assert overlaps(ranges) == []
    rows = collect_files.read_rows(opened, sorted(ranges), topic)
    by_offset = {(r["kafka_partition"], r["kafka_offset"]): r for r in rows}
    assert len(by_offset) == len(rows)  # no (partition, offset) twice
    assert set(by_offset) == set(delivered)  # every committed record, nothing of the aborted transaction
    assert not set(by_offset) & aborted
    ids = [r["id"] for r in rows if r["error"] is None]
    assert len(ids) == len(set(ids))
    expected_ids = {json.loads(v)["id"] for v in delivered.values() if v.startswith(b"{")}
    assert set(ids) == expected_ids
    bad = {k: r["raw"] for k, r in by_offset.items() if r["error"] is not None}
    assert bad == {k: v.decode() for k, v in delivered.items() if not v.startswith(b"{")}
    assert {r.day.isoformat() for r in ranges} == {"2025-03-14", "2025-03-15"}
    for r in ranges:  # each file in its day's directory (a bad line goes with its neighbours)
        assert {row["time"].date() for row in collect_files.read_rows(opened, [r], topic) if row["time"]} <= {r.day}

    # One run from scratch, never killed, into another directory: the same records, reported as such.
    clean = tmp_path / "clean"
    whole = subprocess.run(collect_command(kafka, topic, clean, props, "--until-idle", "4", group="clean"),
                           capture_output=True, text=True, env=env(), timeout=240, check=False)  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    assert f"collected {len(delivered)} records of topic {topic}" in whole.stdout
    assert f"{len(bad)} were not valid CloudEvents envelopes (kept with their error: not valid JSON ×{len(bad)})" in (
        whole.stdout
    )
    opened_clean = collect_files.open_dataset(str(clean))
    clean_rows = collect_files.read_rows(opened_clean, sorted(collect_files.scan(opened_clean, topic)[0]), topic)
    assert sorted(clean_rows, key=lambda r: (r["kafka_partition"], r["kafka_offset"])) == sorted(
        rows, key=lambda r: (r["kafka_partition"], r["kafka_offset"])
    )

    # The group stands where the files end (even a partition whose last commit a kill prevented).
    resume = {p: max(r.last for r in ranges if r.partition == p) + 1 for p in range(PARTITIONS)}
    probe = Consumer({**kafka.client_config(), "group.id": f"{topic}-collect"})
    try:
        committed = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        probe.close()
    assert {tp.partition: tp.offset for tp in committed} == resume

    before = listing(dataset)
    again = subprocess.run([*command, "--until-idle", "2"], capture_output=True, text=True, env=env(), timeout=120,
                           check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "into 0 new files" in again.stdout
    assert listing(dataset) == before


def test_a_second_collector_on_the_same_directory_is_refused(kafka: KafkaBroker, tmp_path: Path) -> None:
    topic = unique("audit.lock")
    props = kafka.client_properties(tmp_path / "admin.properties")
    dataset = tmp_path / "dataset"
    with collect_files.lock(collect_files.open_dataset(str(dataset)), topic):
        refused = subprocess.run(collect_command(kafka, topic, dataset, props, "--until-idle", "1"),
                                 capture_output=True, text=True, env=env(), timeout=60, check=False)  # fmt: skip
    assert refused.returncode == 2
    assert "another collector is writing topic" in refused.stderr


def test_sigterm_writes_what_it_holds_and_exits(kafka: KafkaBroker, tmp_path: Path) -> None:
    """SIGTERM is not a crash: the open files are written and committed, the summary printed, exit code 0."""
    topic = unique("audit.term")
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer(kafka.client_config())
    for i in range(60):
        producer.produce(topic, envelope(i))
    assert producer.flush(30) == 0
    props = kafka.client_properties(tmp_path / "admin.properties")
    dataset = tmp_path / "dataset"
    # Files of 50: the first is written on its count (the signal that the collector reads), the last 10 records
    # stay open until the signal.
    command = collect_command(kafka, topic, dataset, props, "--max-records-per-file", "50", "--max-seconds-per-file",
                              "600")  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    assert process.stdout is not None
    try:
        first = process.stdout.readline()
        assert first.startswith("wrote ") and "(50 records, offsets 0..49)" in first
        time.sleep(1.0)  # the last 10 records were in the same fetch; a second for them to reach the planner
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait(timeout=30)
    assert process.returncode == 0, err
    assert "(10 records, offsets 50..59)" in out
    assert f"collected 60 records of topic {topic} into 2 new files" in out

"""``kafkaguard audit collect`` throughput, records/s, next to a plain confluent-kafka consumer reading the same
topic in the same run (issue 27).

One real Kafka broker (the test fixture's, ``tests/kafka/broker.py``: KAFKA_TGZ / KAFKA_HOME, or the shared
tarball next to the checkout), one topic of 3 partitions holding N CloudEvents envelopes of authorization records
(~500 bytes each, as the topic sink writes them), produced once, round-robin over the partitions so that every
partition holds N/3 and files close on their record count (no idle wait is measured). Then, per round, each with
a new consumer group (and for collect a new directory on the local disk):

* plain consumer: ``Consumer.consume(1000)`` with ``isolation.level=read_committed`` until N records were
  returned — the floor of any consumer of this topic in Python;
* collect: ``kafkaguard.cli.collect.Collector`` in this process (the command's loop, its planner and its durable
  writer), ``--max-records-per-file`` N/6, until the file holding the last record is renamed (so every record is
  parsed, flattened, written to zstd Parquet, fsynced and committed).

A warm-up group join and commit come first (the broker's first one creates ``__consumer_offsets``). Both clocks
start before ``subscribe`` (so both include the group join) and stop at the N-th record. Reported:
records/s of each (median of the rounds) and collect's share of the plain consumer's rate.

Run: ``scripts/bench collect`` (or ``.venv/bin/python -m benchmarks.bench_collect [--quick] [--no-write]``).
``--quick``: 30,000 records, one round (a demo, not a result).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from benchmarks.bench_proxy import kafka_distribution
from benchmarks.report import write_section
from kafkaguard.cli.collect import Collector, consumer_config
from kafkaguard.pipeline import collect_files
from kafkaguard.pipeline.collect_plan import RangePlanner
from tests.kafka.broker import KafkaBroker, KafkaNotConfigured

TOPIC = "audit-bench"
PARTITIONS = 3
START = datetime(2025, 3, 14, 8, tzinfo=UTC)
_WROTE = re.compile(r"\((\d+) records, ")


@dataclass(frozen=True)
class Plan:
    records: int
    rounds: int
    quick: bool

    @staticmethod
    def make(args: argparse.Namespace) -> Plan:
        if args.quick:
            return Plan(records=args.records or 30_000, rounds=1, quick=True)
        return Plan(records=args.records or 1_200_000, rounds=args.rounds or 3, quick=False)


def envelope(i: int) -> bytes:
    when = (START + timedelta(milliseconds=i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    data = {"version": 2, "time": when, "principal": f"User:svc-{i % 211}", "host": f"10.20.{i % 7}.{i % 251}",
            "api": "Fetch", "operation": "READ", "resource_type": "TOPIC", "pattern_type": "LITERAL",
            "resource_name": f"orders-{i % 97}", "decision": "ALLOWED",
            "rule": f"MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=orders-{i % 97}), id=a{i % 97})",
            "count": 1 + i % 50, "last_time": when}  # fmt: skip
    return json.dumps(
        {"specversion": "1.0", "id": f"{i:032x}", "source": "kafkaguard://node-1",
         "type": "io.kafkaguard.authorization.v2", "time": when, "subject": f"TOPIC:orders-{i % 97}",
         "datacontenttype": "application/json", "dataschema": "https://kafkaguard.dev/schemas/audit/v2.json",
         "data": data}, separators=(",", ":")
    ).encode()  # fmt: skip


def produce(broker: KafkaBroker, records: int) -> None:
    admin = AdminClient(broker.client_config())
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(30)
    producer = Producer(
        {**broker.client_config(), "enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4"}
    )
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, envelope(i), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered")


def warm_up(broker: KafkaBroker) -> None:
    """One group join and commit before anything is measured: the broker creates ``__consumer_offsets`` and loads
    its coordinator at the first, which would be charged to whichever reader came first."""
    consumer = Consumer(consumer_config(broker.client_config(), "warm-up"))
    try:
        consumer.subscribe([TOPIC])
        while not (messages := [m for m in consumer.consume(num_messages=1, timeout=1.0) if m.error() is None]):
            pass
        consumer.commit(message=messages[0], asynchronous=False)
    finally:
        consumer.close()


def plain_consumer(broker: KafkaBroker, records: int, group: str) -> float:
    consumer = Consumer(consumer_config(broker.client_config(), group))
    try:
        started = time.monotonic()
        consumer.subscribe([TOPIC])
        seen = 0
        while seen < records:
            seen += sum(1 for m in consumer.consume(num_messages=1000, timeout=1.0) if m.error() is None)
        return records / (time.monotonic() - started)
    finally:
        consumer.close()


def collect(broker: KafkaBroker, records: int, group: str, directory: Path) -> float:
    consumer = Consumer(consumer_config(broker.client_config(), group))
    dataset = collect_files.open_dataset(str(directory))
    planner = RangePlanner(max(1, records // (2 * PARTITIONS)), 3600.0)
    written = 0
    done_at: float | None = None

    def echo(line: str) -> None:
        nonlocal written, done_at
        match = _WROTE.search(line)
        written += int(match.group(1)) if match else 0
        if written >= records and done_at is None:
            done_at = time.monotonic()
            collector.stop()

    collector = Collector(consumer, dataset, TOPIC, planner, None, echo)
    try:
        started = time.monotonic()
        stats = collector.run()
    finally:
        consumer.close()
    if done_at is None or stats.records != records:
        raise RuntimeError(f"collect wrote {written} of {records} records")
    return records / (done_at - started)


def render(plan: Plan, plain: list[float], collected: list[float], command: str = "scripts/bench collect") -> str:
    p, c = statistics.median(plain), statistics.median(collected)
    return "\n".join([
        "## `kafkaguard audit collect` throughput (issue 27)",
        "",
        f"Run: `{command}`.",
        "",
        f"{plan.records:,} CloudEvents envelopes (authorization records, ~{len(envelope(0))} bytes) on one topic of "
        f"{PARTITIONS} partitions of the real Kafka broker (the test fixture's, on loopback); median of "
        f"{plan.rounds} round(s), each with a new consumer group; clocks from `subscribe` (group join included) to "
        "the last record (collect: the last file renamed, fsynced and committed).",
        "",
        "| reader | records/s | of the plain consumer |",
        "|---|---:|---:|",
        f"| plain confluent-kafka consumer (`consume(1000)`, read_committed) | {p:,.0f} | 100% |",
        f"| `kafkaguard audit collect` (zstd Parquet, {plan.records // (2 * PARTITIONS):,} records a file) | "
        f"{c:,.0f} | {100 * c / p:.0f}% |",
    ])  # fmt: skip


def _say(text: str) -> None:
    print(f"bench_collect: {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30,000 records, one round (a demo, not a result)")
    parser.add_argument("--records", type=int, help="records on the topic (default 1,200,000)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3)")
    parser.add_argument("--kafka-tgz", type=Path, help="Kafka tarball (default: KAFKA_TGZ, KAFKA_HOME, ../shared)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    plan = Plan.make(args)
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-collect-"))
    broker: KafkaBroker | None = None
    try:
        try:
            home = kafka_distribution(tmp / "dist", args.kafka_tgz)
        except KafkaNotConfigured as e:
            print(f"bench_collect: no Kafka distribution: {e}", file=sys.stderr)
            return 2
        _say("starting the Kafka broker")
        broker = KafkaBroker(home, tmp / "broker")
        broker.start()
        _say(f"producing {plan.records:,} envelopes")
        produce(broker, plan.records)
        warm_up(broker)
        plain: list[float] = []
        collected: list[float] = []
        for round_ in range(plan.rounds):
            plain.append(plain_consumer(broker, plan.records, f"plain-{round_}"))
            _say(f"round {round_ + 1}: plain consumer {plain[-1]:,.0f} records/s")
            collected.append(collect(broker, plan.records, f"collect-{round_}", tmp / f"dataset-{round_}"))
            _say(f"round {round_ + 1}: collect {collected[-1]:,.0f} records/s")
            shutil.rmtree(tmp / f"dataset-{round_}", ignore_errors=True)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join([".venv/bin/python -m benchmarks.bench_collect", *given]) if given else "scripts/bench collect"
    markdown = render(plan, plain, collected, command)
    print(markdown)
    if not (args.no_write or plan.quick):
        write_section("collect-issue-27", markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

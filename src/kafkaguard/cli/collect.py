"""``kafkaguard audit collect``: the audit topic (CloudEvents envelopes) into a Parquet dataset, exactly once.

The consumer loop only: which record goes into which file, and why a crash can neither lose nor duplicate one, is
``kafkaguard.pipeline.collect_plan`` (the invariant, a worked example, the cost model); the durable write is
``kafkaguard.pipeline.collect_files``. The loop keeps to that order: a file is renamed (durable) before its offsets
are committed, and on every (re)assignment a partition resumes where the dataset's files end, not where the group
committed. Needs ``kafkaguard[cli,spark]`` (confluent-kafka and pyarrow).
"""

from __future__ import annotations

import logging
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kafkaguard.cli.client import CliError, client_config, load_properties
from kafkaguard.cli.connection import CommandConfig
from kafkaguard.cli.output import fail
from kafkaguard.errors import KafkaguardError
from kafkaguard.pipeline import collect_files
from kafkaguard.pipeline.collect_plan import (
    ClosedFile,
    FileRange,
    RangePlanner,
    RepeatWindow,
    check_topic,
    event_key,
    resume_offsets,
    to_row,
)

# confluent-kafka is imported where it is used: the processes of `serve` and `proxy` import every command module and
# never consume through librdkafka (see cli.client).
if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message, TopicPartition

log = logging.getLogger(__name__)

#: How long a collector with ``--until-idle`` waits for its first assignment before it gives up.
JOIN_TIMEOUT = 60.0
_POLL_SECONDS = 0.5
_BATCH = 1000


@dataclass
class CollectStats:
    records: int = 0
    files: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    #: Records read again below a partition's resume point (another assignment's prefetch); not written.
    skipped: int = 0
    #: Buffered rows forgotten at a revocation (their offsets were not committed: the next owner reads them).
    dropped: int = 0
    commit_failures: int = 0
    #: Envelopes dropped as repeats of one the partition already holds (a sink's resend after a crash).
    repeats: int = 0

    def summary(self, topic: str, to: str) -> str:
        text = f"collected {self.records} records of topic {topic} into {self.files} new files under {to}"
        if self.invalid:
            reasons = ", ".join(f"{reason} ×{n}" for reason, n in self.invalid.most_common())
            text += f"; {sum(self.invalid.values())} were not valid CloudEvents envelopes (kept with their error: "
            text += f"{reasons})"
        if self.repeats:
            text += f"; {self.repeats} repeated an event already collected (same source and id) and were dropped"
        return text


def consumer_config(base: dict[str, Any], group: str) -> dict[str, Any]:
    """Manual commits only after a file is durable; only committed transactions; from the start when nothing is
    known."""
    return {
        **base,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
    }


class Collector:
    """One run. ``stop()`` (from a signal) ends it after the open files are written and committed."""

    def __init__(
        self,
        consumer: Consumer,
        dataset: collect_files.Dataset,
        topic: str,
        planner: RangePlanner,
        until_idle: float | None,
        echo: Callable[[str], None],
    ) -> None:
        self.consumer = consumer
        self.dataset = dataset
        self.topic = topic
        self.planner = planner
        self.until_idle = until_idle
        self.echo = echo
        self.stats = CollectStats()
        self.resume: dict[int, int] = {}
        self.ranges: list[FileRange] = []
        self.repeats = RepeatWindow()
        self._stopping = False
        self._assigned_at: float | None = None
        #: Resume points to commit after an assignment: a run killed between a rename and its commit left the
        #: group behind its dataset, and a partition with nothing new would otherwise never catch up.
        self._catch_up: list[TopicPartition] = []

    def stop(self) -> None:
        self._stopping = True

    def run(self) -> CollectStats:
        ranges, temps = collect_files.scan(self.dataset, self.topic)
        collect_files.remove_temps(self.dataset, temps)
        if temps:
            log.info("removed %d temporary files a stopped collector left", len(temps))
        self.ranges = ranges
        self.resume = resume_offsets(ranges)
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        started = idle_since = time.monotonic()
        while not self._stopping:
            messages = self.consumer.consume(num_messages=_BATCH, timeout=_POLL_SECONDS)
            now = time.monotonic()
            if self._catch_up:
                self._commit(self._catch_up)
                self._catch_up = []
            for message in messages:
                if self._take(message, now):
                    idle_since = now
            for closed in self.planner.due(now):
                self._write(closed)
            if self._assigned_at is not None:
                idle_since = max(idle_since, self._assigned_at)
            if self.until_idle is not None:
                if self._assigned_at is not None and now - idle_since >= self.until_idle:
                    break
                if self._assigned_at is None and now - started >= max(self.until_idle, JOIN_TIMEOUT):
                    log.warning("no partition of %s was assigned within %.0f s", self.topic, now - started)
                    break
        for closed in self.planner.drain():
            self._write(closed)
        return self.stats

    def _take(self, message: Message, now: float) -> bool:
        from confluent_kafka import KafkaError, KafkaException

        error = message.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("consuming %s: %s", self.topic, error.str())
            return False
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None:
            return False
        if offset < self.resume.get(partition, 0):
            self.stats.skipped += 1
            return True
        _, timestamp = message.timestamp()
        row = to_row(message.value(), partition, offset, timestamp)
        if row["error"] is not None:
            self.stats.invalid[row["error"]] += 1
        elif self.repeats.is_repeat(partition, offset, event_key(row)):
            self.stats.repeats += 1
            return True
        self.stats.records += 1
        for closed in self.planner.add(row, now):
            self._write(closed)
        return True

    def _write(self, closed: ClosedFile) -> None:
        path = collect_files.write_file(self.dataset, self.topic, closed)
        r = closed.range
        self.ranges.append(r)
        self.resume[r.partition] = r.last + 1
        self.stats.files += 1
        # Said after the rename and before the commit: a kill right after this line is the window the invariant
        # is about (the tests kill here).
        self.echo(f"wrote {path} ({len(closed.rows)} records, offsets {r.first}..{r.last})")
        from confluent_kafka import TopicPartition

        self._commit([TopicPartition(self.topic, r.partition, r.last + 1)])

    def _commit(self, offsets: list[TopicPartition]) -> None:
        from confluent_kafka import KafkaException

        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            # Harmless for the dataset (it, not the commit, says where to resume); the group's lag is stale.
            self.stats.commit_failures += 1
            log.warning("commit of %s failed: %s", ", ".join(f"{tp.partition}@{tp.offset}" for tp in offsets), e)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        from confluent_kafka import TopicPartition

        for tp in partitions:
            if tp.partition in self.resume:
                tp.offset = self.resume[tp.partition]
                self._catch_up.append(TopicPartition(self.topic, tp.partition, tp.offset))
            since = self.resume.get(tp.partition, 0) - self.repeats.size
            self.repeats.seed(
                tp.partition, collect_files.kept_keys(self.dataset, self.topic, self.ranges, tp.partition, since)
            )
        consumer.assign(partitions)
        self._assigned_at = time.monotonic()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.stats.dropped += self.planner.drop(tp.partition for tp in partitions)
        revoked = {tp.partition for tp in partitions}
        for partition in revoked:
            self.repeats.forget(partition)  # its buffered rows were dropped: seeded again at the next assignment
        self._catch_up = [tp for tp in self._catch_up if tp.partition not in revoked]
        consumer.unassign()


BootstrapServers = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "--bootstrap-servers",
        help="host1:port1,... of the cluster holding the audit topic.",
        envvar="KAFKAGUARD_BOOTSTRAP_SERVER",
        show_envvar=True,
    ),
]


def collect(
    bootstrap_server: BootstrapServers,
    topic: Annotated[str, typer.Option("--topic", help="The audit topic (CloudEvents envelopes).")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="Dataset directory: a local path or a URI pyarrow can open "
            "(file://, hdfs://, s3:// where configured).",
        ),
    ],
    group: Annotated[
        str | None, typer.Option("--group", help="Consumer group (default kafkaguard-collect-TOPIC).")
    ] = None,
    max_records_per_file: Annotated[int, typer.Option(min=1, help="A file ends after this many records.")] = 100_000,
    max_seconds_per_file: Annotated[
        float, typer.Option(min=0.001, help="A file ends this long after its first record was read.")
    ] = 300.0,
    until_idle: Annotated[
        float | None,
        typer.Option(
            min=0.001, help="Stop after this many seconds without a record (default: run until SIGTERM/Ctrl-C)."
        ),
    ] = None,
    command_config: CommandConfig = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "WARNING",
) -> None:
    """Collect the audit topic into Parquet files partitioned by day, exactly once (re-running is safe)."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        stats = _collect(
            bootstrap_server, topic, to, group, max_records_per_file, max_seconds_per_file, until_idle, command_config
        )
    except CliError as e:
        fail(str(e), e.exit_code)
    typer.echo(stats.summary(topic, to))


def _collect(
    bootstrap_server: str,
    topic: str,
    to: str,
    group: str | None,
    max_records: int,
    max_seconds: float,
    until_idle: float | None,
    command_config: Path | None,
) -> CollectStats:
    """:raises CliError: bad arguments, a dataset that cannot be opened or is locked, a fatal Kafka error."""
    try:
        check_topic(topic)
    except ValueError as e:
        raise CliError(f"--topic: {e}", exit_code=2) from None
    properties = load_properties(command_config) if command_config is not None else {}
    base = client_config(bootstrap_server, properties)
    if "cooperative" in str(base.get("partition.assignment.strategy", "")):
        # The rebalance callbacks assign whole assignments (with each partition's resume point): eager protocol.
        raise CliError(
            "collect needs an eager partition.assignment.strategy (range or roundrobin), not "
            "cooperative-sticky: remove it from --command-config",
            exit_code=2,
        )
    base["logger"] = logging.getLogger("rdkafka")
    from confluent_kafka import Consumer, KafkaException

    try:
        dataset = collect_files.open_dataset(to)
        with collect_files.lock(dataset, topic):
            consumer = Consumer(consumer_config(base, group or f"kafkaguard-collect-{topic}"))
            collector = Collector(
                consumer,
                dataset,
                topic,
                RangePlanner(max_records, max_seconds),
                until_idle,
                lambda text: typer.echo(text),
            )
            previous = {sig: signal.signal(sig, lambda *_: collector.stop()) for sig in (signal.SIGTERM, signal.SIGINT)}
            try:
                return collector.run()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                consumer.close()
    except KafkaException as e:
        raise CliError(f"Kafka: {e.args[0].str() if e.args else e}", exit_code=1) from None
    except CliError:
        raise
    except KafkaguardError as e:
        raise CliError(str(e), exit_code=2) from None

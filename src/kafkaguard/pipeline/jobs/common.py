"""What every job shares: loading ACL files, reading and reducing the log once, progress display, writing
tables and the report, and the printed summary."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

from kafkaguard.pipeline.acls import AclSet, acl_set_from_text
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.readers import read_lines, read_records
from kafkaguard.pipeline.report import Cell, Report, line_chart, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True, slots=True)
class AuthorizerOptions:
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False


@dataclass
class JobResult:
    """What a job did: its summary numbers (also printed) and the files it wrote."""

    job: str
    out: str
    summary: dict[str, int | str] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _has_scheme(path: str) -> bool:
    return "://" in path and not path.startswith("file:")


def read_text_file(spark: SparkSession | None, path: str) -> str:
    """A small text file, local or on any filesystem Spark can read.

    :raises PipelineError: it does not exist or cannot be read.
    """
    if _has_scheme(path):
        if spark is None:
            raise PipelineError(f"cannot read {path} without Spark")
        rows = spark.read.text(path, wholetext=True).collect()
        if not rows:
            raise PipelineError(f"file not found or empty: {path}")
        return str(rows[0][0])
    local = path.removeprefix("file:")
    try:
        with open(local, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError as e:
        raise PipelineError(f"file not found: {path}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise PipelineError(f"cannot read {path}: {e}") from e


def load_acls(spark: SparkSession | None, path: str, name: str, options: AuthorizerOptions) -> AclSet:
    """:raises PipelineError: missing file or invalid ACL document."""
    return acl_set_from_text(
        read_text_file(spark, path), path, name, options.super_users, options.allow_everyone_if_no_acl_found
    )


def write_text_file(spark: SparkSession, path: str, text: str) -> None:
    if _has_scheme(path):
        jvm = spark.sparkContext._jvm  # Hadoop's FileSystem is only reachable through py4j
        if jvm is None:
            raise PipelineError(f"cannot write {path}: the Spark session has no JVM gateway")
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        stream = fs.create(hadoop_path, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        return
    local = path.removeprefix("file:")
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    with open(local, "w", encoding="utf-8") as f:
        f.write(text)


class JobRun:
    """Progress lines (stderr) and timing for one job; ``step`` marks each phase. Plain text, no CLI framework:
    jobs run where only ``kafkaguard[spark]`` is installed, and a cluster's driver log keeps these lines."""

    def __init__(self, job: str, out: str, stream: TextIO | None = None) -> None:
        self.result = JobResult(job, out.rstrip("/"))
        self._stream = stream
        self._start = time.perf_counter()

    def _print(self, text: str) -> None:
        stream = self._stream or sys.stderr
        stream.write(text + "\n")
        stream.flush()

    def __enter__(self) -> JobRun:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.result.seconds = round(time.perf_counter() - self._start, 2)

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        started = time.perf_counter()
        self._print(f"{self.result.job}: {description} …")
        yield
        self._print(f"{self.result.job}: {description}: {time.perf_counter() - started:.1f} s")

    def path(self, name: str) -> str:
        return f"{self.result.out}/{name}"

    def write_table(self, df: DataFrame, name: str) -> None:
        df.write.mode("overwrite").parquet(self.path(name))
        self.result.tables.append(name)

    def write_report(self, spark: SparkSession, report: Report) -> None:
        write_text_file(spark, self.path("report.html"), report.render())

    def summary_lines(self) -> list[str]:
        """The summary as aligned ``key  value`` lines (numbers with thousands separators)."""
        rows = [
            (key, f"{value:,}" if isinstance(value, int) else str(value)) for key, value in self.result.summary.items()
        ]
        rows.append(("written", ", ".join([*self.result.tables, "report.html"]) + f" in {self.result.out}"))
        rows.append(("seconds", f"{self.result.seconds:.1f}"))
        width = max(len(key) for key, _ in rows)
        return [f"kafkaguard audit {self.result.job}", *(f"  {key.ljust(width)}  {value}" for key, value in rows)]

    def print_summary(self, stream: TextIO | None = None) -> None:
        stream = stream or sys.stdout
        stream.write("\n".join(self.summary_lines()) + "\n")
        stream.flush()


@dataclass
class Reduced:
    """The log read once and reduced in the JVM (see ``transforms.aggregate_raw``)."""

    aggregated: DataFrame
    #: one row per access tuple (plus the ``keys`` given to ``read_and_reduce``) with counts, first/last seen
    good: DataFrame
    #: (bucket, logged_decision, requests) sorted by time
    over_time: list[tuple[datetime, str, int]]
    #: (reason, lines, an example line), most frequent first
    bad: list[tuple[str, int, str | None]]
    records: int
    bad_lines: int
    #: the first and last valid logged request (None: no valid record)
    first: datetime | None = None
    last: datetime | None = None
    #: the requests logged ALLOWED
    allowed: int = 0


def read_and_reduce(
    spark: SparkSession, run: JobRun, logs: Sequence[str], fmt: str, keys: Sequence[str] = ("logged_decision",)
) -> Reduced:
    """Read and aggregate the log; ``good`` has one row per access tuple and ``keys`` (``logged_decision`` or
    nothing). Kafka's authorizer log is folded (``kafkaguard.pipeline.folding``: parsed once per distinct line,
    not per line). One Spark job: it fills the cache of the aggregation and collects the few rows of the chart
    over time and of the bad lines at once."""
    from pyspark import StorageLevel

    from kafkaguard.pipeline import folding, transforms

    with run.step("reading and aggregating the log"):
        records = read_records(spark, logs, fmt)
        if fmt == "kafka-log":
            aggregated = folding.fold(read_lines(spark, logs), keys=keys)
        else:
            aggregated = transforms.aggregate_raw(records, keys=keys)
        aggregated = aggregated.persist(StorageLevel.MEMORY_AND_DISK)
        small = transforms.small_rows(aggregated).collect()
    over_time = sorted(
        (row["bucket"], row["logged_decision"], int(row["requests"]))
        for row in small
        if not row["per_tuple"] and row["bucket"] is not None
    )
    lines: dict[str, int] = {}
    for row in small:
        if row["per_tuple"]:
            lines[row["error"]] = lines.get(row["error"], 0) + int(row["requests"])
    bad = sample_bad_lines(spark, run, records, lines)
    bad_count = sum(lines.values())
    total = sum(requests for _, _, requests in over_time)
    run.result.summary.update(records=total, unparseable_lines=bad_count)
    hours = [row for row in small if not row["per_tuple"] and row["bucket"] is not None]
    first = min((row["first_seen"] for row in hours), default=None)
    last = max((row["last_seen"] for row in hours), default=None)
    good = transforms.good_rows(aggregated, keys)
    allowed = sum(requests for _, decision, requests in over_time if decision == "ALLOWED")
    return Reduced(aggregated, good, over_time, bad, total, bad_count, first, last, allowed)


def require_allowed(job: str, allowed: int, records: int) -> None:
    """Refuse a job that reads usage from the allowed decisions when the log holds none: every ACL would be
    reported unused and nothing recommended, silently (a log written with ``audit_mode: denied``).

    :raises PipelineError: no request was logged ALLOWED.
    """
    if allowed == 0:
        raise PipelineError(
            f"the log holds no allowed decisions ({records:,} records, none ALLOWED), so kafkaguard audit {job} "
            "would see no use of any ACL (every ACL unused, nothing to recommend, no allowed access to break); "
            "the server or proxy must record them: set audit_mode to usage (the default, cheap enough to keep on) "
            "or all (--audit-mode usage), then run it on a log written since"
        )


def require_known_super_users(spark: SparkSession, run: JobRun, logs: Sequence[str], fmt: str) -> None:
    """Refuse a run that knows no super users (no ``--super-users``, nothing read from the server's settings) on a
    log that records super-user decisions: re-decided without them, the super users' requests would all be
    denied, and reported as the top denied principals, silently.

    Cost: one more pass over the log (records with rule ``SuperUser`` grouped by principal), only on this path: a
    run given its super users pays nothing.

    :raises PipelineError: the log records requests ALLOWED by rule ``SuperUser``, naming their principals.
    """
    from pyspark.sql import functions as F

    with run.step("looking for super-user decisions in the log (no --super-users given)"):
        records = read_records(spark, logs, fmt)
        logged = (
            records.where(F.col("error").isNull() & (F.col("rule") == "SuperUser") & (F.col("decision") == "ALLOWED"))
            .groupBy("principal")
            .agg(F.sum("count").alias("requests"))
            .orderBy(F.desc("requests"), "principal")
            .limit(10)
            .collect()
        )
    if logged:
        found = ", ".join(f"{row['principal']} ({int(row['requests']):,} requests)" for row in logged)
        names = ";".join(str(row["principal"]) for row in logged)
        raise PipelineError(
            f"the log records requests allowed to super users ({found}), but this run knows no super users, "
            "so it would decide them as ordinary principals (denied); give the server's super users: "
            f"--super-users '{names}' (or '' to decide them without), or run kafkaguard audit with the "
            "server's --config FILE or --data-dir DIR (its served-settings.json)"
        )


def sample_bad_lines(
    spark: SparkSession, run: JobRun, records: DataFrame, lines: dict[str, int]
) -> list[tuple[str, int, str | None]]:
    """(reason, lines, an example line), most frequent first, for the unparseable-line counts ``lines`` (reason →
    lines); the examples cost one more pass over the log, so only when there are bad lines."""
    from pyspark.sql import functions as F

    if not lines:
        return []
    with run.step("sampling unparseable lines"):
        samples = records.where(F.col("error").isNotNull()).groupBy("error").agg(F.first("line").alias("line"))
        sample = {row["error"]: row["line"] for row in samples.collect()}
    return [(reason, n, sample.get(reason)) for reason, n in sorted(lines.items(), key=lambda item: -item[1])]


def time_series(rows: Iterable[tuple[datetime, str, int]]) -> dict[str, list[tuple[datetime, int]]]:
    """(bucket, series name, value) rows → the points of each series."""
    series: dict[str, list[tuple[datetime, int]]] = {}
    for bucket, name, requests in rows:
        series.setdefault(str(name), []).append((bucket, requests))
    return series


def add_input_sections(report: Report, reduced: Reduced) -> None:
    """Counts over time (per logged decision) and the unparseable-line table, common to every report."""
    series = time_series(reduced.over_time)
    report.section("Logged requests over time (per hour)", line_chart({f"logged {k}": v for k, v in series.items()}))
    add_bad_lines_section(report, reduced.bad)


def add_bad_lines_section(report: Report, bad: Sequence[tuple[str, int, str | None]]) -> None:
    report.section("Unparseable lines", table(["reason", "lines", "example"], list(bad), empty="every line was parsed"))


def rows_of(df: DataFrame, columns: Sequence[str], limit: int) -> list[tuple[Cell, ...]]:
    return [tuple(row[c] for c in columns) for row in df.limit(limit).collect()]

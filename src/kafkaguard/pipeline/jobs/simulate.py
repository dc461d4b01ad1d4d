"""``simulate``: current vs proposed ACL set over the same traffic; every access whose decision flips.

Only the accesses the change can flip are decided (``kafkaguard.pipeline.changes``: those a changed ACL covers and
names, or of a principal whose super-user status changed; all of them if allow.everyone changed); the rest keep
their decision under both sets by construction and are never decided. One pass over the log finds them: it
aggregates per access in the JVM, keeps the candidates with one broadcast join and writes them (``_candidates`` in
the output directory, a staging table), counting the input on the way; few candidates (the usual case) are then
decided in the driver, many by the Python workers. So simulate costs about what grouping the log costs
(``docs/benchmarks.md``).

Writes ``flips`` (Parquet: principal, host, operation, resource_type, resource_name, requests, first_seen,
last_seen, current_decision, proposed_decision) and ``report.html`` (newly denied = would break, newly allowed =
would open up, listed separately).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.changes import AclChange, relevant_to
from kafkaguard.pipeline.deciding import KEY as ACCESS_KEY
from kafkaguard.pipeline.deciding import decide_batch
from kafkaguard.pipeline.jobs.common import (
    JobResult,
    JobRun,
    add_bad_lines_section,
    require_allowed,
    rows_of,
    sample_bad_lines,
)
from kafkaguard.pipeline.readers import read_lines, read_records
from kafkaguard.pipeline.report import Cell, Report, bar_chart, table
from kafkaguard.pipeline.transforms import COUNTS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, Observation, SparkSession

FLIP_COLUMNS = (
    "principal",
    "host",
    "operation",
    "resource_type",
    "resource_name",
    "requests",
    "first_seen",
    "last_seen",
    "current_decision",
    "proposed_decision",
)


#: The candidates, written by the pass over the log and read back to decide them (``_``: Spark's readers skip it).
STAGING = "_candidates"
#: ``changes.Changed`` rows as a DataFrame schema (DDL).
CHANGED_SCHEMA = "resource_type string, pattern_type string, name string, principal string, host string"

#: Up to this many flips, the report's lists are made in the driver from one collect of the (cached) flips
#: instead of one Spark job each, and the flips table is written as one sorted file.
SMALL_FLIPS = 100_000
#: Up to this many candidates, they are collected and decided in the driver (two decisions each, one per set):
#: cheaper than starting Python workers and building the authorizers of both whole sets in each.
DRIVER_DECISIONS = 50_000


def run(
    spark: SparkSession,
    logs: Sequence[str],
    current: AclSet,
    proposed: AclSet,
    out: str,
    fmt: str = "kafkaguard",
    run_: JobRun | None = None,
) -> JobResult:
    job = run_ or JobRun("simulate", out)
    with job:
        change = AclChange.between(current, proposed)
        with job.step("reading the log and finding the accesses the change can flip"):
            scan = _scan(spark, job, logs, fmt, change)
        require_allowed("simulate", scan.allowed, scan.records)
        with job.step("deciding them under both ACL sets"):
            candidates = spark.read.parquet(job.path(STAGING))
            if scan.candidates <= DRIVER_DECISIONS:
                outcome = _decide_in_driver(spark, _distinct(candidates.toArrow()), current, proposed)
            else:
                outcome = _decide_in_spark(spark, candidates.dropDuplicates(list(ACCESS_KEY)), current, proposed)
            job.write_table(outcome.flips, "flips")
        (denied_n, denied_r), (allowed_n, allowed_r) = outcome.newly_denied, outcome.newly_allowed
        job.result.summary.update(
            records=scan.records,
            unparseable_lines=sum(scan.bad.values()),
            distinct_accesses=scan.accesses,
            changed_acls=len(change.changed),
            decided_accesses=outcome.decided,
            newly_denied=denied_n,
            newly_denied_requests=denied_r,
            newly_allowed=allowed_n,
            newly_allowed_requests=allowed_r,
        )
        bad = sample_bad_lines(spark, job, read_records(spark, logs, fmt), scan.bad)
        with job.step("report"):
            report = Report(
                "kafkaguard audit simulate",
                f"{current.name} ({len(current.acls)} ACLs) → {proposed.name} ({len(proposed.acls)} ACLs); "
                f"logs: {', '.join(logs)}",
            )
            for key, value in job.result.summary.items():
                report.card(key.replace("_", " "), value)
            report.card("first logged", str(scan.first_seen or "-"))
            report.card("last logged", str(scan.last_seen or "-"))
            add_bad_lines_section(report, bad)
            columns = list(FLIP_COLUMNS[:8])
            if outcome.rows is not None:
                lists = _lists_in_driver(outcome.rows, columns)
            else:
                lists = _lists_in_spark(outcome.flips, columns)
            newly_denied, newly_allowed, top_p, top_r = lists
            report.section(
                f"Newly denied: would break ({denied_n:,} accesses, {denied_r:,} requests)",
                table(columns, newly_denied, empty="nothing would break"),
            )
            report.section(
                f"Newly allowed: would open up ({allowed_n:,} accesses, {allowed_r:,} requests)",
                table(columns, newly_allowed, empty="nothing would open up"),
            )
            report.section(
                "Top principals and resources by flipped requests",
                bar_chart(top_p),
                bar_chart(top_r, color="#dc2626"),
            )
            job.write_report(spark, report)
            outcome.release()
    return job.result


@dataclass(frozen=True, slots=True)
class _Scan:
    """What one pass over the log found (the candidates were written to ``STAGING``)."""

    records: int
    accesses: int
    #: candidate rows written (an access may be written more than once: ``transforms.may_flip``)
    candidates: int
    first_seen: datetime | None
    last_seen: datetime | None
    #: unparseable lines per reason
    bad: dict[str, int]
    #: requests logged ALLOWED
    allowed: int = 0


def _scan(spark: SparkSession, job: JobRun, logs: Sequence[str], fmt: str, change: AclChange) -> _Scan:
    """One Spark job: read and aggregate per access (Kafka's log folded), keep the accesses the change can flip and
    write them (``STAGING``). The input's counts are observed on the way (``Observation``), not computed by a second
    pass or from a cached copy (a cache plus a second job cost more: see docs/benchmarks.md, "Figures from the
    code")."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from kafkaguard.pipeline import folding, transforms

    if fmt == "kafka-log":
        aggregated = folding.fold(read_lines(spark, logs), keys=(), hourly=False)
    else:
        aggregated = transforms.aggregate_raw(read_records(spark, logs, fmt), keys=(), hourly=False)
    good = F.col("error").isNull()
    seen, picked = Observation("kafkaguard-simulate-input"), Observation("kafkaguard-simulate-candidates")
    observed = aggregated.observe(
        seen,
        F.count_if(good).alias("accesses"),
        F.coalesce(F.sum(F.when(good, F.col("requests"))), F.lit(0)).alias("records"),
        F.coalesce(F.sum(F.when(good, F.col("allowed"))), F.lit(0)).alias("allowed"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
        F.collect_list(F.when(~good, F.struct("error", "requests"))).alias("bad"),
    )
    access = observed.where(good).select(*ACCESS_KEY, *COUNTS)
    if change.everything:
        candidates = access
    else:
        # A row that matches nothing: with no changed ACL at all, an empty table would let the optimizer drop the
        # whole plan, the observation with it.
        changed = spark.createDataFrame([*change.patterns(), NO_ACL], CHANGED_SCHEMA)
        candidates = transforms.may_flip(
            access, changed, change.prefix_lengths(), sorted(change.whole_principals), wildcard=change.wildcard
        )
    candidates.observe(picked, F.count(F.lit(1)).alias("n")).write.mode("overwrite").parquet(job.path(STAGING))
    found, chosen = _metrics(seen), _metrics(picked)
    bad: dict[str, int] = {}
    for item in found.get("bad") or ():
        bad[item["error"]] = bad.get(item["error"], 0) + int(item["requests"])
    return _Scan(
        int(found.get("records") or 0),
        int(found.get("accesses") or 0),
        int(chosen.get("n") or 0),
        found.get("first_seen"),
        found.get("last_seen"),
        bad,
        int(found.get("allowed") or 0),
    )


def _distinct(table: pa.Table) -> pa.Table:
    """The distinct rows of ``table`` (duplicates are whole-row copies)."""
    return table.group_by(table.column_names, use_threads=False).aggregate([]).select(table.column_names)


#: A ``changes.Changed`` row no access matches (no resource type is empty).
NO_ACL = ("", "", "", None, None)


def _metrics(observation: Observation) -> dict[str, Any]:
    """An observation's metrics; none (empty) when no row reached it: adaptive execution skips the rest of a plan
    once a stage turned out empty (an empty log, no candidates), so its observations are never filled."""
    from pyspark.errors import PySparkException

    errors: tuple[type[Exception], ...] = (PySparkException,)
    try:
        from py4j.protocol import Py4JError

        errors += (Py4JError,)
    except ImportError:  # pragma: no cover - a Spark Connect-only client has no py4j
        pass
    try:
        return dict(observation.get)
    except errors:
        return {}


@dataclass
class _Outcome:
    decided: int
    #: (accesses, requests) newly denied and newly allowed
    newly_denied: tuple[int, int]
    newly_allowed: tuple[int, int]
    #: the flips table (FLIP_COLUMNS), most requests first
    flips: DataFrame
    #: the flips as rows, when they were decided in the driver or are few
    rows: list[dict[str, Any]] | None
    cached: DataFrame | None = None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


def _decide_in_driver(spark: SparkSession, few: pa.Table, current: AclSet, proposed: AclSet) -> _Outcome:
    """Few candidates: decided here, under only the ACLs relevant to their resources (a few probes each); no
    Python workers, no authorizer of the whole sets built anywhere."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [few.column(name).to_pylist() for name in ACCESS_KEY]
    resources = set(zip(columns[3], columns[4], strict=True))
    authorizers = [relevant_to(acls, resources).authorizer() for acls in (current, proposed)]
    decisions = decide_batch(authorizers, columns, {})
    decided = few.append_column("current_decision", pa.array(decisions[0], pa.string())).append_column(
        "proposed_decision", pa.array(decisions[1], pa.string())
    )
    flipped = decided.filter(pc.not_equal(decided["current_decision"], decided["proposed_decision"]))
    flipped = flipped.select(list(FLIP_COLUMNS)).sort_by([("requests", "descending")])
    rows = flipped.to_pylist()

    def totals(decision: str) -> tuple[int, int]:
        chosen = [int(row["requests"]) for row in rows if row["proposed_decision"] == decision]
        return len(chosen), sum(chosen)

    flips = spark.createDataFrame(flipped).coalesce(1)  # one file, in the order given
    return _Outcome(few.num_rows, totals("DENIED"), totals("ALLOWED"), flips, rows)


def _decide_in_spark(spark: SparkSession, candidates: DataFrame, current: AclSet, proposed: AclSet) -> _Outcome:
    """Many candidates: decided by the Python workers (``transforms.decide``), then counted in one job."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from kafkaguard.pipeline import transforms

    decided = transforms.decide(spark, candidates, {"current_": current, "proposed_": proposed})
    decided = decided.persist(StorageLevel.MEMORY_AND_DISK)
    # One job: decides every candidate (filling the cache) and counts candidates and flips.
    counts = decided.groupBy("current_decision", "proposed_decision").agg(
        F.count(F.lit(1)).alias("n"), F.sum("requests").alias("r")
    )
    total = 0
    by: dict[str, tuple[int, int]] = {}
    for row in counts.collect():
        total += int(row["n"])
        if row["current_decision"] != row["proposed_decision"]:
            n, r = by.get(row["proposed_decision"], (0, 0))
            by[row["proposed_decision"]] = (n + int(row["n"]), r + int(row["r"]))
    denied, allowed = by.get("DENIED", (0, 0)), by.get("ALLOWED", (0, 0))
    flips = transforms.flips(decided).select(*FLIP_COLUMNS)
    if denied[0] + allowed[0] <= SMALL_FLIPS:
        flips = flips.coalesce(1).sortWithinPartitions(F.desc("requests"))
        rows: list[dict[str, Any]] | None = [row.asDict() for row in flips.collect()]
    else:
        flips, rows = flips.orderBy(F.desc("requests")), None
    return _Outcome(total, denied, allowed, flips, rows, decided)


_Lists = tuple[list[tuple[Cell, ...]], list[tuple[Cell, ...]], list[tuple[str, int]], list[tuple[str, int]]]


def _lists_in_driver(rows: list[dict[str, Any]], columns: Sequence[str]) -> _Lists:
    """The report's lists from the collected flips: the 200 newly denied and newly allowed accesses with the most
    requests, and the 15 principals and resources with the most flipped requests."""
    rows.sort(key=lambda row: -int(row["requests"]))

    def first(decision: str) -> list[tuple[Cell, ...]]:
        chosen = (row for row in rows if row["proposed_decision"] == decision)
        return [tuple(row[c] for c in columns) for row in itertools.islice(chosen, 200)]

    def top(key: Callable[[dict[str, Any]], str]) -> list[tuple[str, int]]:
        totals: Counter[str] = Counter()
        for row in rows:
            totals[key(row)] += int(row["requests"])
        return totals.most_common(15)

    by_resource = top(lambda row: f"{row['resource_type']}:{row['resource_name']}")
    return first("DENIED"), first("ALLOWED"), top(lambda row: str(row["principal"])), by_resource


def _lists_in_spark(flips: DataFrame, columns: Sequence[str]) -> _Lists:
    """The same lists as ``_lists_in_driver``, computed by Spark (many flips)."""
    from pyspark.sql import functions as F

    newly_denied = flips.where(F.col("proposed_decision") == "DENIED").orderBy(F.desc("requests"))
    newly_allowed = flips.where(F.col("proposed_decision") == "ALLOWED").orderBy(F.desc("requests"))
    top_p = flips.groupBy("principal").agg(F.sum("requests").alias("r")).orderBy(F.desc("r")).limit(15)
    top_r = (
        flips.groupBy(F.concat_ws(":", "resource_type", "resource_name").alias("resource"))
        .agg(F.sum("requests").alias("r"))
        .orderBy(F.desc("r"))
        .limit(15)
    )
    return (
        rows_of(newly_denied, columns, 200),
        rows_of(newly_allowed, columns, 200),
        [(r["principal"], int(r["r"])) for r in top_p.collect()],
        [(r["resource"], int(r["r"])) for r in top_r.collect()],
    )

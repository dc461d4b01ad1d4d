"""``simulate``: current vs proposed ACL set over the same traffic; every access whose decision flips.

Only the accesses the change can flip are decided (``kafkaguard.pipeline.changes``: those a changed ACL covers and
names, or of a principal whose super-user status changed; all of them if allow.everyone changed); the rest keep
their decision under both sets by construction and never reach Python.

Writes ``flips`` (Parquet: principal, host, operation, resource_type, resource_name, requests, first_seen,
last_seen, current_decision, proposed_decision) and ``report.html`` (newly denied = would break, newly allowed
= would open up, listed separately).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.changes import AclChange
from kafkaguard.pipeline.jobs.common import JobResult, JobRun, add_input_sections, read_and_reduce, rows_of
from kafkaguard.pipeline.report import Cell, Report, bar_chart, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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


#: ``changes.Reach`` rows as a DataFrame schema (DDL).
REACH_SCHEMA = "resource_type string, resource_name string, principal string, host string"

#: Up to this many flips, the report's lists are made in the driver from one collect of the (cached) flips
#: instead of one Spark job each, and the flips table is written as one sorted file.
SMALL_FLIPS = 100_000


def run(
    spark: SparkSession,
    logs: Sequence[str],
    current: AclSet,
    proposed: AclSet,
    out: str,
    fmt: str = "kafkaguard",
    run_: JobRun | None = None,
) -> JobResult:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from kafkaguard.pipeline import transforms

    job = run_ or JobRun("simulate", out)
    with job:
        reduced = read_and_reduce(spark, job, logs, fmt, keys=())
        change = AclChange.between(current, proposed)
        with job.step("finding the accesses the change can flip"):
            access = reduced.good  # one row per access tuple
            per_resource = access.groupBy("resource_type", "resource_name").agg(F.count(F.lit(1)).alias("n"))
            resources = per_resource.collect()
            distinct = sum(int(row["n"]) for row in resources)
            if change.everything:
                candidates = access
            else:
                reach = change.reach((row["resource_type"], row["resource_name"]) for row in resources)
                candidates = transforms.may_flip(
                    access, spark.createDataFrame(list(reach), REACH_SCHEMA), sorted(change.super_users)
                )
        with job.step("deciding them under both ACL sets"):
            decided = transforms.decide(spark, candidates, {"current_": current, "proposed_": proposed})
            decided = decided.persist(StorageLevel.MEMORY_AND_DISK)
            # One job: decides every candidate (filling the cache) and counts candidates and flips.
            counts = decided.groupBy("current_decision", "proposed_decision").agg(
                F.count(F.lit(1)).alias("n"), F.sum("requests").alias("r")
            )
            candidates_n = 0
            by: dict[str, tuple[int, int]] = {}
            for row in counts.collect():
                candidates_n += int(row["n"])
                if row["current_decision"] != row["proposed_decision"]:
                    n, r = by.get(row["proposed_decision"], (0, 0))
                    by[row["proposed_decision"]] = (n + int(row["n"]), r + int(row["r"]))
            denied_n, denied_r = by.get("DENIED", (0, 0))
            allowed_n, allowed_r = by.get("ALLOWED", (0, 0))
            flips = transforms.flips(decided).select(*FLIP_COLUMNS)
            small = denied_n + allowed_n <= SMALL_FLIPS
            if small:
                job.write_table(flips.coalesce(1).sortWithinPartitions(F.desc("requests")), "flips")
            else:
                job.write_table(flips.orderBy(F.desc("requests")), "flips")
        with job.step("report"):
            job.result.summary.update(
                distinct_accesses=distinct,
                changed_acls=len(change.changed),
                decided_accesses=candidates_n,
                newly_denied=denied_n,
                newly_denied_requests=denied_r,
                newly_allowed=allowed_n,
                newly_allowed_requests=allowed_r,
            )
            report = Report(
                "kafkaguard audit simulate",
                f"{current.name} ({len(current.acls)} ACLs) → {proposed.name} ({len(proposed.acls)} ACLs); "
                f"logs: {', '.join(logs)}",
            )
            for key, value in job.result.summary.items():
                report.card(key.replace("_", " "), value)
            add_input_sections(report, reduced)
            columns = list(FLIP_COLUMNS[:8])
            if small:
                lists = _lists_in_driver([row.asDict() for row in flips.collect()], columns)
            else:
                lists = _lists_in_spark(flips, columns)
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
            decided.unpersist()
            reduced.aggregated.unpersist()
    return job.result


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

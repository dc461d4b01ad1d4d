"""``simulate``: current vs proposed ACL set over the same traffic; every access whose decision flips.

Writes ``flips`` (Parquet: principal, host, operation, resource_type, resource_name, requests, first_seen,
last_seen, current_decision, proposed_decision) and ``report.html`` (newly denied = would break, newly allowed
= would open up, listed separately).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.jobs.common import JobResult, JobRun, add_input_sections, read_and_reduce, rows_of
from kafkaguard.pipeline.report import Report, bar_chart, table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
        reduced = read_and_reduce(spark, job, logs, fmt)
        with job.step("deciding distinct accesses under both ACL sets"):
            access = transforms.collapse(reduced.good)
            decided = transforms.decide(spark, access, {"current_": current, "proposed_": proposed})
            flips = transforms.flips(decided).persist(StorageLevel.MEMORY_AND_DISK)
            job.write_table(flips.orderBy(F.desc("requests")).select(*FLIP_COLUMNS), "flips")
        with job.step("report"):
            newly_denied = flips.where(F.col("proposed_decision") == "DENIED").orderBy(F.desc("requests"))
            newly_allowed = flips.where(F.col("proposed_decision") == "ALLOWED").orderBy(F.desc("requests"))
            counts = flips.groupBy("proposed_decision").agg(F.count(F.lit(1)).alias("n"), F.sum("requests").alias("r"))
            by = {row["proposed_decision"]: (int(row["n"]), int(row["r"])) for row in counts.collect()}
            denied_n, denied_r = by.get("DENIED", (0, 0))
            allowed_n, allowed_r = by.get("ALLOWED", (0, 0))
            job.result.summary.update(
                distinct_accesses=access.count(),
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
            report.section(
                f"Newly denied: would break ({denied_n:,} accesses, {denied_r:,} requests)",
                table(columns, rows_of(newly_denied, columns, 200), empty="nothing would break"),
            )
            report.section(
                f"Newly allowed: would open up ({allowed_n:,} accesses, {allowed_r:,} requests)",
                table(columns, rows_of(newly_allowed, columns, 200), empty="nothing would open up"),
            )
            top_p = flips.groupBy("principal").agg(F.sum("requests").alias("r")).orderBy(F.desc("r")).limit(15)
            top_r = (
                flips.groupBy(F.concat_ws(":", "resource_type", "resource_name").alias("resource"))
                .agg(F.sum("requests").alias("r"))
                .orderBy(F.desc("r"))
                .limit(15)
            )
            report.section(
                "Top principals and resources by flipped requests",
                bar_chart([(r["principal"], int(r["r"])) for r in top_p.collect()]),
                bar_chart([(r["resource"], int(r["r"])) for r in top_r.collect()], color="#dc2626"),
            )
            job.write_report(spark, report)
            flips.unpersist()
            reduced.aggregated.unpersist()
    return job.result


def main() -> None:
    from kafkaguard.pipeline.jobs.commands import run_single

    run_single("simulate")


if __name__ == "__main__":
    main()

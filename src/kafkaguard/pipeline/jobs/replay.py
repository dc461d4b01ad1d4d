"""``replay``: decide every logged request under one ACL set; how often does the logged decision differ?

Writes ``decisions`` (Parquet: principal, host, operation, resource_type, resource_name, requests, first_seen,
last_seen, logged_decision, decision, rule; one row per access and logged decision) and ``report.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.jobs.common import JobResult, JobRun, add_input_sections, read_and_reduce, rows_of
from kafkaguard.pipeline.report import Report, bar_chart, table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DECISION_COLUMNS = (
    "principal",
    "host",
    "operation",
    "resource_type",
    "resource_name",
    "requests",
    "first_seen",
    "last_seen",
    "logged_decision",
    "decision",
    "rule",
)


def run(
    spark: SparkSession,
    logs: Sequence[str],
    acls: AclSet,
    out: str,
    fmt: str = "kafkaguard",
    run_: JobRun | None = None,
) -> JobResult:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from kafkaguard.pipeline import transforms

    job = run_ or JobRun("replay", out)
    with job:
        reduced = read_and_reduce(spark, job, logs, fmt)
        with job.step("deciding distinct accesses"):
            access = transforms.collapse(reduced.good, keys=["logged_decision"])
            decided = transforms.decide(spark, access, {"": acls}, explain=True)
            decisions = decided.select(*DECISION_COLUMNS).persist(StorageLevel.MEMORY_AND_DISK)
            job.write_table(decisions, "decisions")
        with job.step("report"):
            differs = F.col("logged_decision") != F.col("decision")
            stats = decisions.agg(
                F.count(F.lit(1)).alias("rows"),
                F.sum(F.when(differs, 1).otherwise(0)).alias("differ_rows"),
                F.sum(F.when(differs, F.col("requests")).otherwise(0)).alias("differ_requests"),
            ).collect()[0]
            job.result.summary.update(
                distinct_accesses=int(stats["rows"] or 0),
                differing_accesses=int(stats["differ_rows"] or 0),
                differing_requests=int(stats["differ_requests"] or 0),
            )
            mismatches = decisions.where(differs).orderBy(F.desc("requests"))
            report = Report("kafkaguard audit replay", f"ACLs: {acls.name} ({len(acls.acls)}); logs: {', '.join(logs)}")
            for key, value in job.result.summary.items():
                report.card(key.replace("_", " "), value)
            add_input_sections(report, reduced)
            columns = list(DECISION_COLUMNS)
            report.section(
                "Accesses whose replayed decision differs from the logged one",
                table(columns, rows_of(mismatches, columns, 200), empty="every replayed decision matches the log"),
            )
            top_p = decisions.groupBy("principal").agg(F.sum("requests").alias("r")).orderBy(F.desc("r")).limit(15)
            top_r = (
                decisions.groupBy(F.concat_ws(":", "resource_type", "resource_name").alias("resource"))
                .agg(F.sum("requests").alias("r"))
                .orderBy(F.desc("r"))
                .limit(15)
            )
            report.section(
                "Top principals and resources by requests",
                bar_chart([(r["principal"], int(r["r"])) for r in top_p.collect()]),
                bar_chart([(r["resource"], int(r["r"])) for r in top_r.collect()], color="#16a34a"),
            )
            job.write_report(spark, report)
            decisions.unpersist()
            reduced.aggregated.unpersist()
    return job.result

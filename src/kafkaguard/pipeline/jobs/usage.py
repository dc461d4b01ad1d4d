"""``usage``: hits per ACL over the window, ACLs never used, ACLs shadowed (matched but never decisive), and the
top denied principals and resources, under one ACL set.

Writes ``acl_usage`` (Parquet: id, principal, host, operation, permission_type, resource_type, pattern_type,
resource_name, matched_requests, decisive_requests, matched_tuples, first_seen, last_seen, status),
``top_denied_principals`` (principal, requests, distinct_resource_type_resource_name),
``top_denied_resources`` (resource_type, resource_name, requests, distinct_principal) and ``report.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaguard.model.acl_json import binding_to_dict
from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.jobs.common import JobResult, JobRun, add_input_sections, read_and_reduce, rows_of
from kafkaguard.pipeline.report import Report, bar_chart, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ACL_COLUMNS = (
    "id",
    "principal",
    "host",
    "operation",
    "permission_type",
    "resource_type",
    "pattern_type",
    "resource_name",
)
USAGE_COLUMNS = (
    *ACL_COLUMNS,
    "matched_requests",
    "decisive_requests",
    "matched_tuples",
    "first_seen",
    "last_seen",
    "status",
)


def acl_table(spark: SparkSession, acls: AclSet) -> DataFrame:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(c, StringType(), False) for c in ACL_COLUMNS])
    rows = [tuple(binding_to_dict(acl.binding, acl.id)[c] for c in ACL_COLUMNS) for acl in acls.acls]
    return spark.createDataFrame(rows, schema)


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

    job = run_ or JobRun("usage", out)
    with job:
        reduced = read_and_reduce(spark, job, logs, fmt)
        with job.step("deciding distinct accesses"):
            access = transforms.collapse(reduced.good)
            decided = transforms.decide(spark, access, {"": acls}, explain=True).persist(StorageLevel.MEMORY_AND_DISK)
            usage = transforms.acl_usage(decided, acl_table(spark, acls)).select(*USAGE_COLUMNS)
            usage = usage.persist()
            job.write_table(usage.orderBy(F.desc("decisive_requests"), F.desc("matched_requests"), "id"), "acl_usage")
            top_principals = transforms.top_denied(decided, ["principal"], ["resource_type", "resource_name"])
            top_resources = transforms.top_denied(decided, ["resource_type", "resource_name"], ["principal"])
            job.write_table(top_principals, "top_denied_principals")
            job.write_table(top_resources, "top_denied_resources")
        with job.step("report"):
            status = {r["status"]: int(r["count"]) for r in usage.groupBy("status").count().collect()}
            job.result.summary.update(
                acls=len(acls.acls),
                used_acls=status.get("USED", 0),
                unused_acls=status.get("UNUSED", 0),
                shadowed_acls=status.get("SHADOWED", 0),
            )
            report = Report("kafkaguard audit usage", f"ACLs: {acls.name}; logs: {', '.join(logs)}")
            for key, value in job.result.summary.items():
                report.card(key.replace("_", " "), value)
            add_input_sections(report, reduced)
            used = usage.where(F.col("decisive_requests") > 0).limit(20).collect()
            report.section(
                "Hits per ACL (requests decided by the ACL, top 20)",
                bar_chart(
                    [
                        (
                            f"{r['id']} {r['principal']} {r['operation']} {r['resource_name']}",
                            int(r["decisive_requests"]),
                        )
                        for r in used
                    ]
                ),
            )
            listed = [c for c in USAGE_COLUMNS if c not in ("first_seen", "last_seen")]
            report.section(
                "Never used ACLs (matched no logged request)",
                table(listed, rows_of(usage.where(F.col("status") == "UNUSED"), listed, 500), empty="none"),
            )
            report.section(
                "Shadowed ACLs (matched, but another ACL always decided first)",
                table(listed, rows_of(usage.where(F.col("status") == "SHADOWED"), listed, 500), empty="none"),
            )
            report.section(
                "Top denied principals and resources",
                bar_chart([(r["principal"], int(r["requests"])) for r in top_principals.collect()], color="#dc2626"),
                bar_chart(
                    [
                        (f"{r['resource_type']}:{r['resource_name']}", int(r["requests"]))
                        for r in top_resources.collect()
                    ],
                    color="#dc2626",
                ),
            )
            job.write_report(spark, report)
            decided.unpersist()
            usage.unpersist()
            reduced.aggregated.unpersist()
    return job.result

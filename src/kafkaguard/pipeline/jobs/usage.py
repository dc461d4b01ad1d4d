"""``usage``: hits per ACL over the window, ACLs never used, ACLs shadowed (matched but never decisive), ACLs unused
for a while, and the top denied principals and resources, under one ACL set.

Writes ``acl_usage`` (Parquet: id, principal, host, operation, permission_type, resource_type, pattern_type,
resource_name, matched_requests, decisive_requests, users, first_seen, last_seen, status), ``acl_hits`` (the same
per ACL binding and requesting principal, ``user``), ``top_denied_principals`` (principal, requests,
distinct_resource_type_resource_name), ``top_denied_resources`` (resource_type, resource_name, requests,
distinct_principal), with ``unused_for`` also ``unused`` (the ACLs no request matched in the window that ends
with the newest logged request), and ``report.html``.

With ``state`` (``--state DIR``), runs are incremental (``usage_state``): only log files not processed before are
read, their hits are added to the state's, and ``acl_usage``, ``acl_hits`` and ``unused`` cover every file ever
processed; the top denied tables cover the files read by this run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from kafkaguard.model.acl_json import binding_to_dict
from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.jobs.common import (
    JobResult,
    JobRun,
    Reduced,
    add_input_sections,
    read_and_reduce,
    require_allowed,
)
from kafkaguard.pipeline.jobs.usage_state import LogFile, StateDir, list_log_files, plan
from kafkaguard.pipeline.report import Cell, Report, bar_chart, table

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
    "users",
    "first_seen",
    "last_seen",
    "status",
)
FILE_SCHEMA = "path string, size long, mtime_ms long, first_seen timestamp, last_seen timestamp"


def acl_table(spark: SparkSession, acls: AclSet) -> DataFrame:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(c, StringType(), False) for c in ACL_COLUMNS])
    rows = [tuple(binding_to_dict(acl.binding, acl.id)[c] for c in ACL_COLUMNS) for acl in acls.acls]
    return spark.createDataFrame(rows, schema)


@dataclass
class _Window:
    """What the hits cover: the files read, and the first and last logged request."""

    files: list[LogFile]
    first: datetime | None
    last: datetime | None


def run(
    spark: SparkSession,
    logs: Sequence[str],
    acls: AclSet,
    out: str,
    fmt: str = "kafkaguard",
    run_: JobRun | None = None,
    state: str | None = None,
    unused_for: timedelta | None = None,
    rebuild: bool = False,
) -> JobResult:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from kafkaguard.pipeline import transforms

    job = run_ or JobRun("usage", out)
    with job:
        store = StateDir(state) if state is not None else None
        previous = None if store is None or rebuild else store.current()
        if store is not None:
            with job.step("listing log files"):
                processed = _files(spark, previous)
                todo = plan(list_log_files(logs), processed.files)
                to_read = [f.path for f in todo.new]
            job.result.summary.update(new_files=len(todo.new), files_seen_before=len(todo.seen))
        else:
            to_read = list(logs)
        bindings = acl_table(spark, acls).persist()
        # Per access only (no logged decision): the rows go to the authorizer as they are, with no regrouping.
        # Logged decisions, for the refusal only (the hourly rows keep them; the per-access rows do not).
        reduced: Reduced | None = read_and_reduce(spark, job, to_read, fmt, keys=()) if to_read else None
        if reduced is not None and previous is None:
            require_allowed("usage", reduced.allowed, reduced.records)
        with job.step("deciding distinct accesses"):
            if reduced is not None:
                access = reduced.good
                decided = transforms.decide(spark, access, {"": acls}, explain=True)
                decided = decided.persist(StorageLevel.MEMORY_AND_DISK)
                hits = transforms.acl_hits(decided, bindings)
                window = _Window([], reduced.first, reduced.last)
            else:
                decided = None
                hits = spark.createDataFrame([], _hit_schema())
                window = _Window([], None, None)
            if store is not None:
                earlier = _hits(spark, previous)
                hits = transforms.merge_hits(earlier, hits) if earlier is not None else hits
                window = _Window(
                    [*processed.files, *todo.new],
                    _min(processed.first, window.first),
                    _max(processed.last, window.last),
                )
                generation = store.next()
                hits.write.parquet(str(generation / "hits"))
                _write_files(spark, generation, window)
                store.commit(generation)
                hits = spark.read.parquet(str(generation / "hits"))
            hits = hits.persist()
            job.write_table(hits, "acl_hits")
            usage = transforms.acl_usage(hits, bindings).select(*USAGE_COLUMNS).persist()
            # One row per ACL: sorted in one partition (a global sort would cost a sampling job).
            order = (F.desc("decisive_requests"), F.desc("matched_requests"), "id")
            job.write_table(usage.coalesce(1).sortWithinPartitions(*order), "acl_usage")
            if decided is not None:
                top_principals = transforms.top_denied(decided, ["principal"], ["resource_type", "resource_name"])
                top_resources = transforms.top_denied(decided, ["resource_type", "resource_name"], ["principal"])
            else:
                top_principals = spark.createDataFrame([], "principal string, requests long")
                top_resources = spark.createDataFrame([], "resource_type string, resource_name string, requests long")
            # Twenty rows each: collected once, then written from the driver (not computed again for the report).
            denied_principals = top_principals.collect()
            denied_resources = top_resources.collect()
            job.write_table(spark.createDataFrame(denied_principals, top_principals.schema), "top_denied_principals")
            job.write_table(spark.createDataFrame(denied_resources, top_resources.schema), "top_denied_resources")
            unused = None
            stale_rows: list[dict[str, Any]] = []
            if unused_for is not None:
                since = window.last - unused_for if window.last is not None else None
                stale = (
                    F.col("last_seen").isNull()
                    if since is None
                    else F.coalesce(F.col("last_seen") < since, F.lit(True))
                )
                unused = usage.where(stale).orderBy(F.col("last_seen").asc_nulls_first(), "id")
                job.write_table(unused, "unused")
                stale_rows = spark.read.parquet(job.path("unused")).toArrow().to_pylist()
        with job.step("report"):
            # One collect of the (small: one row per ACL) usage table; the report's lists are made from it here
            # rather than by one Spark job each.
            rows = sorted(
                spark.read.parquet(job.path("acl_usage")).toArrow().to_pylist(),
                key=lambda r: (-int(r["decisive_requests"]), -int(r["matched_requests"]), str(r["id"])),
            )
            status = Counter(str(r["status"]) for r in rows)
            job.result.summary.update(
                acls=len(acls.acls),
                used_acls=status.get("USED", 0),
                unused_acls=status.get("UNUSED", 0),
                shadowed_acls=status.get("SHADOWED", 0),
            )
            if reduced is None:
                job.result.summary.update(records=0, unparseable_lines=0)
            subtitle = f"ACLs: {acls.name}; logs: {', '.join(logs)}"
            if window.last is not None:
                subtitle += f"; requests from {window.first} to {window.last}"
            if unused is not None:
                job.result.summary[f"unused_for_{_text(unused_for)}"] = len(stale_rows)
            report = Report("kafkaguard audit usage", subtitle)
            for key, value in job.result.summary.items():
                report.card(key.replace("_", " "), value)
            if reduced is not None:
                add_input_sections(report, reduced)
            used = [r for r in rows if int(r["decisive_requests"]) > 0][:20]
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
            if unused is not None:
                report.section(
                    f"Unused for {_text(unused_for)} (no request matched them since {since or 'ever'})",
                    table([*listed, "last_seen"], _cells(stale_rows, [*listed, "last_seen"]), empty="none"),
                )
            report.section(
                "Never used ACLs (matched no logged request)",
                table(listed, _cells([r for r in rows if r["status"] == "UNUSED"], listed), empty="none"),
            )
            report.section(
                "Shadowed ACLs (matched, but another ACL always decided first)",
                table(listed, _cells([r for r in rows if r["status"] == "SHADOWED"], listed), empty="none"),
            )
            report.section(
                "Top denied principals and resources" + (" (files read by this run)" if store is not None else ""),
                bar_chart([(r["principal"], int(r["requests"])) for r in denied_principals], color="#dc2626"),
                bar_chart(
                    [(f"{r['resource_type']}:{r['resource_name']}", int(r["requests"])) for r in denied_resources],
                    color="#dc2626",
                ),
            )
            job.write_report(spark, report)
            for cached in (decided, usage, hits, bindings):
                if cached is not None:
                    cached.unpersist()
            if reduced is not None:
                reduced.aggregated.unpersist()
    return job.result


def _cells(rows: list[dict[str, Any]], columns: Sequence[str], limit: int = 500) -> list[tuple[Cell, ...]]:
    return [tuple(row[c] for c in columns) for row in rows[:limit]]


def _text(window: timedelta | None) -> str:
    if window is None:
        return ""
    return f"{window.days}d" if window.seconds == 0 else f"{int(window.total_seconds() // 3600)}h"


def _min(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def _hit_schema() -> str:
    from kafkaguard.pipeline.transforms import BINDING

    return ", ".join(f"{c} string" for c in (*BINDING, "user")) + (
        ", matched_requests long, decisive_requests long, first_seen timestamp, last_seen timestamp"
    )


@dataclass(frozen=True, slots=True)
class _Processed:
    files: list[LogFile]
    first: datetime | None
    last: datetime | None


def _files(spark: SparkSession, generation: object) -> _Processed:
    """The files a generation has processed, and the window of their requests."""
    from pathlib import Path

    if not isinstance(generation, Path):
        return _Processed([], None, None)
    rows = spark.read.parquet(str(generation / "files")).collect()
    files = [LogFile(r["path"], int(r["size"]), int(r["mtime_ms"])) for r in rows]
    firsts = [r["first_seen"] for r in rows if r["first_seen"] is not None]
    lasts = [r["last_seen"] for r in rows if r["last_seen"] is not None]
    return _Processed(files, min(firsts, default=None), max(lasts, default=None))


def _hits(spark: SparkSession, generation: object) -> DataFrame | None:
    from pathlib import Path

    if not isinstance(generation, Path):
        return None
    return spark.read.parquet(str(generation / "hits"))


def _write_files(spark: SparkSession, generation: object, window: _Window) -> None:
    """One row per processed file, each with the window of the whole state (a file's own window is not kept)."""
    rows = [(f.path, f.size, f.mtime_ms, window.first, window.last) for f in window.files]
    spark.createDataFrame(rows, FILE_SCHEMA).coalesce(1).write.parquet(str(generation) + "/files")

"""``recommend``: per principal (or one), the smallest ACL set allowing exactly its observed allowed traffic
(``kafkaguard.pipeline.recommend``), run per principal group with ``applyInArrow``.

Writes ``recommendations`` (Parquet: principal, host, operation, permission_type, resource_type, pattern_type,
resource_name, covers_names, exact), ``acls.json`` (kafkaguard's ACL JSON, ready to import) and ``report.html``.
Super users are skipped: they need no ACLs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.model.acl_json import acls_to_document
from kafkaguard.pipeline.jobs.common import (
    JobResult,
    JobRun,
    add_input_sections,
    read_and_reduce,
    require_allowed,
    write_text_file,
)
from kafkaguard.pipeline.recommend import NameUniverse, Observed, recommend
from kafkaguard.pipeline.report import Report, table

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from kafkaguard.pipeline.session import Shared

RECOMMENDATION_COLUMNS = (
    "principal",
    "host",
    "operation",
    "permission_type",
    "resource_type",
    "pattern_type",
    "resource_name",
    "covers_names",
    "exact",
)
_SCHEMA = (
    "principal string, host string, operation string, permission_type string, resource_type string, "
    "pattern_type string, resource_name string, covers_names long, exact boolean"
)


def make_recommender(universe: Shared) -> Callable[[pa.Table], pa.Table]:
    state: dict[str, NameUniverse] = {}

    def recommend_group(group: pa.Table) -> pa.Table:
        import pyarrow as pa

        if "u" not in state:
            raw: dict[str, list[str]] = json.loads(universe.value)
            state["u"] = NameUniverse({ResourceType[t]: names for t, names in raw.items()})
        columns = {name: group.column(name).to_pylist() for name in group.column_names}
        principal = columns["principal"][0]
        observed = [
            Observed(h, AclOperation[o], ResourceType[t], n, bool(a))
            for h, o, t, n, a in zip(
                columns["host"],
                columns["operation"],
                columns["resource_type"],
                columns["resource_name"],
                columns["allowed"],
                strict=True,
            )
        ]
        result = recommend(principal, observed, state["u"])
        rows = [_row(principal, b, n, result.exact) for b, n in zip(result.bindings, result.merged, strict=True)]
        return pa.Table.from_pylist(rows, schema=_arrow_schema())

    return recommend_group


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [(c, pa.string()) for c in RECOMMENDATION_COLUMNS[:7]] + [("covers_names", pa.int64()), ("exact", pa.bool_())]
    )


def _row(principal: str, binding: AclBinding, covers: int, exact: bool) -> dict[str, object]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "principal": principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission_type": entry.permission_type.name,
        "resource_type": pattern.resource_type.name,
        "pattern_type": pattern.pattern_type.name,
        "resource_name": pattern.name,
        "covers_names": covers,
        "exact": exact,
    }


def binding_of(row: dict[str, object]) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType[str(row["resource_type"])], str(row["resource_name"]), PatternType[str(row["pattern_type"])]
        ),
        AccessControlEntry(
            str(row["principal"]),
            str(row["host"]),
            AclOperation[str(row["operation"])],
            AclPermissionType[str(row["permission_type"])],
        ),
    )


def run(
    spark: SparkSession,
    logs: Sequence[str],
    out: str,
    fmt: str = "kafkaguard",
    principal: str | None = None,
    super_users: Iterable[str] = (),
    run_: JobRun | None = None,
) -> JobResult:
    from pyspark.sql import functions as F

    from kafkaguard.pipeline import transforms
    from kafkaguard.pipeline.session import share

    job = run_ or JobRun("recommend", out)
    with job:
        reduced = read_and_reduce(spark, job, logs, fmt)
        require_allowed("recommend", reduced.allowed, reduced.records)
        with job.step("recommending per principal"):
            universe: dict[str, list[str]] = {}
            for name_row in reduced.good.select("resource_type", "resource_name").distinct().collect():
                universe.setdefault(name_row["resource_type"], []).append(name_row["resource_name"])
            access = reduced.good.groupBy(*transforms.ACCESS_KEY).agg(
                F.max(F.col("logged_decision") == "ALLOWED").alias("allowed")
            )
            if principal is not None:
                access = access.where(F.col("principal") == principal)
            skipped = sorted(set(super_users))
            if skipped:
                access = access.where(~F.col("principal").isin(*skipped))
            recommender = make_recommender(share(spark, json.dumps(universe)))
            recommendations = (
                access.groupBy("principal")
                .applyInArrow(recommender, _SCHEMA)
                .orderBy("principal", "resource_type", "resource_name", "operation", "host", "permission_type")
            )
            job.write_table(recommendations, "recommendations")
            rows: list[dict[str, Any]] = [r.asDict() for r in spark.read.parquet(job.path("recommendations")).collect()]
            bindings = [binding_of(row) for row in rows]
            document = json.dumps(acls_to_document(bindings), indent=2) + "\n"
            write_text_file(spark, job.path("acls.json"), document)
        with job.step("report"):
            per_principal: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                per_principal.setdefault(str(row["principal"]), []).append(row)
            inexact = sorted(p for p, rs in per_principal.items() if not all(r["exact"] for r in rs))
            job.result.summary.update(
                principals=len(per_principal),
                recommended_acls=len(rows),
                prefixed_acls=sum(1 for r in rows if r["pattern_type"] == "PREFIXED"),
                deny_acls=sum(1 for r in rows if r["permission_type"] == "DENY"),
                inexact_principals=len(inexact),
            )
            report = Report(
                "kafkaguard audit recommend",
                f"principal: {principal or 'all'}; logs: {', '.join(logs)}; import acls.json to apply",
            )
            for key, value in job.result.summary.items():
                report.card(key.replace("_", " "), value)
            add_input_sections(report, reduced)
            report.section(
                "Per principal",
                table(
                    ["principal", "ACLs", "PREFIXED", "names covered", "exact"],
                    [
                        (
                            p,
                            len(rs),
                            sum(1 for r in rs if r["pattern_type"] == "PREFIXED"),
                            sum(int(str(r["covers_names"])) for r in rs),
                            p not in inexact,
                        )
                        for p, rs in sorted(per_principal.items())
                    ],
                    empty="no allowed traffic in the log (Kafka logs Allowed lines only at DEBUG level)",
                ),
            )
            columns = list(RECOMMENDATION_COLUMNS)
            report.section(
                "Recommended ACLs",
                table(columns, [tuple(r[c] for c in columns) for r in rows[:1000]], empty="none"),
            )
            job.write_report(spark, report)
            reduced.aggregated.unpersist()
    return job.result

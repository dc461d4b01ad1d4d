"""Transform: pure DataFrame → DataFrame functions (no I/O, no session), with settings as arguments.

The raw log is reduced in the JVM first (``aggregate_raw``: one row per access tuple, logged decision and time
bucket, with counts and first/last seen; bad lines grouped by reason), because logs are highly repetitive and
anything that sends every row through Python is capped near 0.4M rows/s (SPARK-NOTES.md). Only the distinct
tuples reach Python, in ``decide``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kafkaguard.pipeline.acls import AclSet
from kafkaguard.pipeline.deciding import KEY, make_decider, output_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ACCESS_KEY = KEY
COUNTS = ("requests", "first_seen", "last_seen")


def aggregate_raw(
    records: DataFrame, bucket: str = "hour", keys: Sequence[str] = ("logged_decision",), hourly: bool = True
) -> DataFrame:
    """Records (``validation.RECORD_COLUMNS``) → in one pass (grouping sets), two kinds of rows:

    * ``per_tuple`` true: one row per (access tuple, ``keys``, error) with ``requests``, ``first_seen``,
      ``last_seen`` (bad lines: key columns null, ``error`` set); ``keys`` is ``logged_decision`` or nothing;
    * ``per_tuple`` false: one row per (time bucket, logged_decision) with ``requests`` (the chart over time; bad
      lines have a null bucket).

    ``requests`` sums the records' ``count`` (a usage-mode record stands for many requests; a bad line counts one);
    ``last_seen`` is the latest ``last_time``.

    (This costs a little more than grouping by the access tuple alone, and less than a second aggregation over
    the raw records for the chart: see docs/benchmarks.md, "Figures from the code".) Without ``hourly``, only the
    ``per_tuple`` rows, by a plain group-by (no grouping sets; ``bucket`` null), with ``allowed``: the requests
    logged ALLOWED.
    """
    from pyspark.sql import functions as F

    # No string aggregate here (such as a sample bad line): it would force a sort-based aggregation. A record
    # stands for ``count`` requests (a usage-mode window's), made from ``time`` to ``last_time``: requests are
    # summed counts, never rows; a windowed record lands in the bucket of its first request.
    keyed = records.select(
        *ACCESS_KEY,
        F.col("decision").alias("logged_decision"),
        "error",
        F.date_trunc(bucket, F.col("time")).alias("bucket"),
        "time",
        "last_time",
        "count",
    )
    tuple_keys = [*ACCESS_KEY, *keys, "error"]
    if not hourly:
        grouped = per_tuple_counts(keyed, keys, requests="count", first="time", last="last_time")
        return grouped.select(
            *ACCESS_KEY,
            "logged_decision",
            "error",
            F.lit(None).cast("timestamp").alias("bucket"),
            *COUNTS,
            "allowed",
            F.lit(True).alias("per_tuple"),
        )
    return keyed.groupingSets(
        [tuple_keys, ["bucket", "logged_decision"]], *ACCESS_KEY, "logged_decision", "error", "bucket"
    ).agg(
        F.sum("count").alias("requests"),
        F.min("time").alias("first_seen"),
        F.max("last_time").alias("last_seen"),
        (F.grouping("bucket") == 1).alias("per_tuple"),
    )


def per_tuple_counts(frame: DataFrame, keys: Sequence[str], *, requests: str, first: str, last: str) -> DataFrame:
    """One row per (access tuple, ``keys``, error) of ``frame``: ``requests`` summed, the earliest ``first`` as
    ``first_seen``, the latest ``last`` as ``last_seen``, and ``allowed`` (the requests logged ALLOWED); a null
    ``logged_decision`` when ``keys`` leaves it out. For ``aggregate_raw`` and ``folding``'s folded groups alike.

    Cost: one hash aggregation over ``frame``."""
    from pyspark.sql import functions as F

    grouped = frame.groupBy(*ACCESS_KEY, *keys, "error").agg(
        F.sum(requests).alias("requests"),
        F.min(first).alias("first_seen"),
        F.max(last).alias("last_seen"),
        F.sum(F.when(F.col("logged_decision") == "ALLOWED", F.col(requests)).otherwise(0)).alias("allowed"),
    )
    if "logged_decision" not in keys:
        grouped = grouped.withColumn("logged_decision", F.lit(None).cast("string"))
    return grouped


def small_rows(aggregated: DataFrame) -> DataFrame:
    """The few rows of ``aggregated`` that are not about one access tuple: the over-time rows and the bad lines
    (``per_tuple, bucket, logged_decision, error, requests, first_seen, last_seen``; an hour's first and last request),
    to collect in one job (see ``over_time`` and ``bad_lines`` for their meaning). (Not unioned with anything: a union
    over the cached aggregation computed it again; see docs/benchmarks.md, "Figures from the code".)"""
    from pyspark.sql import functions as F

    return aggregated.where(~F.col("per_tuple") | F.col("error").isNotNull()).select(
        "per_tuple", "bucket", "logged_decision", "error", "requests", "first_seen", "last_seen"
    )


def over_time(aggregated: DataFrame) -> DataFrame:
    """``bucket, logged_decision, requests`` sorted by time (valid records only)."""
    from pyspark.sql import functions as F

    return (
        aggregated.where(~F.col("per_tuple") & F.col("bucket").isNotNull())
        .select("bucket", "logged_decision", "requests")
        .orderBy("bucket", "logged_decision")
    )


def bad_lines(aggregated: DataFrame) -> DataFrame:
    """``reason, lines`` for the lines that are not records."""
    from pyspark.sql import functions as F

    return (
        aggregated.where(F.col("per_tuple") & F.col("error").isNotNull())
        .groupBy(F.col("error").alias("reason"))
        .agg(F.sum("requests").alias("lines"))
    )


def good_rows(aggregated: DataFrame, keys: Sequence[str] = ("logged_decision",)) -> DataFrame:
    """Valid records: one row per (access tuple, ``keys``) with ``requests``, ``first_seen``, ``last_seen``
    (``keys`` as given to ``aggregate_raw``)."""
    from pyspark.sql import functions as F

    dropped = ["error", "bucket", "per_tuple"] + (["logged_decision"] if "logged_decision" not in keys else [])
    return aggregated.where(F.col("per_tuple") & F.col("error").isNull()).drop(*dropped)


def collapse(aggregated_good: DataFrame, keys: Sequence[str] = ()) -> DataFrame:
    """Per access tuple (plus ``keys``): total ``requests`` and overall ``first_seen``/``last_seen``."""
    from pyspark.sql import functions as F

    return aggregated_good.groupBy(*ACCESS_KEY, *keys).agg(
        F.sum("requests").alias("requests"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
    )


def decide(spark: SparkSession, access: DataFrame, acl_sets: Mapping[str, AclSet], explain: bool = False) -> DataFrame:
    """Add the decision columns of each ACL set (keyed by column prefix, e.g. ``{"current_": ...}``), computed by
    the core authorizer in ``mapInArrow``; see ``kafkaguard.pipeline.deciding``."""
    from pyspark.sql.types import StructType

    from kafkaguard.pipeline.session import share

    payloads = {prefix: share(spark, s.to_payload()) for prefix, s in acl_sets.items()}
    schema = StructType(list(access.schema.fields) + output_fields(acl_sets, explain))
    return access.mapInArrow(make_decider(payloads, explain), schema)


def may_flip(
    access: DataFrame,
    changed: DataFrame,
    prefix_lengths: Sequence[int],
    whole_principals: Sequence[str] = (),
    wildcard: bool = True,
) -> DataFrame:
    """The accesses whose decision may differ between two ACL sets (``kafkaguard.pipeline.changes``): every access
    of a principal in ``whole_principals`` (a super user, or a member of other groups, in one set only), and those a
    ``changed`` row (resource_type,
    pattern_type, name, principal, host; null = any) covers: the access's name looked up as a LITERAL name, as the
    LITERAL ``*`` (unless ``wildcard`` is false: no changed row is one), and as a PREFIXED pattern of each length in
    ``prefix_lengths``; one broadcast hash join. (Each key costs one probe per distinct access.) An
    access appears once per key that is covered (duplicates are identical rows)."""
    from pyspark.sql import functions as F

    name = F.col("resource_name")
    keys = [F.struct(F.lit("LITERAL").alias("t"), name.alias("k"))]
    if wildcard:
        keys.append(F.struct(F.lit("LITERAL").alias("t"), F.lit("*").alias("k")))
    keys += [
        F.when(F.length(name) >= n, F.struct(F.lit("PREFIXED").alias("t"), F.substring(name, 1, n).alias("k")))
        for n in prefix_lengths
    ]
    # A prefix longer than the name is null; dropped after the explode (no lambda: it would not be compiled).
    looked_up = access.select(*ACCESS_KEY, *COUNTS, F.explode(F.array(*keys)).alias("_k")).where(
        F.col("_k").isNotNull()
    )
    a, c = looked_up.alias("a"), F.broadcast(changed).alias("c")
    covered = (
        (F.col("a.resource_type") == F.col("c.resource_type"))
        & (F.col("a._k.t") == F.col("c.pattern_type"))
        & (F.col("a._k.k") == F.col("c.name"))
        & (F.col("c.principal").isNull() | (F.col("c.principal") == F.col("a.principal")))
        & (F.col("c.host").isNull() | (F.col("c.host") == F.col("a.host")))
    )
    # An access covered through several of its keys appears once per key; not de-duplicated here: a shuffle after
    # the join would let adaptive execution drop the plan's last stage when no access is covered, and with it the
    # caller's observations (``simulate._scan``). The caller de-duplicates the few rows it reads back.
    found = a.join(c, covered, "left_semi").drop("_k")
    if not whole_principals:
        return found
    promoted = F.col("principal").isin(*whole_principals)
    return access.select(*ACCESS_KEY, *COUNTS).where(promoted).unionByName(found.where(~promoted))


def flips(decided: DataFrame) -> DataFrame:
    """The simulate table: tuples whose decision differs between ``current_`` and ``proposed_``."""
    from pyspark.sql import functions as F

    return decided.where(F.col("current_decision") != F.col("proposed_decision")).select(
        *ACCESS_KEY, *COUNTS, "current_decision", "proposed_decision"
    )


#: The columns of an ACL's binding (``model.acl_json``), which key its hits across runs (ids change on import).
BINDING = ("principal", "host", "operation", "permission_type", "resource_type", "pattern_type", "resource_name")
#: Per ACL binding and requesting principal (``user``): what ``acl_usage`` counts.
HIT_COLUMNS = (*BINDING, "user", "matched_requests", "decisive_requests", "first_seen", "last_seen")


def acl_hits(decided: DataFrame, acls: DataFrame) -> DataFrame:
    """Per ACL binding and requesting principal (``user``), from ``decide(..., explain=True)`` rows: the requests
    the ACL matched, those it decided, first and last seen (``HIT_COLUMNS``). ``acls``: id and ``BINDING``."""
    from pyspark.sql import functions as F

    exploded = decided.select(
        F.explode("matching_ids").alias("id"), "acl_id", F.col("principal").alias("user"), *COUNTS
    )
    return (
        exploded.join(F.broadcast(acls.select("id", *BINDING)), "id")
        .groupBy(*BINDING, "user")
        .agg(
            F.sum("requests").alias("matched_requests"),
            F.sum(F.when(F.col("id") == F.col("acl_id"), F.col("requests")).otherwise(0)).alias("decisive_requests"),
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
        )
        .select(*HIT_COLUMNS)
    )


def merge_hits(*tables: DataFrame) -> DataFrame:
    """Hits of several runs as one table: counts added, first/last seen widened."""
    from pyspark.sql import functions as F

    union = tables[0]
    for table in tables[1:]:
        union = union.unionByName(table)
    return (
        union.groupBy(*BINDING, "user")
        .agg(
            F.sum("matched_requests").alias("matched_requests"),
            F.sum("decisive_requests").alias("decisive_requests"),
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
        )
        .select(*HIT_COLUMNS)
    )


def acl_usage(hits: DataFrame, acls: DataFrame) -> DataFrame:
    """Per ACL (``acls``: id and ``BINDING``) from its hits: ``matched_requests`` (a request the ACL matched),
    ``decisive_requests`` (the ACL decided it), ``users`` (requesting principals it matched), first/last seen, and
    ``status``: ``UNUSED`` (never matched), ``SHADOWED`` (matched but never decisive: another ACL always decided
    first, e.g. an ALLOW under a broader DENY) or ``USED``."""
    from pyspark.sql import functions as F

    per_acl = hits.groupBy(*BINDING).agg(
        F.sum("matched_requests").alias("matched_requests"),
        F.sum("decisive_requests").alias("decisive_requests"),
        F.count(F.lit(1)).alias("users"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
    )
    joined = acls.join(per_acl, list(BINDING), "left").fillna(0, ["matched_requests", "decisive_requests", "users"])
    status = (
        F.when(F.col("matched_requests") == 0, "UNUSED")
        .when(F.col("decisive_requests") == 0, "SHADOWED")
        .otherwise("USED")
    )
    return joined.withColumn("status", status)


def top_denied(decided: DataFrame, by: Sequence[str], other: Sequence[str], limit: int = 20) -> DataFrame:
    """The ``limit`` groups (``by``) with the most DENIED requests, with how many distinct ``other`` they hit."""
    from pyspark.sql import functions as F

    return (
        decided.where(F.col("decision") == "DENIED")
        .groupBy(*by)
        .agg(F.sum("requests").alias("requests"), F.count_distinct(*other).alias("distinct_" + "_".join(other)))
        .orderBy(F.desc("requests"), *by)
        .limit(limit)
    )

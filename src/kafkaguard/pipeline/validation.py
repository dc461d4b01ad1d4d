"""Checking audit records in the JVM: the columns every reader yields (``RECORD_COLUMNS``) and
``validate_records``, ``kafkaguard.audit.records.record.validation_reason`` as Spark expressions, shared by the
JSON-lines and Parquet readers (``pipeline.readers``) and the collected-dataset reader (``pipeline.collected``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaguard.audit.records.record import (
    BAD_COUNT,
    BAD_ENFORCED,
    BAD_ENVELOPE,
    BAD_LAST_TIME,
    DECISION_NAMES,
    OPERATION_NAMES,
    RESOURCE_TYPE_NAMES,
    SCHEMA_VERSION,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

RECORD_COLUMNS = (
    "time",
    "principal",
    "host",
    "api",
    "operation",
    "resource_type",
    "resource_name",
    "decision",
    "rule",
    "count",
    "last_time",
    "enforced",
    "error",
    "line",
)
VALUES = ("principal", "host", "api", "operation", "resource_type", "resource_name", "decision", "rule")
#: Version 2's optional fields, read as JSON text (a number's or boolean's literal) and checked as such: a typed
#: field that does not parse would make Spark call the whole line invalid JSON, not say which field is wrong.
V2_TEXT = ("count", "last_time", "enforced")
RECORD_VALUES = VALUES


def validate_records(
    df: DataFrame,
    raw_line: str | None,
    bad_json: str | None = None,
    bad_envelope: str | None = None,
    keep: Sequence[str] = (),
) -> DataFrame:
    """Apply ``kafkaguard.audit.records.record.validation_reason`` in the JVM, in the same order with the same reasons;
    the ``keep`` columns are passed through."""
    from pyspark.sql import functions as F

    for name in V2_TEXT:  # Parquet files of version 1 records have none of them
        if name not in df.columns:
            df = df.withColumn(name, F.lit(None).cast("string"))
    time = _timestamp(df, "time")
    last_time = _timestamp(df, "last_time")
    checks: list[tuple[Column, str]] = []
    if bad_json is not None:
        checks.append((F.col(bad_json), "not valid JSON"))
    if bad_envelope is not None:
        checks.append((F.col(bad_envelope), BAD_ENVELOPE))
    version = F.col("version")
    checks += [
        (version.isNull(), "missing or non-integer version"),
        (
            (version < 1) | (version > SCHEMA_VERSION),
            f"unsupported version (this kafkaguard reads versions 1 to {SCHEMA_VERSION})",
        ),
    ]
    for name in ("principal", "host", "operation", "resource_type", "pattern_type", "resource_name", "decision"):
        checks.append((F.col(name).isNull(), f"missing or non-string {name}"))
    checks += [
        (time.isNull(), "missing or invalid time"),
        (~F.col("operation").isin(*OPERATION_NAMES), "unknown operation"),
        (~F.col("resource_type").isin(*RESOURCE_TYPE_NAMES), "unknown resource_type"),
        (F.col("pattern_type") != "LITERAL", "pattern_type is not LITERAL"),
        (~F.col("decision").isin(*DECISION_NAMES), "unknown decision"),
    ]
    count_text = F.col("count").cast("string")
    enforced_text = F.col("enforced").cast("string")
    count = count_text.try_cast("long")
    # JSON text: a JSON string "3" reads as the text 3, as the number does; the raw line tells them apart (looked
    # at only on rows that have the field, i.e. folded records, few).
    count_ok = count_text.rlike("^[0-9]+$") & count.isNotNull() & (count >= 1)
    enforced_ok = enforced_text.isin("true", "false")
    if raw_line is not None:
        count_ok = count_ok & ~F.col(raw_line).rlike('"count"\\s*:\\s*"')
        enforced_ok = enforced_ok & ~F.col(raw_line).rlike('"enforced"\\s*:\\s*"')
    checks += [
        (count_text.isNotNull() & ~count_ok, BAD_COUNT),
        (F.col("last_time").isNotNull() & F.coalesce(last_time < time, last_time.isNull()), BAD_LAST_TIME),
        (enforced_text.isNotNull() & ~enforced_ok, BAD_ENFORCED),
    ]
    line = (
        F.col(raw_line)
        if raw_line is not None
        else F.to_json(F.struct(*[F.col(c).cast("string") for c in df.columns if c not in keep]))
    )
    return finish(
        df,
        time,
        first_reason(checks),
        line,
        keep,
        count=F.coalesce(count, F.lit(1)),
        last_time=F.coalesce(last_time, time),
        enforced=F.coalesce(enforced_text != "false", F.lit(True)),
    )


def _timestamp(df: DataFrame, name: str) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    if isinstance(df.schema[name].dataType, TimestampType | TimestampNTZType):
        return F.col(name).cast("timestamp")  # Parquet: already a timestamp (NTZ is read as UTC)
    return F.col(name).cast("string").try_cast("timestamp")


def first_reason(checks: Sequence[tuple[Column, str]]) -> Column:
    from pyspark.sql import functions as F

    reason = F.when(checks[0][0], F.lit(checks[0][1]))
    for condition, text in checks[1:]:
        reason = reason.when(condition, F.lit(text))
    return reason


def finish(
    df: DataFrame,
    time: Column,
    reason: Column,
    line: Column,
    keep: Sequence[str] = (),
    *,
    count: Column | None = None,
    last_time: Column | None = None,
    enforced: Column | None = None,
) -> DataFrame:
    """Good rows keep their values; bad rows keep only ``error`` and ``line`` (and ``count`` 1: one line)."""
    from pyspark.sql import functions as F

    # ``line`` is built only for bad rows (for Parquet input it is a to_json of the row: too dear for every row).
    with_error = df.select(
        "*",
        reason.alias("error"),
        time.alias("_time"),
        (count if count is not None else F.lit(1).cast("long")).alias("_count"),
        (last_time if last_time is not None else time).alias("_last_time"),
        (enforced if enforced is not None else F.lit(True)).alias("_enforced"),
    )
    good = F.col("error").isNull()
    return with_error.select(
        F.when(good, F.col("_time")).alias("time"),
        *[F.when(good, F.col(name)).alias(name) for name in VALUES],
        F.when(good, F.col("_count")).otherwise(F.lit(1)).cast("long").alias("count"),
        F.when(good, F.col("_last_time")).alias("last_time"),
        F.when(good, F.col("_enforced")).alias("enforced"),
        F.col("error"),
        F.when(~good, line).alias("line"),
        *keep,
    )

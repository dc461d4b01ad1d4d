"""Extract: audit records from files, parsed and validated in the JVM.

Both formats give one DataFrame with the columns of ``validation.RECORD_COLUMNS``; a line that is not a valid record
keeps only ``error`` (the reason, the same reasons as ``kafkaguard.audit``) and ``line`` (its text), so jobs count
and report it instead of dropping it. Blank lines are not records and are skipped, and so are CloudEvents
envelopes of other categories than authorization (management, authentication and shadow events: a shadow event
repeats a decision already recorded); an authorization envelope is read as the record in its ``data``.

``count`` is how many requests a row stands for (a usage-mode record's count; 1 otherwise, and for bad lines:
one line) and ``last_time`` the last of them (``time`` when absent): jobs sum ``count``, never count rows.

* ``kafkaguard``: JSON lines (``kafkaguard.audit.records.record``), or Parquet files with the same columns (a path
  ending in ``.parquet`` or a directory of ``*.parquet`` files), or a dataset ``kafkaguard audit collect`` wrote
  (recognised by its columns; ``kafkaguard.pipeline.collected``: its rows also carry ``count`` and ``last_time``);
* ``kafka-log``: Apache Kafka's ``kafka-authorizer.log``, parsed with the very regular expression of
  ``kafkaguard.audit.records.kafka_log`` (written to mean the same in Python and Java).

Paths may be files, directories (read recursively) or globs, gzip-compressed or not, on any filesystem Spark
can read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaguard.audit.records import kafka_log
from kafkaguard.audit.records.record import (
    AUTHORIZATION_TYPES,
    OPERATION_NAMES,
    RESOURCE_TYPE_NAMES,
)
from kafkaguard.pipeline import collected
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.validation import V2_TEXT, VALUES, finish, first_reason, validate_records

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FORMATS = ("kafkaguard", "kafka-log")


def check_paths(paths: Sequence[str]) -> None:
    """Local paths must exist (remote ones are checked by Spark when read).

    :raises PipelineError: no path, or a local path that does not exist.
    """
    if not paths:
        raise PipelineError("no log given: pass --log PATH (repeatable)")
    for path in paths:
        if "://" in path or any(c in path for c in "*?["):
            continue
        local = path.removeprefix("file:")
        if not os.path.exists(local):
            raise PipelineError(f"log path does not exist: {path}")


def _is_parquet(path: str) -> bool:
    """A ``.parquet`` path, or a local directory with a ``*.parquet`` file at any depth (a collected dataset keeps
    its files in ``date=`` directories); hidden files and directories (temporary files) do not count."""
    local = path.removeprefix("file:")
    if path.rstrip("/").endswith(".parquet"):
        return True
    if os.path.isdir(local):
        for _, dirs, names in os.walk(local):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            if any(name.endswith(".parquet") and not name.startswith((".", "_")) for name in names):
                return True
    return False


def read_records(spark: SparkSession, paths: Sequence[str], fmt: str = "kafkaguard") -> DataFrame:
    """:raises PipelineError: unknown format, missing path, or Parquet files mixed with text."""
    if fmt not in FORMATS:
        raise PipelineError(f"unknown --format {fmt!r}: expected one of {', '.join(FORMATS)}")
    check_paths(paths)
    if fmt == "kafka-log":
        return parse_kafka_log(_read_text(spark, paths))
    parquet = [_is_parquet(p) for p in paths]
    if any(parquet):
        if not all(parquet):
            raise PipelineError("mixing Parquet and JSON-lines logs in one run is not supported")
        frame = spark.read.option("recursiveFileLookup", "true").parquet(*paths)
        if collected.is_collected(frame):
            return collected.records(frame)
        return validate_records(frame, raw_line=None)
    return parse_json_lines(_read_text(spark, paths))


def read_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The raw lines (``value``) of text logs.

    :raises PipelineError: as ``read_records``.
    """
    check_paths(paths)
    return _read_text(spark, paths)


def _read_text(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    return spark.read.option("recursiveFileLookup", "true").text(list(paths))


def parse_json_lines(text: DataFrame) -> DataFrame:
    """``value`` lines → records (see the module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [StructField("version", LongType())]
        + [StructField(name, StringType()) for name in ("time", "pattern_type", *VALUES, *V2_TEXT)]
    )
    # One parse per line: an envelope's data is a nested struct of the same fields, taken instead of the top
    # level's when the line is an envelope.
    envelope = [StructField("specversion", StringType()), StructField("type", StringType())]
    with_corrupt = StructType(
        [*schema.fields, *envelope, StructField("data", schema), StructField("_corrupt", StringType())]
    )
    lines = text.where(F.trim(F.col("value")) != "")
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
    parsed = lines.select(F.col("value"), F.from_json("value", with_corrupt, options).alias("r"))
    invalid_json = F.col("r").isNull() | F.col("r._corrupt").isNotNull() | ~F.trim(F.col("value")).startswith("{")
    is_envelope = F.col("r.specversion").isNotNull() & ~invalid_json
    # An envelope of another category is no record and no bad line: skipped.
    kept = parsed.where(~is_envelope | F.col("r.type").isin(*AUTHORIZATION_TYPES))
    flat = kept.select(
        F.col("value").alias("_line"),
        invalid_json.alias("_bad_json"),
        (is_envelope & F.col("r.data").isNull()).alias("_bad_envelope"),
        *[F.when(is_envelope, F.col(f"r.data.{f.name}")).otherwise(F.col(f"r.{f.name}")).alias(f.name) for f in schema],
    )
    return validate_records(flat, raw_line="_line", bad_json="_bad_json", bad_envelope="_bad_envelope")


def parse_kafka_log(text: DataFrame, keep: Sequence[str] = ()) -> DataFrame:
    """``value`` lines of kafka-authorizer.log → records, with ``kafka_log.KAFKA_LOG_PATTERN`` in the JVM; the
    ``keep`` columns are passed through."""
    from pyspark.sql import functions as F

    pattern = kafka_log.KAFKA_LOG_PATTERN
    value = F.col("value")
    # One regex evaluation per line (not one per group): the match is replaced by its groups, each after a
    # newline, and split. No group can hold a newline (every class in the pattern excludes it) and the matched
    # text holds none, so the replaced text differs from the line exactly when the line matches, and part ``i``
    # is group ``i`` ("" when it did not take part, as with ``regexp_extract``).
    groups = range(1, kafka_log.GROUP_RULE + 1)
    replaced = F.regexp_replace(value, pattern, "".join(f"\n${i}" for i in groups))
    lines = text.where(F.trim(value) != "").select(value, *keep, replaced.alias("_r"))
    parts = lines.select(
        value, *keep, (F.col("_r") != value).alias("_matches"), F.split(F.col("_r"), "\n").alias("_parts")
    )

    def group(index: int) -> Column:
        return F.coalesce(F.get(F.col("_parts"), index), F.lit(""))

    def optional(index: int) -> Column:
        extracted = group(index)
        return F.when(extracted != "", extracted)

    split = kafka_log.PASCAL_SPLIT
    fields = parts.select(
        value,
        *keep,
        F.col("_matches"),
        optional(kafka_log.GROUP_TIME).alias("_stamp"),
        group(kafka_log.GROUP_PRINCIPAL).alias("principal"),
        group(kafka_log.GROUP_HOST).alias("host"),
        optional(kafka_log.GROUP_API).alias("api"),
        F.upper(F.regexp_replace(group(kafka_log.GROUP_OPERATION), split, "$1_$2")).alias("operation"),
        F.upper(F.regexp_replace(group(kafka_log.GROUP_RESOURCE_TYPE), split, "$1_$2")).alias("resource_type"),
        F.coalesce(optional(kafka_log.GROUP_PATTERN_TYPE), F.lit("LITERAL")).alias("pattern_type"),
        group(kafka_log.GROUP_RESOURCE_NAME).alias("resource_name"),
        F.when(group(kafka_log.GROUP_DECISION) == "Allowed", "ALLOWED").otherwise("DENIED").alias("decision"),
        optional(kafka_log.GROUP_RULE).alias("rule"),
    )
    time = F.regexp_replace(F.col("_stamp"), ",", ".").try_cast("timestamp")
    reason = first_reason(
        [
            (~F.col("_matches"), kafka_log.NOT_AN_AUDIT_LINE),
            (time.isNull(), kafka_log.NO_TIMESTAMP),
            (~F.col("operation").isin(*OPERATION_NAMES), kafka_log.UNKNOWN_OPERATION),
            (~F.col("resource_type").isin(*RESOURCE_TYPE_NAMES), kafka_log.UNKNOWN_RESOURCE_TYPE),
            (F.col("pattern_type") != "LITERAL", kafka_log.NOT_LITERAL),
        ]
    )
    return finish(fields, time, reason, value, keep)

"""Reading a dataset ``kafkaguard audit collect`` wrote (``collect_plan.COLUMNS``) as audit records.

Such a dataset holds every category of event; the jobs take its authorization rows, and its rows that were not
envelopes (``error`` set by collect: they are reported as unparseable lines with their text). Other categories are
skipped silently, as the JSON-lines readers skip them. Each row stands for ``count`` requests (a usage-mode window
or a collapsed run of denials; null is 1); the rows come out with ``readers.RECORD_COLUMNS`` plus ``count`` and
``last_time``, which ``transforms.aggregate_raw`` honours when present.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaguard.audit.record import SCHEMA_VERSION
from kafkaguard.pipeline.collect_plan import AUTHORIZATION

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Columns only a collected dataset has (a Parquet file of plain records has none of them).
MARKERS = ("specversion", "kafka_offset", "category")
EXTRA_COLUMNS = ("count", "last_time")
#: The authorization record's version that carries count, last_time and enforced (issue 27's spec, section 2).
V2 = 2


def is_collected(df: DataFrame) -> bool:
    return all(name in df.columns for name in MARKERS)


def records(df: DataFrame) -> DataFrame:
    """Collected rows → records (``RECORD_COLUMNS`` + ``count`` + ``last_time``), validated as every reader does."""
    from pyspark.sql import functions as F

    from kafkaguard.pipeline.readers import RECORD_VALUES, validate_records

    envelope_error = F.col("error")
    # Version 2 (issue 27) only adds optional fields, and ``count``/``last_time`` are read here: a v2 record is
    # valid wherever v1 is, whatever SCHEMA_VERSION this build of the JSON reader has reached.
    version = F.col("record_version").cast("long")
    version = F.when(version == V2, F.lit(SCHEMA_VERSION).cast("long")).otherwise(version)
    rows = df.where((F.col("category") == AUTHORIZATION) | envelope_error.isNotNull()).select(
        version.alias("version"),
        F.col("time"),
        F.col("pattern_type"),
        *[F.col(name) for name in RECORD_VALUES],
        F.col("count").alias("_count"),
        F.col("last_time").alias("_last_time"),
        envelope_error.alias("_envelope_error"),
        F.col("raw").alias("_raw"),
    )
    checked = validate_records(rows, raw_line=None, keep=("_count", "_last_time", "_envelope_error", "_raw"))
    bad_envelope = F.col("_envelope_error").isNotNull()
    good = F.col("error").isNull() & ~bad_envelope
    return checked.select(
        *[c for c in checked.columns if c not in ("error", "line") and not c.startswith("_")],
        F.when(bad_envelope, F.col("_envelope_error")).otherwise(F.col("error")).alias("error"),
        F.when(bad_envelope, F.col("_raw")).otherwise(F.col("line")).alias("line"),
        # A bad row is one line; a good one stands for its count of requests.
        F.when(good, F.coalesce(F.col("_count").cast("long"), F.lit(1).cast("long")))
        .otherwise(F.lit(1).cast("long"))
        .alias("count"),
        F.when(good, F.coalesce(F.col("_last_time"), F.col("time"))).alias("last_time"),
    )

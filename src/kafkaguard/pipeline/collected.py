"""Reading a dataset ``kafkaguard audit collect`` wrote (``collect_plan.COLUMNS``) as audit records.

Such a dataset holds every category of event; the jobs take its authorization rows, and its rows that were not
envelopes (``error`` set by collect: they are reported as unparseable lines with their text). Other categories are
skipped silently, as the JSON-lines readers skip them. Each row stands for ``count`` requests (a usage-mode window
or a collapsed run of denials; null is 1); the rows come out with ``validation.RECORD_COLUMNS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaguard.audit.records.cloudevents import AUTHORIZATION
from kafkaguard.pipeline.validation import RECORD_VALUES, validate_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Columns only a collected dataset has (a Parquet file of plain records has none of them).
MARKERS = ("specversion", "kafka_offset", "category")
#: The authorization record's version 2 fields (issue 27's spec, section 2), columns of their own in the dataset.
V2_FIELDS = ("count", "last_time", "enforced")


def is_collected(df: DataFrame) -> bool:
    return all(name in df.columns for name in MARKERS)


def records(df: DataFrame) -> DataFrame:
    """Collected rows → records (``RECORD_COLUMNS``), validated as every reader does (version 2's ``count``,
    ``last_time`` and ``enforced`` too); a row collect could not read as an envelope is a bad line with its text."""
    from pyspark.sql import functions as F

    envelope_error = F.col("error")
    rows = df.where((F.col("category") == AUTHORIZATION) | envelope_error.isNotNull()).select(
        F.col("record_version").cast("long").alias("version"),
        F.col("time"),
        F.col("pattern_type"),
        *[F.col(name) for name in RECORD_VALUES],
        *[F.col(name) for name in V2_FIELDS],
        envelope_error.alias("_envelope_error"),
        F.col("raw").alias("_raw"),
    )
    checked = validate_records(rows, raw_line=None, keep=("_envelope_error", "_raw"))
    bad_envelope = F.col("_envelope_error").isNotNull()
    return checked.select(
        *[c for c in checked.columns if c not in ("error", "line") and not c.startswith("_")],
        F.when(bad_envelope, F.col("_envelope_error")).otherwise(F.col("error")).alias("error"),
        F.when(bad_envelope, F.col("_raw")).otherwise(F.col("line")).alias("line"),
    )

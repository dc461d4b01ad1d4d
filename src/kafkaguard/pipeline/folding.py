"""Folding: Kafka's authorizer log is aggregated as text first and parsed once per distinct line, not per line.

Audit logs repeat themselves: the same client makes the same request all day, so lines differ mostly in their
timestamp, and the regular expression that parses a kafka-authorizer.log line is the dearest thing per line
(SPARK-NOTES.md; ``docs/benchmarks.md``). So, for a line in Kafka's default ``[%d]`` log4j layout, the JVM

1. checks the layout of the timestamp with an anchored pattern on the first 25 characters only, reads its
   digits into one number (``yyyyMMddHHmmssSSS``) and checks that it is a real date and time by arithmetic;
2. cuts the timestamp off: the rest of the line (bytes) is the *key*;
3. groups by (key, hour) with the number of lines, of lines with an invalid timestamp, and the first/last time;
4. parses each group once, as the very line it came from with a fixed placeholder timestamp, with the same JVM
   parser as every other line (``readers.parse_kafka_log``).

Every result is the one per-line parsing gives: the placeholder is a valid timestamp of the same layout, and no
other part of a line's parse depends on the timestamp's text (the pattern's time group is digits only). A
line's own timestamp decides only its time, its hour and, if invalid, its reason (``no timestamp``, which comes
after ``not a Kafka authorizer audit line`` in the parser's order). Lines in any other layout are grouped whole
(identical lines only) and parsed as they are.

Folding pays at scale only: faster than parsing every line at 10M lines, slower at 1M (see
docs/benchmarks.md, "Figures from the code").
JSON lines are not folded: ``from_json`` per line is cheap enough that folding's own cost per line (the layout
check, the cut, a group-by on ~230-byte keys) ate the gain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaguard.audit.records import kafka_log
from kafkaguard.pipeline.deciding import KEY as ACCESS_KEY
from kafkaguard.pipeline.readers import parse_kafka_log
from kafkaguard.pipeline.transforms import per_tuple_counts

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


#: Kafka's default ``[%d]`` layout: the first 25 characters, anchored (the timestamp and its brackets).
HEAD = r"^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}\]$"
#: 1-based character positions and lengths of year, month, day, hour, minute, second, millisecond in ``HEAD``.
DIGITS = ((2, 4), (7, 2), (10, 2), (13, 2), (16, 2), (19, 2), (22, 3))
#: A head with a valid timestamp; a key is the line after its head, and a group is parsed as this + its key.
PLACEHOLDER = "[2000-01-01 00:00:00,000]"


def _div(column: str, divisor: int, modulo: int | None = None) -> Column:
    """Integer division of a long column (exact: no detour through doubles), optionally modulo."""
    from pyspark.sql import functions as F

    return F.expr(f"({column} div {divisor})" + (f" % {modulo}" if modulo else ""))


def _fields(column: str) -> tuple[Column, Column, Column, Column, Column, Column]:
    """Year, month, day, hour, minute and second of a ``yyyyMMddHHmmssSSS`` long column."""
    return (
        _div(column, 10**13),
        _div(column, 10**11, 100),
        _div(column, 10**9, 100),
        _div(column, 10**7, 100),
        _div(column, 10**5, 100),
        _div(column, 10**3, 100),
    )


def _valid(column: str) -> Column:
    """Whether ``yyyyMMddHHmmssSSS`` is a real date and time (integer arithmetic, no parsing per line)."""
    from pyspark.sql import functions as F

    year, month, day, hour, minute, second = _fields(column)
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = F.when(month == 2, F.when(leap, 29).otherwise(28)).when(month.isin(4, 6, 9, 11), 30).otherwise(31)
    return (
        (year >= 1)
        & (month >= 1)
        & (month <= 12)
        & (day >= 1)
        & (day <= days)
        & (hour < 24)
        & (minute < 60)
        & (second < 60)
    )


def _to_timestamp(column: str) -> Column:
    """``yyyyMMddHHmmssSSS`` (already valid) → a timestamp in the session's zone (UTC)."""
    from pyspark.sql import functions as F

    seconds = F.expr(f"cast({column} % 100000 as decimal(8,3)) / 1000")
    year, month, day, hour, minute, _ = (part.cast("int") for part in _fields(column))
    return F.make_timestamp(year, month, day, hour, minute, seconds)


def fold(text: DataFrame, keys: Sequence[str] = ("logged_decision",), hourly: bool = True) -> DataFrame:
    """``value`` lines → the rows of ``transforms.aggregate_raw`` (same columns, same meaning; ``hourly`` as
    there), from one parse per distinct (key, hour) instead of one per line."""
    from pyspark.sql import functions as F

    value = F.col("value")
    canonical = F.substring(value, 1, len(PLACEHOLDER)).rlike(HEAD)
    # The head pattern guarantees digits at these places: one long, yyyyMMddHHmmssSSS.
    digits = F.concat(*[F.substring(value, start, length) for start, length in DIGITS]).cast("long")
    raw = value.cast("binary")
    key = F.when(canonical, F.substring(raw, len(PLACEHOLDER) + 1, 1 << 30)).otherwise(raw)
    per_line = (
        text.where(F.trim(value) != "")
        .select(key.alias("_key"), canonical.alias("_canonical"), F.when(canonical, digits).alias("_digits"))
        .select("_key", "_canonical", F.when(_valid("_digits"), F.col("_digits")).alias("_stamp"))
        .select("*", _div("_stamp", 10**7).alias("_hour"))
    )
    folded = per_line.groupBy("_key", "_canonical", "_hour").agg(
        F.count(F.lit(1)).alias("_n"),
        F.count_if(F.col("_canonical") & F.col("_stamp").isNull()).alias("_bad_time"),
        F.min("_stamp").alias("_lo"),
        F.max("_stamp").alias("_hi"),
    )
    rebuilt = F.when(F.col("_canonical"), F.concat(F.lit(bytearray(PLACEHOLDER.encode())), F.col("_key"))).otherwise(
        F.col("_key")
    )
    passed = ["_canonical", "_hour", "_n", "_bad_time", "_lo", "_hi"]
    groups = folded.select(rebuilt.cast("string").alias("value"), *passed)
    return _rows(parse_kafka_log(groups, passed), keys, hourly)


def _rows(parsed: DataFrame, keys: Sequence[str], hourly: bool) -> DataFrame:
    """Parsed (key, hour) groups → per-tuple rows and per-hour rows, as ``transforms.aggregate_raw`` makes them."""
    from pyspark.sql import functions as F

    canonical, error = F.col("_canonical"), F.col("error")
    # Canonical groups: lines with a valid timestamp (time from the folded stamps) and lines without one.
    timed = F.when(canonical, F.col("_n") - F.col("_bad_time")).otherwise(F.col("_n"))
    first = F.when(canonical, _to_timestamp("_lo")).otherwise(F.col("time"))
    last = F.when(canonical, _to_timestamp("_hi")).otherwise(F.col("time"))
    # A line that is no audit line at all says so whatever its time; otherwise the invalid time comes first.
    untimed_error = F.when(error == kafka_log.NOT_AN_AUDIT_LINE, error).otherwise(F.lit(kafka_log.NO_TIMESTAMP))
    bucket = F.when(canonical, _to_timestamp("(_hour * 10000000)")).otherwise(F.date_trunc("hour", "time"))
    access = [F.when(error.isNull(), F.col(c)).alias(c) for c in ACCESS_KEY]
    decision = F.when(error.isNull(), F.col("decision"))
    parts = parsed.select(
        F.explode(
            F.array(
                F.struct(
                    *access,
                    decision.alias("logged_decision"),
                    error.alias("error"),
                    F.when(error.isNull(), bucket).alias("bucket"),
                    timed.alias("requests"),
                    F.when(error.isNull(), first).alias("first_seen"),
                    F.when(error.isNull(), last).alias("last_seen"),
                ),
                F.struct(
                    *[F.lit(None).cast("string").alias(c) for c in ACCESS_KEY],
                    F.lit(None).cast("string").alias("logged_decision"),
                    untimed_error.alias("error"),
                    F.lit(None).cast("timestamp").alias("bucket"),
                    F.when(canonical, F.col("_bad_time")).otherwise(0).alias("requests"),
                    F.lit(None).cast("timestamp").alias("first_seen"),
                    F.lit(None).cast("timestamp").alias("last_seen"),
                ),
            )
        ).alias("p")
    ).select("p.*")
    parts = parts.where(F.col("requests") > 0)
    per_tuple = per_tuple_counts(parts, keys, requests="requests", first="first_seen", last="last_seen")
    per_hour = (
        parts.where(F.col("error").isNull())
        .groupBy("bucket", "logged_decision")
        .agg(
            F.sum("requests").alias("requests"),
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
        )
    )
    columns = [*ACCESS_KEY, "logged_decision", "error", "bucket", "requests", "first_seen", "last_seen"]
    tuples = per_tuple.withColumn("bucket", F.lit(None).cast("timestamp")).select(
        *columns, F.lit(True).alias("per_tuple")
    )
    if not hourly:
        return per_tuple.withColumn("bucket", F.lit(None).cast("timestamp")).select(
            *columns, "allowed", F.lit(True).alias("per_tuple")
        )
    return tuples.unionByName(
        per_hour.select(
            *[F.lit(None).cast("string").alias(c) for c in ACCESS_KEY],
            "logged_decision",
            F.lit(None).cast("string").alias("error"),
            "bucket",
            "requests",
            "first_seen",
            "last_seen",
            F.lit(False).alias("per_tuple"),
        )
    )

"""Folding gives exactly what parsing every line gives: per-tuple rows and the chart over time, for lines in
Kafka's default layout and others, valid and invalid timestamps (leap days, second 60), hostile names."""

from __future__ import annotations

import pytest

from kafkaguard.audit.records import kafka_log
from kafkaguard.pipeline import folding, readers, transforms
from tests.pipeline.test_readers import kafka_log_lines

pytestmark = pytest.mark.spark

_LINE = (
    "[{stamp}] INFO Principal = User:a is Denied operation = {op} from host = h on resource = Topic:LITERAL:t "
    "(kafka.authorizer.logger)"
)
KAFKA_EXTRA = [
    _LINE.format(stamp="2025-02-29 10:00:00,000", op="READ"),  # no 29 February in 2025
    _LINE.format(stamp="2024-02-29 10:00:00,000", op="READ"),
    _LINE.format(stamp="2024-02-29 10:00:00,000", op="READ"),  # the same line twice
    _LINE.format(stamp="2024-02-29 10:59:60,000", op="READ"),  # second 60
    _LINE.format(stamp="2024-02-29 11:00:00,000", op="FLY"),  # valid time, unknown operation
    _LINE.format(stamp="2024-02-30 11:00:00,000", op="FLY"),  # both: the time's reason comes first
    _LINE.format(stamp="2024-12-31 23:59:59,999", op="WRITE"),
    "[2024-02-28 11:00:00,000] garbage",
    "[2024-02-28 11:00:00,000]",
    "[2024-02-28 11:00:00,000]2 INFO Principal = User:a is Allowed operation = READ from host = h on resource = "
    "Topic:LITERAL:t",
    # Not the canonical layout: parsed whole.
    "2024-02-28T11:00:00.5 INFO Principal = User:a is Allowed operation = READ from host = h on resource = "
    "Topic:LITERAL:t",
]


def _rows(df) -> list[tuple[tuple[str, str], ...]]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.asDict().items())) for row in df.collect())


@pytest.mark.parametrize("keys", [("logged_decision",), ()])
def test_folding_equals_parsing_every_line(spark, keys: tuple[str, ...]) -> None:
    """(``hourly=False``, simulate's form, gives the per-tuple rows alone, with the requests logged ALLOWED.)"""
    text = spark.createDataFrame([(line,) for line in (kafka_log_lines() + KAFKA_EXTRA) * 3], "value string")
    every_line = transforms.aggregate_raw(readers.parse_kafka_log(text), keys=keys)
    folded = folding.fold(text, keys=keys)
    tuples_only = folding.fold(text, keys=keys, hourly=False)
    assert _rows(tuples_only.drop("allowed")) == _rows(every_line.where("per_tuple"))
    assert _rows(tuples_only) == _rows(transforms.aggregate_raw(readers.parse_kafka_log(text), keys=keys, hourly=False))
    assert tuples_only.where("allowed > 0").count() > 0
    assert _rows(folded.where("per_tuple")) == _rows(every_line.where("per_tuple"))
    assert _rows(transforms.over_time(folded)) == _rows(transforms.over_time(every_line))
    # Each hour's first and last request too (the window a job reports).
    hours = "NOT per_tuple AND bucket IS NOT NULL"
    assert _rows(transforms.small_rows(folded).where(hours)) == _rows(transforms.small_rows(every_line).where(hours))
    errors = {row["error"] for row in folded.where("per_tuple").collect()}
    assert {None, kafka_log.NO_TIMESTAMP} <= errors  # both good and time-invalid lines were in the test

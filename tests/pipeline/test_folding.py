"""Folding gives exactly what parsing every line gives: per-tuple rows and the chart over time, for both text
formats, canonical and other layouts, valid and invalid timestamps (leap days, second 60), hostile names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from kafkaguard.pipeline import folding, readers, transforms
from kafkaguard.pipeline.jobs.common import JobRun, read_and_reduce
from tests.pipeline.test_readers import json_lines, kafka_log_lines

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


def _json_extra() -> list[str]:
    base = json.loads(json_lines()[0])

    def line(**changes: object) -> str:
        return json.dumps({**base, **changes}, separators=(",", ":"), ensure_ascii=False)

    return [
        line(time="2025-02-29T00:00:00.000Z"),
        line(time="2024-02-29T00:00:00.000Z"),
        line(time="2024-02-29T00:00:00.000Z", operation="FLY"),
        line(time="2024-02-31T00:00:00.000Z", operation="FLY"),
        line(time="2024-02-31T00:00:00.000Z", principal=None),  # missing principal comes before the time
        line(time="2024-02-29T00:00:00+01:00"),  # not the canonical layout
        '{"version":1,"time":"2024-02-28T00:00:00.000Z"',
        '{"version":1,"time":"2024-02-28T00:00:00.000Z"}',
    ]


def _rows(df) -> list[tuple[tuple[str, str], ...]]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.asDict().items())) for row in df.collect())


@pytest.mark.parametrize("fmt", ["kafka-log", "json"])
@pytest.mark.parametrize("keys", [("logged_decision",), ()])
def test_folding_equals_parsing_every_line(spark, fmt: str, keys: tuple[str, ...]) -> None:
    if fmt == "kafka-log":
        lines, parse, layout = kafka_log_lines() + KAFKA_EXTRA, readers.parse_kafka_log, folding.kafka_layout()
    else:
        lines, parse, layout = json_lines() + _json_extra(), readers.parse_json_lines, folding.json_layout()
    text = spark.createDataFrame([(line,) for line in lines * 3], "value string")
    every_line = transforms.aggregate_raw(parse(text), keys=keys)
    folded = folding.fold(text, layout, keys=keys)
    assert _rows(folded.where("per_tuple")) == _rows(every_line.where("per_tuple"))
    assert _rows(transforms.over_time(folded)) == _rows(transforms.over_time(every_line))
    errors = {row["error"] for row in folded.where("per_tuple").collect()}
    assert {None, layout.time_reason} <= errors  # both good and time-invalid lines were in the test


def test_a_repeated_time_key_is_read_line_by_line(spark, tmp_path: Path) -> None:
    """JSON readers take the last of repeated keys: folding cannot cut the time off such a line, says so, and
    the job reads the log line by line instead."""
    base = json.loads(json_lines()[0])
    first = json.dumps({**base, "time": "2024-02-29T00:00:00.000Z"}, separators=(",", ":"))
    repeated = first[:-1] + ',"time":"2024-03-01T10:00:00.000Z"}'
    log = tmp_path / "audit.jsonl"
    log.write_text("\n".join([repeated, first, first]) + "\n")
    text = spark.read.text(str(log))
    marked = {row["error"] for row in folding.fold(text, folding.json_layout()).collect()}
    assert folding.AMBIGUOUS in marked

    with open(tmp_path / "progress", "w") as progress:
        run = JobRun("test", str(tmp_path / "out"), console=Console(file=progress))
        reduced = read_and_reduce(spark, run, [str(log)], "kafkaguard")
    good = [(r["requests"], r["first_seen"].isoformat(), r["last_seen"].isoformat()) for r in reduced.good.collect()]
    assert reduced.bad_lines == 0
    assert good == [(3, "2024-02-29T00:00:00", "2024-03-01T10:00:00")]  # the repeated line's time is its last
    reduced.aggregated.unpersist()

"""The Spark jobs read a dataset ``kafkaguard audit collect`` wrote as they read JSON lines: ``audit usage`` on
the collected Parquet gives the same tables and counts as on the equivalent JSON-lines file (each collected
record with ``count`` c written there as c lines: the first at ``time``, the others at ``last_time``); other
categories are skipped, and lines that were not envelopes are reported as unparseable with the same reason."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kafkaguard.pipeline import collect_files
from kafkaguard.pipeline.acls import acl_set_from_text
from kafkaguard.pipeline.collect_plan import RangePlanner, to_row
from kafkaguard.pipeline.jobs import usage
from kafkaguard.pipeline.readers import read_records
from tests.audit.records.test_record import T
from tests.pipeline.test_jobs_cli import CURRENT

pytestmark = pytest.mark.spark

#: (principal, operation, topic, decision, count)
TRAFFIC = [
    ("User:alice", "WRITE", "orders-eu", "ALLOWED", 5),
    ("User:alice", "READ", "orders-eu", "ALLOWED", 1),
    ("User:bob", "READ", "orders-us", "ALLOWED", 3),
    ("User:bob", "READ", "payments", "DENIED", 2),
    ("User:dave", "READ", "old-topic", "ALLOWED", None),  # no count: one request
    ("User:eve", "DESCRIBE", "orders-eu", "ALLOWED", 4),
]


def stamp(when: Any) -> str:
    return str(when.isoformat().replace("+00:00", "Z"))


def events() -> tuple[list[bytes], list[str]]:
    """Kafka values (envelopes of several categories, a few bad ones) and the equivalent JSON lines."""
    values: list[bytes] = []
    lines: list[str] = []
    for i, (principal, op, topic, decision, count) in enumerate(TRAFFIC * 3):
        first = T + timedelta(hours=i)
        last = first + timedelta(minutes=30) if (count or 1) > 1 else first
        record = {"version": 1, "time": stamp(first), "principal": principal, "host": "10.0.0.1", "api": "Fetch",
                  "operation": op, "resource_type": "TOPIC", "pattern_type": "LITERAL", "resource_name": topic,
                  "decision": decision, "rule": None}  # fmt: skip
        data = dict(record, version=2) | ({"count": count, "last_time": stamp(last)} if count else {})
        values.append(json.dumps({"specversion": "1.0", "id": f"e{i}", "source": "kafkaguard://n",
                                  "type": "io.kafkaguard.authorization.v2", "time": stamp(first), "subject": "x",
                                  "data": data}).encode())  # fmt: skip
        lines.append(json.dumps(record))
        lines += [json.dumps(dict(record, time=stamp(last)))] * ((count or 1) - 1)
        management = {"version": 1, "action": "acl.created", "result": "SUCCESS"}
        values.append(json.dumps({"specversion": "1.0", "id": f"m{i}", "source": "kafkaguard://n",
                                  "type": "io.kafkaguard.management.v1", "time": stamp(first),
                                  "data": management}).encode())  # fmt: skip
    values.append(b"garbage that is not JSON")
    lines.append("garbage that is not JSON")
    bad_operation = {"version": 1, "time": stamp(T), "principal": "User:x", "host": "h", "api": None,
                     "operation": "FLY", "resource_type": "TOPIC", "pattern_type": "LITERAL", "resource_name": "t",
                     "decision": "ALLOWED", "rule": None}  # fmt: skip
    values.append(json.dumps({"specversion": "1.0", "id": "bad", "source": "kafkaguard://n",
                              "type": "io.kafkaguard.authorization.v2", "time": stamp(T),
                              "data": bad_operation}).encode())  # fmt: skip
    lines.append(json.dumps(bad_operation))
    return values, lines


def collected_dataset(root: Path, values: list[bytes]) -> Path:
    dataset = collect_files.open_dataset(str(root))
    planner = RangePlanner(7, 60)
    files = [f for offset, v in enumerate(values) for f in planner.add(to_row(v, 0, offset, None), 0)]
    for f in [*files, *planner.drain()]:
        collect_files.write_file(dataset, "audit", f)
    return root


def test_usage_on_a_collected_dataset_equals_usage_on_json_lines(spark, tmp_path: Path) -> None:
    values, lines = events()
    dataset = collected_dataset(tmp_path / "collected", values)
    assert not list(dataset.glob("*.parquet"))  # the files are in date= directories only
    jsonl = tmp_path / "audit.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    acls = acl_set_from_text(json.dumps({"acls": CURRENT}), "acls.json", "current", "", False)

    results = {name: usage.run(spark, [str(path)], acls, str(tmp_path / f"out-{name}"))
               for name, path in (("parquet", dataset), ("json", jsonl))}  # fmt: skip
    requests = sum(count or 1 for *_, count in TRAFFIC) * 3
    for result in results.values():
        assert (result.summary["records"], result.summary["unparseable_lines"]) == (requests, 2)
    for table in ("acl_usage", "acl_hits"):
        got = {name: sorted(map(tuple, spark.read.parquet(str(tmp_path / f"out-{name}" / table)).collect()))
               for name in results}  # fmt: skip
        assert got["parquet"] == got["json"] and got["parquet"], table


def test_bad_lines_keep_their_reason_and_text(spark, tmp_path: Path) -> None:
    values, _ = events()
    dataset = collected_dataset(tmp_path / "collected", values)
    bad = {(r.error, r.line) for r in read_records(spark, [str(dataset)]).where("error is not null").collect()}
    assert ("not valid JSON", "garbage that is not JSON") in bad
    assert {reason for reason, _ in bad} == {"not valid JSON", "unknown operation"}

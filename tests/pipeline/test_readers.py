"""The JVM readers agree with the Python parsers of ``kafkaguard.audit``, line by line."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kafkaguard.audit.records import (
    NOT_A_RECORD,
    AuditRecord,
    LineError,
    from_json_line,
    parse_kafka_log_line,
    to_dict,
    to_json_line,
)
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.readers import parse_json_lines, parse_kafka_log, read_records
from tests.audit.records.kafka_lines import kafka_line

pytestmark = pytest.mark.spark

T = datetime(2025, 3, 14, 9, 26, 53, 104000, tzinfo=UTC)
NAMES = ["payments", "a:b:c", "x for request = Fetch with resourceRefCount = 1", "", "ünï code", "LITERAL:x"]
PRINCIPALS = ["User:orders-svc", "User:CN=svc,OU=eng, O=Acme", "User:CN=this is Denied, O=x", "Group:ops:eu"]


def records() -> list[AuditRecord]:
    out = []
    for i, name in enumerate(NAMES):
        for j, principal in enumerate(PRINCIPALS):
            out.append(
                AuditRecord(
                    time=T.replace(second=i, microsecond=j * 1000),
                    principal=principal,
                    host="0:0:0:0:0:0:0:1" if j % 2 else "10.20.3.17",
                    api=None,
                    operation=[AclOperation.DESCRIBE_CONFIGS, AclOperation.WRITE, AclOperation.IDEMPOTENT_WRITE][j % 3],
                    resource_type=[ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID, ResourceType.GROUP][i % 3],
                    resource_name=name,
                    decision=AuthorizationResult.ALLOWED if (i + j) % 2 else AuthorizationResult.DENIED,
                    rule=None,
                )
            )
    return out


GARBAGE = [
    "garbage",
    "[2025-03-14 09:26:53,104] INFO [Controller id=1] Processing (kafka.controller)",
    "Principal = User:x is Denied operation = WRITE from host = h on resource = Topic:LITERAL:t",
    "[2025-13-14 09:26:53,104] INFO Principal = User:x is Denied operation = WRITE from host = h on resource = "
    "Topic:LITERAL:t (kafka.authorizer.logger)",
    "[2025-03-14 09:26:53,104] INFO Principal = User:x is Denied operation = FLY from host = h on resource = "
    "Topic:LITERAL:t (kafka.authorizer.logger)",
    "[2025-03-14 09:26:53,104] INFO Principal = User:x is Denied operation = READ from host = h on resource = "
    "Widget:LITERAL:t (kafka.authorizer.logger)",
    "[2025-03-14 09:26:53,104] INFO Principal = User:x is Denied operation = READ from host = h on resource = "
    "Topic:PREFIXED:t (kafka.authorizer.logger)",
]


def kafka_log_lines() -> list[str]:
    lines = []
    for i, record in enumerate(records()):
        form = ["kraft", "acl", "simple", "ancient"][i % 4]
        if form == "ancient" and record.resource_name.startswith("LITERAL:"):
            form = "simple"  # "Topic:LITERAL:x" in the oldest form is ambiguous by construction
        line = kafka_line(record, form, request="Fetch")
        if form == "kraft" and i % 8 == 0:
            rule = (
                "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=p, patternType=PREFIXED, "
                "principal=User:*, host=*, operation=ALL, permissionType=DENY))"
            )
            line = line.replace("based on rule DefaultDeny", f"based on rule {rule}")
        lines.append(line)
    return lines + GARBAGE


def expected_rows(parsed: list[AuditRecord | LineError | object | None]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for result in parsed:
        if result is None or result is NOT_A_RECORD:
            continue
        assert isinstance(result, AuditRecord | LineError)
        if isinstance(result, LineError):
            rows.append((None, None, None, None, None, None, None, None, 1, None, None, result.reason, result.line))
        else:
            d = to_dict(result)
            rows.append(
                (
                    result.time,
                    d["principal"],
                    d["host"],
                    d["api"],
                    d["operation"],
                    d["resource_type"],
                    d["resource_name"],
                    d["decision"],
                    result.count,
                    result.last,
                    result.enforced,
                    None,
                    None,
                )
            )
    return rows


def actual_rows(df) -> list[tuple[object, ...]]:
    cols = [
        "time",
        "principal",
        "host",
        "api",
        "operation",
        "resource_type",
        "resource_name",
        "decision",
        "count",
        "last_time",
        "enforced",
        "error",
        "line",
    ]
    return [tuple(r[c] for c in cols) for r in df.collect()]


def sort_key(row):
    return tuple("" if v is None else str(v) for v in row)


def test_kafka_log_in_the_jvm_equals_the_python_parser(spark) -> None:
    lines = kafka_log_lines()
    df = parse_kafka_log(spark.createDataFrame([(line,) for line in lines], "value string"))
    expected = expected_rows([parse_kafka_log_line(line) for line in lines])
    got = [
        tuple(v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v for v in row)
        for row in actual_rows(df)
    ]
    assert sorted(got, key=sort_key) == sorted(
        [
            tuple(v.replace(tzinfo=None).replace(tzinfo=UTC) if isinstance(v, datetime) else v for v in row)
            for row in expected
        ],
        key=sort_key,
    )
    rules = {r["rule"] for r in df.collect()}
    assert "DefaultDeny" in rules
    assert any(rule and rule.startswith("MatchingAcl(") and rule.endswith("DENY))") for rule in rules)


def json_lines() -> list[str]:
    good = [to_json_line(r) for r in records()]
    base = to_dict(records()[0])
    bad = [
        "{",
        json.dumps({**base, "version": 3}),
        json.dumps({**base, "principal": None}),
        json.dumps({**base, "time": "soon"}),
        json.dumps({**base, "operation": "ANY"}),
        json.dumps({**base, "resource_type": "WIDGET"}),
        json.dumps({**base, "pattern_type": "PREFIXED"}),
        json.dumps({**base, "decision": "MAYBE"}),
        json.dumps({k: v for k, v in base.items() if k != "host"}),
        *[json.dumps({**base, **change}) for change in BAD_V2],
        envelope("io.kafkaguard.authorization.v2", None),
        envelope("io.kafkaguard.authorization.v2", {**base, "operation": "ANY"}),
        envelope("io.kafkaguard.shadow.v1", {**base, "count": 0}),
    ]
    v2 = [
        json.dumps({**base, "version": 1}),
        json.dumps({**base, "count": 12, "last_time": "2025-03-14T09:27:50.001Z"}),
        json.dumps({**base, "count": None, "last_time": None, "enforced": None}),
        json.dumps({**base, "count": 3, "enforced": False}),
        json.dumps({**base, "enforced": True}),
        envelope("io.kafkaguard.authorization.v2", {**base, "count": 5, "last_time": "2025-03-14T09:27:00Z"}),
        envelope("io.kafkaguard.shadow.v1", {**base, "shadow_decision": "ALLOWED", "shadow_rule": "DefaultAllow"}),
        envelope("io.kafkaguard.management.v1", {"action": "acl.created"}),
        envelope("io.kafkaguard.authentication.v1", {"result": "FAILURE"}),
    ]
    return good + v2 + bad + ["", "   "]


BAD_V2: list[dict[str, object]] = [
    {"count": 0},
    {"count": -3},
    {"count": 2.5},
    {"count": "2"},
    {"count": True},
    {"count": 2**63},
    {"last_time": "later"},
    {"last_time": "2025-03-14T09:26:53.103Z"},
    {"enforced": "false"},
    {"enforced": 0},
]


def envelope(type_: str, data: object) -> str:
    return json.dumps(
        {"specversion": "1.0", "id": "1", "source": "kafkaguard://n", "type": type_, "time": "2025-03-14T09:26:53Z",
         "subject": "TOPIC:x", "data": data}
    )  # fmt: skip


def test_json_lines_in_the_jvm_equal_the_python_parser(spark) -> None:
    lines = json_lines()
    df = parse_json_lines(spark.createDataFrame([(line,) for line in lines], "value string"))
    expected = []
    for line in lines:
        if not line.strip():
            continue
        result = from_json_line(line)
        expected.extend(expected_rows([result]))
    got = [tuple(v.replace(tzinfo=UTC) if isinstance(v, datetime) else v for v in row) for row in actual_rows(df)]
    assert sorted(got, key=sort_key) == sorted(expected, key=sort_key)


def test_directories_gzip_and_parquet(spark, tmp_path: Path) -> None:
    lines = [to_json_line(r) for r in records()]
    (tmp_path / "logs" / "sub").mkdir(parents=True)
    (tmp_path / "logs" / "a.jsonl").write_text("\n".join(lines[:10]) + "\n")
    with gzip.open(tmp_path / "logs" / "sub" / "b.jsonl.gz", "wt") as f:
        f.write("\n".join(lines[10:]) + "\n")
    df = read_records(spark, [str(tmp_path / "logs")], "kafkaguard")
    assert df.where("error IS NULL").count() == len(lines)
    parquet = str(tmp_path / "records.parquet")
    from pyspark.sql import functions as F

    good = df.where("error IS NULL").drop("error", "line")
    good.withColumn("version", F.lit(1)).withColumn("pattern_type", F.lit("LITERAL")).write.parquet(parquet)
    again = read_records(spark, [parquet], "kafkaguard")
    assert again.where("error IS NULL").count() == len(lines)


def test_missing_path_and_unknown_format(spark, tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="does not exist"):
        read_records(spark, [str(tmp_path / "nope.log")], "kafkaguard")
    with pytest.raises(PipelineError, match="unknown --format"):
        read_records(spark, [str(tmp_path)], "csv")

"""Usage-mode logs (folded records with a count) read exactly: ``audit usage``, ``recommend`` and ``simulate`` give
on the folded log what they give on the individual records it folds; a log without any allowed decision is
refused with a clear message instead of reporting every ACL unused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.audit.records import to_dict, to_json_line
from kafkaguard.audit.records.usage import UsageAggregator
from kafkaguard.cli.main import app
from kafkaguard.model import AuthorizationResult
from kafkaguard.model.json_value import JsonObject
from tests.pipeline.test_jobs_cli import CURRENT, PROPOSED, records

pytestmark = pytest.mark.spark


def envelope(data: JsonObject) -> str:
    return json.dumps(
        {"specversion": "1.0", "id": "x", "source": "kafkaguard://n", "type": "io.kafkaguard.authorization.v2",
         "time": data["time"], "subject": f"TOPIC:{data['resource_name']}", "data": data}
    )  # fmt: skip


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("usage-records")
    individual = records()
    (root / "all.jsonl").write_text("".join(to_json_line(r) + "\n" for r in individual))
    # Folded as a usage-mode proxy folds them (one hour windows: the traffic is one record per 10 minutes), then
    # written half as flat lines, half as CloudEvents envelopes, with management events between them.
    usage = UsageAggregator(window_seconds=3600)
    folded = [*usage.add(sorted(individual, key=lambda r: r.time)), *usage.drain()]
    assert len(folded) < len(individual) / 3 and max(r.count for r in folded) > 1
    lines = []
    for i, record in enumerate(folded):
        lines.append(to_json_line(record) if i % 2 else envelope(to_dict(record)))
        if i % 5 == 0:
            lines.append(json.dumps({"specversion": "1.0", "type": "io.kafkaguard.management.v1", "data": {}}))
    (root / "usage.jsonl").write_text("\n".join(lines) + "\n")
    denied = [r for r in individual if r.decision is AuthorizationResult.DENIED]
    (root / "denied.jsonl").write_text("".join(to_json_line(r) + "\n" for r in denied))
    (root / "current.json").write_text(json.dumps({"acls": CURRENT}))
    (root / "proposed.json").write_text(json.dumps({"acls": PROPOSED}))
    return root


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit", *args])
    return result.exit_code, result.output


def table(
    spark, path: Path, key: tuple[str, ...], columns: tuple[str, ...]
) -> dict[tuple[object, ...], tuple[object, ...]]:
    return {tuple(r[k] for k in key): tuple(r[c] for c in columns) for r in spark.read.parquet(str(path)).collect()}


def test_usage_counts_a_folded_record_as_its_requests(spark, logs: Path) -> None:
    tables = {}
    for name in ("all", "usage"):
        out = logs / f"usage-{name}"
        code, output = run("usage", "--log", str(logs / f"{name}.jsonl"), "--acls", str(logs / "current.json"),
                           "--out", str(out))  # fmt: skip
        assert code == 0, output
        assert re.search(r"unparseable_lines\s+0\n", output), output  # management events are skipped, not bad
        columns = ("matched_requests", "decisive_requests", "users", "first_seen", "last_seen", "status")
        tables[name] = (
            table(spark, out / "acl_usage", ("id",), columns),
            table(spark, out / "top_denied_principals", ("principal",), ("requests",)),
        )
    assert tables["usage"] == tables["all"]
    usage, _ = tables["usage"]
    assert usage[("c1",)][:2] == (110, 110)  # as tests/pipeline/test_jobs_cli.py counts from individual records


def test_simulate_and_recommend_read_folded_records_exactly(spark, logs: Path) -> None:
    flips = {}
    for name in ("all", "usage"):
        out = logs / f"simulate-{name}"
        code, output = run("simulate", "--log", str(logs / f"{name}.jsonl"), "--current", str(logs / "current.json"),
                           "--proposed", str(logs / "proposed.json"), "--out", str(out))  # fmt: skip
        assert code == 0, output
        key = ("principal", "operation", "resource_name")
        flips[name] = table(spark, out / "flips", key, ("requests", "first_seen", "last_seen", "proposed_decision"))
        out = logs / f"recommend-{name}"
        code, output = run("recommend", "--log", str(logs / f"{name}.jsonl"), "--out", str(out))
        assert code == 0, output
        flips[name + "-acls"] = json.loads((out / "acls.json").read_text())
    assert flips["usage"] == flips["all"]
    assert flips["usage"][("User:bob", "READ", "orders-us")][0] == 50
    assert flips["usage-acls"] == flips["all-acls"]


@pytest.mark.parametrize("job", ["usage", "recommend", "simulate"])
def test_a_log_without_allowed_decisions_is_refused(spark, logs: Path, job: str) -> None:
    acls = {
        "usage": ["--acls", str(logs / "current.json")],
        "recommend": [],
        "simulate": ["--current", str(logs / "current.json"), "--proposed", str(logs / "proposed.json")],
    }[job]
    out = logs / f"refused-{job}"
    code, output = run(job, "--log", str(logs / "denied.jsonl"), *acls, "--out", str(out))
    assert code == 2, output
    assert "the log holds no allowed decisions (23 records, none ALLOWED)" in output
    assert "audit_mode to usage" in output and "or all" in output
    assert not (out / "report.html").exists()

"""Incremental ``audit usage --state DIR``: day by day equals one full run; nothing is read twice; a changed file
is refused; ``--unused-for`` lists exactly the ACLs no request matched in the window."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from kafkaguard.audit.records import AuditRecord, to_json_line
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.jobs.entry import main
from kafkaguard.pipeline.jobs.usage_state import LogFile, parse_window, plan
from tests.audit.records.test_record import T
from tests.pipeline.test_jobs_cli import CURRENT

pytestmark = pytest.mark.spark

#: day → (principal, operation, topic, requests); CURRENT's ACLs: c1 alice ALL orders*, c2 User:* READ orders-*,
#: c3 DENY bob READ payments, c4 dave READ old-topic, c5 alice READ orders-eu, c6 bob READ payments.
DAYS = {
    0: [("User:dave", "READ", "old-topic", 3), ("User:alice", "WRITE", "orders-eu", 5)],
    40: [("User:bob", "READ", "orders-us", 7), ("User:alice", "READ", "orders-eu", 2)],
    120: [("User:bob", "READ", "payments", 4), ("User:alice", "WRITE", "orders-eu", 1)],
}


def day_file(root: Path, day: int) -> Path:
    lines = []
    for principal, op, topic, n in DAYS[day]:
        for k in range(n):
            record = AuditRecord(
                time=T + timedelta(days=day, minutes=k),
                principal=principal,
                host="10.0.0.1",
                api="Fetch",
                operation=AclOperation[op],
                resource_type=ResourceType.TOPIC,
                resource_name=topic,
                decision=AuthorizationResult.ALLOWED,
                rule=None,
            )
            lines.append(to_json_line(record))
    path = root / "logs" / f"audit-{day:03d}.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def usage(root: Path, out: str, *extra: str) -> int:
    acls = root / "acls.json"
    if not acls.exists():
        acls.write_text(json.dumps({"acls": CURRENT}))
    return main(["usage", "--log", str(root / "logs"), "--acls", str(acls), "--out", str(root / out), *extra])


def table(spark, path: Path, columns: tuple[str, ...]) -> list[tuple[object, ...]]:
    return sorted(tuple(row[c] for c in columns) for row in spark.read.parquet(str(path)).collect())


USAGE = ("id", "matched_requests", "decisive_requests", "users", "first_seen", "last_seen", "status")
HITS = ("principal", "resource_name", "operation", "user", "matched_requests", "decisive_requests", "last_seen")


def test_day_by_day_equals_one_full_run(spark, tmp_path: Path, capsys) -> None:
    state = str(tmp_path / "state")
    for i, day in enumerate(sorted(DAYS)):
        day_file(tmp_path, day)
        assert usage(tmp_path, f"day-{i}", "--state", state) == 0
        printed = capsys.readouterr().out
        assert [
            line.split() for line in printed.splitlines() if line.split()[:1] in (["new_files"], ["files_seen_before"])
        ] == [
            ["new_files", "1"],
            ["files_seen_before", str(i)],
        ]
    assert usage(tmp_path, "full") == 0
    assert table(spark, tmp_path / "day-2" / "acl_usage", USAGE) == table(spark, tmp_path / "full" / "acl_usage", USAGE)
    assert table(spark, tmp_path / "day-2" / "acl_hits", HITS) == table(spark, tmp_path / "full" / "acl_hits", HITS)
    statuses = {row[0]: row[1] for row in table(spark, tmp_path / "full" / "acl_usage", ("id", "status"))}
    assert statuses == {"c1": "USED", "c2": "USED", "c3": "USED", "c4": "USED", "c5": "SHADOWED", "c6": "SHADOWED"}

    # Nothing new: nothing is read, the totals stay.
    capsys.readouterr()
    assert usage(tmp_path, "again", "--state", state) == 0
    printed = capsys.readouterr().out
    assert [line.split() for line in printed.splitlines() if line.split()[:1] == ["new_files"]] == [["new_files", "0"]]
    assert table(spark, tmp_path / "again" / "acl_usage", USAGE) == table(spark, tmp_path / "full" / "acl_usage", USAGE)


def test_a_changed_file_is_refused_until_rebuilt(spark, tmp_path: Path, capsys) -> None:
    state = str(tmp_path / "state")
    first = day_file(tmp_path, 0)
    assert usage(tmp_path, "one", "--state", state) == 0
    day_file(tmp_path, 40)
    first.write_text(first.read_text() + first.read_text().splitlines()[0] + "\n")  # grew: a line appended
    capsys.readouterr()
    assert usage(tmp_path, "two", "--state", state) == 2
    err = capsys.readouterr().err
    assert "changed since they were processed" in err and "--rebuild" in err and "Traceback" not in err
    assert usage(tmp_path, "rebuilt", "--state", state, "--rebuild") == 0
    assert usage(tmp_path, "full") == 0
    assert table(spark, tmp_path / "rebuilt" / "acl_usage", USAGE) == table(
        spark, tmp_path / "full" / "acl_usage", USAGE
    )


def test_unused_for_lists_the_acls_no_request_matched_in_the_window(spark, tmp_path: Path) -> None:
    for day in DAYS:
        day_file(tmp_path, day)
    # The window ends with the newest request (day 120): 90 days back is day 30. dave's ACL (c4) was last matched on
    # day 0; c1, c2, c3, c5 and c6 on days 40 or 120.
    assert usage(tmp_path, "out", "--state", str(tmp_path / "state"), "--unused-for", "90d") == 0
    assert [r.id for r in spark.read.parquet(str(tmp_path / "out" / "unused")).collect()] == ["c4"]
    assert usage(tmp_path, "wide", "--unused-for", "200d") == 0
    assert spark.read.parquet(str(tmp_path / "wide" / "unused")).count() == 0
    assert usage(tmp_path, "narrow", "--unused-for", "1h") == 0
    unused = {r.id for r in spark.read.parquet(str(tmp_path / "narrow" / "unused")).collect()}
    assert unused == {"c2", "c4", "c5"}  # day 120 saw only bob's READ payments (c3, c6) and alice's WRITE (c1)
    assert "Unused for 1h" in (tmp_path / "narrow" / "report.html").read_text()


def test_bad_flags_are_one_clear_error(tmp_path: Path, capsys) -> None:
    day_file(tmp_path, 0)
    for extra, message in (
        (["--unused-for", "90x"], "--unused-for must be a number of days or hours"),
        (["--unused-for", "0d"], "--unused-for must be"),
        (["--rebuild"], "--rebuild needs --state DIR"),
        (["--state", "hdfs:///kafkaguard/state"], "--state must be a local directory"),
    ):
        assert usage(tmp_path, "x", *extra) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_plan_and_window_without_spark() -> None:
    a, b = LogFile("/l/a", 10, 1), LogFile("/l/b", 20, 2)
    assert plan([a, b], [a]).new == [b]
    assert plan([a, b], [a, b]).new == []
    with pytest.raises(PipelineError, match="changed since"):
        plan([LogFile("/l/a", 11, 1)], [a])
    assert parse_window("90d") == timedelta(days=90) and parse_window("36h") == timedelta(hours=36)

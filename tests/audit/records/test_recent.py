"""``audit.records.recent``: the listed decisions of a log's tail, read backwards within a byte budget — the kinds, the
edges of the window (a line cut by it, the writer's unfinished last line, lines longer than a chunk), the backup, the
order; the console's ``/api/denials`` over a real server is ``tests/console/test_api_denials.py``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kafkaguard.audit.records.cloudevents import AUTHORIZATION, MANAGEMENT, envelope, to_json
from kafkaguard.audit.records.recent import CHUNK_BYTES, decision_of, recent_decisions
from kafkaguard.audit.records.record import AuditRecord, to_dict, to_json_line
from kafkaguard.audit.records.shadow import shadow_event
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType

START = datetime(2026, 3, 1, tzinfo=UTC)


def record(name: str, decision: str = "DENIED", *, seconds: int = 0, **fields: object) -> AuditRecord:
    values: dict[str, object] = {
        "time": START + timedelta(seconds=seconds),
        "principal": "User:ann",
        "host": "10.0.0.1",
        "api": "Fetch",
        "operation": AclOperation.READ,
        "resource_type": ResourceType.TOPIC,
        "resource_name": name,
        "decision": AuthorizationResult(decision),
        "rule": "DefaultDeny" if decision == "DENIED" else "MatchingAcl(acl=…, id=a1)",
    } | fields
    return AuditRecord(**values)  # type: ignore[arg-type]


def event(r: AuditRecord) -> str:
    return to_json(
        envelope(AUTHORIZATION, f"TOPIC:{r.resource_name}", to_dict(r), source="kafkaguard://t", time=r.time)
    )


def write(path: Path, *lines: str, end: str = "\n") -> Path:
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def names(path: Path, **kwargs: object) -> list[str]:
    found = recent_decisions(path, **{"limit": 100} | kwargs)  # type: ignore[arg-type]
    return [d.resource_name for d in found.decisions]


def test_the_three_kinds_and_what_is_not_listed(tmp_path: Path) -> None:
    flip = record("pii", "ALLOWED", seconds=4)
    log = write(
        tmp_path / "audit.log",
        event(record("allowed", "ALLOWED", seconds=1)),
        event(record("refused", seconds=2)),
        event(record("forwarded", seconds=3, enforced=False)),
        to_json(shadow_event(flip, "DENIED", "DefaultDeny", source="kafkaguard://t")),
        to_json(envelope(MANAGEMENT, "TOPIC:LITERAL:x", {"decision": "DENIED"}, source="s", time=START)),
        "not json but DENIED",
        to_json_line(record("flat-v1", seconds=5)),  # an older file's flat record
    )
    found = recent_decisions(log, limit=100).decisions
    assert [(d.kind, d.resource_name) for d in found] == [
        ("denied", "flat-v1"), ("shadow", "pii"), ("permissive", "forwarded"), ("denied", "refused")
    ]  # fmt: skip
    shadow = found[1]
    assert (shadow.decision, shadow.rule, shadow.shadow_decision, shadow.shadow_rule) == (
        "ALLOWED", "MatchingAcl(acl=…, id=a1)", "DENIED", "DefaultDeny"
    )  # fmt: skip
    assert decision_of(event(record("allowed", "ALLOWED")).encode()) is None


def test_newest_first_by_the_last_request_and_counts_kept(tmp_path: Path) -> None:
    # a usage window's record, written after a newer one, stamped with its first request's time
    window = record("window", seconds=1, count=7, last_time=START + timedelta(seconds=30))
    log = write(tmp_path / "audit.log", event(record("single", seconds=20)), event(window))
    found = recent_decisions(log, limit=100).decisions
    assert [(d.resource_name, d.count) for d in found] == [("window", 7), ("single", 1)]
    assert found[0].last_time == "2026-03-01T00:00:30.000Z" and found[0].time == "2026-03-01T00:00:01.000Z"


def test_the_principal_filter_and_the_limit(tmp_path: Path) -> None:
    lines = [event(record(f"t{i}", seconds=i, principal="User:bo" if i % 2 else "User:ann")) for i in range(10)]
    log = write(tmp_path / "audit.log", *lines)
    assert names(log, principal="User:bo") == ["t9", "t7", "t5", "t3", "t1"]
    assert names(log, principal="User:bo", limit=2) == ["t9", "t7"]
    assert names(log, principal="User:nobody") == []


def test_the_window_drops_the_line_it_cuts_and_the_unfinished_last_line(tmp_path: Path) -> None:
    first, second, third = (event(record(n, seconds=i)) for i, n in enumerate(["first", "second", "third"]))
    log = write(tmp_path / "audit.log", first, second, third[:-20], end="")  # the writer is mid-line
    assert names(log) == ["second", "first"]
    # a window that starts inside "first": that line is not read as a record (it is not whole)
    budget = len(second) + 1 + len(third) - 20 + 5
    found = recent_decisions(log, limit=100, max_bytes=budget)
    assert [d.resource_name for d in found.decisions] == ["second"] and found.complete is False
    assert found.read_bytes == budget


def test_lines_longer_than_a_chunk(tmp_path: Path) -> None:
    long = event(record("x" * (3 * CHUNK_BYTES), seconds=2))
    log = write(tmp_path / "audit.log", event(record("before", seconds=1)), long, event(record("after", seconds=3)))
    assert [n[:8] for n in names(log)] == ["after", "x" * 8, "before"]
    # unfinished and longer than a chunk: still never listed
    write(log, event(record("before", seconds=1)), long[:-10], end="")
    assert names(log) == ["before"]


def test_the_backup_is_read_on_within_the_same_budget(tmp_path: Path) -> None:
    log = write(tmp_path / "audit.log", event(record("current", seconds=2)))
    write(tmp_path / "audit.log.1", event(record("older", seconds=1)))
    write(tmp_path / "audit.log.2", event(record("oldest", seconds=0)))  # beyond the newest backup: not read
    found = recent_decisions(log, limit=100)
    assert [d.resource_name for d in found.decisions] == ["current", "older"] and found.complete is True
    # a budget the current file fills: the backup is not touched
    size = log.stat().st_size
    found = recent_decisions(log, limit=100, max_bytes=size)
    assert [d.resource_name for d in found.decisions] == ["current"] and found.read_bytes == size
    assert found.complete is False


def test_a_missing_log_has_no_decisions(tmp_path: Path) -> None:
    found = recent_decisions(tmp_path / "absent.log", limit=10)
    assert (found.decisions, found.read_bytes, found.complete) == ([], 0, True)


def test_non_utf8_bytes_do_not_break_the_read(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_bytes(b'\xff\xfe "DENIED" garbage\n' + event(record("fine")).encode() + b"\n")
    assert names(log) == ["fine"]
    assert json.loads(event(record("fine")))["data"]["resource_name"] == "fine"


def test_the_principal_filter_with_names_json_may_escape(tmp_path: Path) -> None:
    # non-ASCII and slashes: no substring shortcut, every DENIED line parsed; the same answer
    odd = ["User:zoë", "User:CN=a/O=b", 'User:q"uote']
    log = write(tmp_path / "audit.log", *(event(record(f"t{i}", seconds=i, principal=p)) for i, p in enumerate(odd)))
    escaped = json.dumps(to_dict(record("t9", seconds=9, principal="User:zoë")))  # an ensure_ascii writer's line
    log.write_text(log.read_text("utf-8") + escaped + "\n", encoding="utf-8")
    assert names(log, principal="User:zoë") == ["t9", "t0"]
    assert names(log, principal="User:CN=a/O=b") == ["t1"]
    assert names(log, principal='User:q"uote') == ["t2"]

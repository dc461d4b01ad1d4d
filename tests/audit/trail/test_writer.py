"""The server's audit log: buffered, written off the loop, rotated by size, gaps reported, flush is complete, and
every file of it readable by its owner only."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from kafkaguard.audit.records.record import AuditRecord, from_json_line
from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from tests.modes import PRIVATE, file_modes, mode, umask


def record(name: str) -> AuditRecord:
    return AuditRecord(
        time=datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC),
        principal="User:alice",
        host="10.0.0.1",
        api="Produce",
        operation=AclOperation.WRITE,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        decision=AuthorizationResult.DENIED,
        rule="DefaultDeny",
    )


def name_of(line: str) -> str:
    parsed = from_json_line(line)
    assert isinstance(parsed, AuditRecord), parsed
    return parsed.resource_name


def test_records_reach_the_file_and_parse_back(tmp_path: Path):
    path = tmp_path / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, flush_interval=10)  # only explicit flushes
        log.start()
        for i in range(3):
            log.record(record(f"t{i}"))
        await log.flush()
        assert [name_of(line) for line in path.read_text().splitlines()] == ["t0", "t1", "t2"]
        log.record(record("last"))
        await log.stop()  # stop writes what is still buffered

    asyncio.run(scenario())
    assert name_of(path.read_text().splitlines()[-1]) == "last"


def test_flush_waits_for_a_background_flush_already_writing(tmp_path: Path):
    path = tmp_path / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, flush_interval=0.001)
        log.start()
        for round_ in range(50):
            log.record(record(f"r{round_}"))
            await asyncio.sleep(0)  # let the background flush take the line
            await log.flush()
            assert f'"resource_name":"r{round_}"' in path.read_text()
        await log.stop()

    asyncio.run(scenario())


def test_rotation_by_size_keeps_backups(tmp_path: Path):
    path = tmp_path / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, max_bytes=1024, backups=2, flush_interval=10)
        for i in range(40):
            log.record(record(f"topic-{i:03d}"))
            await log.flush()

    asyncio.run(scenario())
    assert path.exists() and path.with_name("audit.log.1").exists() and path.with_name("audit.log.2").exists()
    assert not path.with_name("audit.log.3").exists()
    assert path.stat().st_size <= 1024


def test_a_full_buffer_drops_the_oldest_and_says_so(tmp_path: Path):
    path = tmp_path / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, max_buffered=5, flush_interval=10)
        for i in range(8):
            log.record(record(f"t{i}"))
        await log.flush()

    asyncio.run(scenario())
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["dropped_records"] == 3
    assert [name_of(line) for line in lines[1:]] == ["t3", "t4", "t5", "t6", "t7"]


def test_the_log_and_its_backups_are_created_private(tmp_path: Path):
    path = tmp_path / "audit" / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, max_bytes=1024, backups=2, flush_interval=10)
        log.start()
        for i in range(40):
            log.record(record(f"topic-{i:03d}"))
            await log.flush()
        await log.stop()

    with umask(0o022):
        asyncio.run(scenario())
    assert file_modes(tmp_path / "audit") == {"audit.log": PRIVATE, "audit.log.1": PRIVATE, "audit.log.2": PRIVATE}


def test_wider_existing_files_are_tightened_on_start(tmp_path: Path, caplog):
    path = tmp_path / "audit.log"
    names = [path, tmp_path / "audit.log.1", tmp_path / "audit.log.3"]
    for name in names:
        name.write_text("{}\n")
        name.chmod(0o644)
    (tmp_path / "unrelated.txt").write_text("not ours")
    (tmp_path / "unrelated.txt").chmod(0o644)

    async def scenario() -> None:
        log = AuditLog(path, flush_interval=10)
        log.start()
        await log.stop()

    with caplog.at_level(logging.INFO, logger="kafkaguard"):
        asyncio.run(scenario())
    assert [mode(name) for name in names] == [PRIVATE] * 3
    assert mode(tmp_path / "unrelated.txt") == 0o644
    tightened = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "0o600" in r.getMessage()]
    assert len(tightened) == 3


def allowed(name: str, second: int) -> AuditRecord:
    return AuditRecord(
        time=datetime(2025, 3, 14, 9, 26, second, tzinfo=UTC),
        principal="User:alice",
        host="10.0.0.1",
        api="Fetch",
        operation=AclOperation.READ,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        decision=AuthorizationResult.ALLOWED,
        rule="MatchingAcl(acl=(x), id=a1)",
    )


def test_usage_mode_writes_one_record_per_access_and_window(tmp_path: Path):
    path = tmp_path / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, mode="usage", flush_interval=10, usage_window_seconds=60)
        assert log.log_allowed  # the scope queues allowed decisions too
        log.start()
        log.record_later(lambda: [allowed("t", 1), allowed("t", 2), record("t"), record("t")])
        log.record_later(lambda: [allowed("t", 30), allowed("u", 31)])
        # The records' window (09:26) ended long ago: the writer thread folds them and writes them at the next flush.
        await log.flush()
        written = [from_json_line(line) for line in path.read_text().splitlines()]
        assert [(r.resource_name, r.decision.value, r.count) for r in written if isinstance(r, AuditRecord)] == [
            ("t", "ALLOWED", 3),
            ("t", "DENIED", 2),
            ("u", "ALLOWED", 1),
        ]
        await log.stop()

    asyncio.run(scenario())


def test_usage_mode_holds_the_open_window_until_it_ends_or_stop(tmp_path: Path):
    path = tmp_path / "audit.log"

    async def scenario() -> None:
        log = AuditLog(path, mode="usage", flush_interval=10, usage_window_seconds=3600)
        log.start()
        now = datetime.now(UTC)
        for _ in range(5):
            log.record(replace(allowed("t", 0), time=now))
        await log.flush()
        assert not path.exists() or path.read_text() == ""  # the window is still open
        await log.stop()  # shutdown writes it
        (line,) = path.read_text().splitlines()
        parsed = from_json_line(line)
        assert isinstance(parsed, AuditRecord) and parsed.count == 5

    asyncio.run(scenario())

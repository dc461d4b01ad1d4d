"""Issue 40: ``acls history`` and ``audit shadow-report`` at 80 columns (``COLUMNS=80``): no principal cut to
``User:…`` or folded mid-name, no line beyond 80 characters; ``--output wide`` keeps one row per line whatever the
width, ``--output json`` stays for scripts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.audit.records.record import AuditRecord
from kafkaguard.audit.records.shadow import shadow_event
from kafkaguard.cli.main import app
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType

#: a certificate's principal, as long as they come
LONG = "User:CN=payments-settlement-service,OU=platform"
NARROW = {"COLUMNS": "80", "LINES": "40"}


def _lines_fit(text: str, width: int = 80) -> None:
    assert text.strip()
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "…" not in text, text


@pytest.fixture
def history_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["groups", "add", "settlement", LONG, "User:bob", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    return data


def test_history_at_80_columns_keeps_each_principal_whole(history_dir: Path) -> None:
    result = CliRunner().invoke(app, ["acls", "history", "--data-dir", str(history_dir)], env=NARROW)
    assert result.exit_code == 0, result.output
    _lines_fit(result.stdout)
    assert LONG in result.stdout  # on one line, not folded mid-name


def test_history_wide_is_one_line_per_event(history_dir: Path) -> None:
    result = CliRunner().invoke(
        app, ["acls", "history", "--data-dir", str(history_dir), "--output", "wide"], env=NARROW
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "group.member_added" in line]
    assert len(rows) == 2 and any(LONG in row for row in rows), result.stdout


def _shadow_log(tmp_path: Path) -> Path:
    record = AuditRecord(
        time=datetime(2026, 11, 26, 9, 0, 1, tzinfo=UTC), principal=LONG, host="10.0.0.7", api="Fetch",
        operation=AclOperation.READ, resource_type=ResourceType.TOPIC, resource_name="settlements.eu-west-1",
        decision=AuthorizationResult.ALLOWED, rule="DefaultDeny",
    )  # fmt: skip
    log = tmp_path / "audit.log"
    log.write_text(json.dumps(shadow_event(record, "DENIED", "DefaultDeny", source="kafkaguard://test")) + "\n")
    return log


def test_shadow_report_at_80_columns_shows_the_whole_principal(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["audit", "shadow-report", str(_shadow_log(tmp_path))], env=NARROW)
    assert result.exit_code == 0, result.output
    _lines_fit(result.stdout)
    assert LONG in result.stdout and "settlements.eu-west-1" in result.stdout and "newly denied" in result.stdout


def test_shadow_report_wide_and_json(tmp_path: Path) -> None:
    log = str(_shadow_log(tmp_path))
    wide = CliRunner().invoke(app, ["audit", "shadow-report", log, "--output", "wide"], env=NARROW)
    assert wide.exit_code == 0, wide.output
    assert any(LONG in line and "TOPIC:settlements.eu-west-1" in line for line in wide.stdout.splitlines())
    as_json = CliRunner().invoke(app, ["audit", "shadow-report", log, "--output", "json"], env=NARROW)
    assert json.loads(as_json.stdout)["flips"][0]["principal"] == LONG
    bad = CliRunner().invoke(app, ["audit", "shadow-report", log, "--output", "tall"])
    assert bad.exit_code == 2 and "wide" in bad.stderr

"""``kafkaguard acls history``'s own parts: ``--since`` in both forms, clear errors for bad input or no store, and
``kafkaguard acls`` still asking for ``--bootstrap-server`` when not asked for its history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.history import parse_since
from kafkaguard.cli.main import app

NOW = datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", NOW - timedelta(minutes=90)),
        ("24h", NOW - timedelta(hours=24)),
        ("7d", NOW - timedelta(days=7)),
        ("2025-03-01", datetime(2025, 3, 1, tzinfo=UTC)),
        ("2025-03-01T08:00:00+02:00", datetime(2025, 3, 1, 6, tzinfo=UTC)),
        ("2025-03-01T08:00:00Z", datetime(2025, 3, 1, 8, tzinfo=UTC)),
    ],
)
def test_since_is_a_duration_back_or_a_time(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


def test_a_bad_since_says_what_to_write(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["acls", "history", "--data-dir", str(tmp_path), "--since", "yesterday"])
    assert result.exit_code == 2
    assert "give a duration (90m, 24h, 7d) or an ISO date or time" in result.output


def test_no_store_in_the_data_directory_is_an_error_not_a_new_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["acls", "history", "--data-dir", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "no store at" in result.output
    assert not (tmp_path / "nowhere").exists()


def test_acls_without_a_subcommand_still_needs_the_bootstrap_server() -> None:
    result = CliRunner().invoke(app, ["acls", "--list"], env={"KAFKAGUARD_BOOTSTRAP_SERVER": ""})
    assert result.exit_code == 2
    assert "Missing option '--bootstrap-server'" in result.output

"""``kafkaguard audit collect``'s argument errors: one line, exit code 2, before any connection (the collecting
itself is tested against the real broker in tests/kafka/test_audit_collect.py)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kafkaguard.cli.main import app


def test_a_bad_topic_name_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["audit", "collect", "--bootstrap-server", "127.0.0.1:1", "--topic", "a/b",
                                      "--to", str(tmp_path / "ds")])  # fmt: skip
    assert result.exit_code == 2
    assert "error: --topic: not a Kafka topic name: 'a/b'" in result.output
    assert not (tmp_path / "ds").exists()


def test_a_directory_that_cannot_be_opened_is_refused() -> None:
    result = CliRunner().invoke(app, ["audit", "collect", "--bootstrap-servers", "127.0.0.1:1", "--topic", "audit",
                                      "--to", "nosuch://bucket/x"])  # fmt: skip
    assert result.exit_code == 2
    assert "error: cannot open --to nosuch://bucket/x" in result.output


def test_cooperative_rebalancing_is_refused(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("partition.assignment.strategy=cooperative-sticky\n")
    result = CliRunner().invoke(app, ["audit", "collect", "--bootstrap-server", "127.0.0.1:1", "--topic", "audit",
                                      "--to", str(tmp_path / "ds"), "--command-config", str(props)])  # fmt: skip
    assert result.exit_code == 2
    assert "collect needs an eager partition.assignment.strategy" in result.output

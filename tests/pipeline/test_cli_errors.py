"""Bad input ends with one clear line and a non-zero exit, never a traceback (checked before Spark starts)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.jobs import entry
from kafkaguard.pipeline.session import check_java


def run(*args: str):
    return CliRunner().invoke(app, ["audit", *args])


def test_missing_log(tmp_path: Path) -> None:
    (tmp_path / "acls.json").write_text(json.dumps({"acls": []}))
    result = run(
        "usage", "--log", str(tmp_path / "nope.log"), "--acls", str(tmp_path / "acls.json"), "--out", str(tmp_path)
    )
    assert result.exit_code == 2
    assert "error: log path does not exist" in result.output
    assert "Traceback" not in result.output


def test_missing_acl_file(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("")
    result = run(
        "replay", "--log", str(tmp_path / "log"), "--acls", str(tmp_path / "nope.json"), "--out", str(tmp_path)
    )
    assert result.exit_code == 2
    assert "file not found" in result.output


def test_bad_acl_json(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("")
    (tmp_path / "bad.json").write_text(json.dumps({"acls": [{"principal": "alice"}]}))
    (tmp_path / "good.json").write_text(json.dumps({"acls": []}))
    result = run(
        "simulate",
        "--log",
        str(tmp_path / "log"),
        "--current",
        str(tmp_path / "good.json"),
        "--proposed",
        str(tmp_path / "bad.json"),
        "--out",
        str(tmp_path),
    )
    assert result.exit_code == 2
    assert "bad.json: not a valid kafkaguard ACL document" in result.output
    assert "acls[0]" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_bad_super_users(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("")
    result = run("recommend", "--log", str(tmp_path / "log"), "--out", str(tmp_path), "--super-users", "admin")
    assert result.exit_code == 2
    assert "principalType:principalName" in result.output


def test_help_lists_the_jobs() -> None:
    result = CliRunner().invoke(app, ["audit", "--help"])
    assert result.exit_code == 0
    for job in ("replay", "simulate", "usage", "recommend"):
        assert job in result.output


def fake_java(tmp_path: Path, version: str) -> str:
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2021-01-01' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(java)


def test_old_or_missing_java_is_a_clear_error(tmp_path: Path) -> None:
    assert check_java(fake_java(tmp_path, "17.0.15")) == 17
    with pytest.raises(PipelineError, match="needs Java 17 or newer, found Java 8"):
        check_java(fake_java(tmp_path, "1.8.0_292"))
    with pytest.raises(PipelineError, match="no 'java' was found"):
        check_java(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    ("error", "code"), [(entry.SparkFailed("Spark failed: boom"), 1), (PipelineError("no such file: x"), 2)]
)
def test_a_failure_inside_spark_exits_1_bad_input_2(monkeypatch, capsys, tmp_path: Path, error, code) -> None:
    # SparkFailed is a KafkaguardError like bad input: main must still tell them apart by exit code.
    def execute(*_args: object) -> None:
        raise error

    monkeypatch.setattr(entry, "execute", execute)
    assert entry.main(["recommend", "--log", str(tmp_path / "a.log"), "--out", str(tmp_path)]) == code
    assert capsys.readouterr().err == f"error: {error}\n"

"""Issue 40: the rollout recipe's last step, verbatim, against a real server: ``kafkaguard plan candidate.yaml &&
kafkaguard apply candidate.yaml`` (the file as a positional argument; ``-f`` still works), with the connection
given once in the environment (``KAFKAGUARD_BOOTSTRAP_SERVER``, ``KAFKAGUARD_COMMAND_CONFIG``) or as the usual
flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from tests.cli.conftest import cluster_acls

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

CANDIDATE = """\
principals:
  User:carol:
    acls:
      - topic: rollout
        operations: [Read]
"""
RECIPE = "kafkaguard plan candidate.yaml && kafkaguard apply candidate.yaml"


def test_the_recipe_verbatim_with_the_connection_in_the_environment(
    bootstrap, admin_config, checker, tmp_path: Path
) -> None:
    (tmp_path / "candidate.yaml").write_text(CANDIDATE, "utf-8")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update(KAFKAGUARD_BOOTSTRAP_SERVER=bootstrap, KAFKAGUARD_COMMAND_CONFIG=str(admin_config))
    done = subprocess.run(
        ["bash", "-c", RECIPE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Plan: 1 to add" in done.stdout and "Apply complete." in done.stdout
    assert ("TOPIC", "rollout", "LITERAL", "User:carol", "*", "READ", "ALLOW") in cluster_acls(checker)


def test_positional_file_with_the_connection_flags(bootstrap, admin_config, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(CANDIDATE, "utf-8")
    connection = ["--bootstrap-server", bootstrap, "--command-config", str(admin_config)]
    for command in ("plan", "apply"):
        for args in ([str(candidate)], ["-f", str(candidate)], ["--file", str(candidate)]):
            result = CliRunner().invoke(
                app, [command, *args, *connection, "--dry-run"] if command == "apply" else [command, *args, *connection]
            )
            assert result.exit_code == 0, (command, args, result.output)


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_no_file_or_two_files_is_a_clear_error(command: str, tmp_path: Path) -> None:
    one, two = tmp_path / "a.yaml", tmp_path / "b.yaml"
    one.write_text(CANDIDATE, "utf-8")
    two.write_text(CANDIDATE, "utf-8")
    missing = CliRunner().invoke(app, [command, "--bootstrap-server", "127.0.0.1:1"])
    assert missing.exit_code == 2
    assert "candidate.yaml" in missing.stderr or "ACL file" in missing.stderr
    both = CliRunner().invoke(app, [command, str(one), "-f", str(two), "--bootstrap-server", "127.0.0.1:1"])
    assert both.exit_code == 2
    assert "either" in both.stderr

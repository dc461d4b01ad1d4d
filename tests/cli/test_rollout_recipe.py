"""Issue 40: the rollout recipe's last step, as docs/guides/rollout.md writes it, against a real server: ``kafkaguard
plan candidate.yaml && kafkaguard apply candidate.yaml`` (the file as a positional argument; ``-f`` still works), with
the connection given once in the environment (``KAFKAGUARD_BOOTSTRAP_SERVER``, ``KAFKAGUARD_COMMAND_CONFIG``) or as
the usual flags (the page's first recipe, its last two lines). Only the server's address replaces the page's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from tests.cli.conftest import cluster_acls
from tests.docs.blocks import DOCS, blocks, marked_block

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


def _run_in_bash(script: str, directory: Path, admin_config: Path, candidate: str = CANDIDATE) -> str:
    """Runs a recipe where the page's reader would: a directory holding candidate.yaml and admin.properties."""
    (directory / "candidate.yaml").write_text(candidate, "utf-8")
    (directory / "admin.properties").write_text(admin_config.read_text("utf-8"), "utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=directory, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_recipe_as_written_with_the_connection_in_the_environment(
    bootstrap, admin_config, checker, tmp_path: Path
) -> None:
    script = marked_block("rollout-recipe-environment").text
    assert "127.0.0.1:9092" in script
    out = _run_in_bash(script.replace("127.0.0.1:9092", bootstrap), tmp_path, admin_config)
    assert "Plan: 1 to add" in out and "Apply complete." in out
    assert ("TOPIC", "rollout", "LITERAL", "User:carol", "*", "READ", "ALLOW") in cluster_acls(checker)


def test_the_recipes_last_step_with_the_connection_flags(bootstrap, admin_config, checker, tmp_path: Path) -> None:
    (recipe,) = [block for block in blocks(DOCS / "guides" / "rollout.md") if "proxy.example:19092" in block.text]
    last_step = "\n".join(recipe.text.split("\n")[-2:])  # B=... and plan && apply: the step that changes production
    assert last_step.startswith("B=") and "kafkaguard apply $B -f candidate.yaml" in last_step, recipe.where()
    out = _run_in_bash(
        last_step.replace("proxy.example:19092", bootstrap), tmp_path, admin_config, CANDIDATE.replace("carol", "dave")
    )
    assert "Plan: 1 to add" in out and "Apply complete." in out
    assert ("TOPIC", "rollout", "LITERAL", "User:dave", "*", "READ", "ALLOW") in cluster_acls(checker)


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

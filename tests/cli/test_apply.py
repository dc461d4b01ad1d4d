"""``plan`` / ``apply`` / ``export`` against a real server (its own, since ``--prune`` acts on every ACL): the file
becomes the cluster's state (checked with kafka-python), ``--dry-run`` changes nothing, removals need ``--prune``,
and export → plan shows no change."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kafkaguard.cli.main import app
from tests.cli.conftest import CLI_PASSWORD, CLI_USER, cluster_acls, write_properties
from tests.serving import ServerHandle

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

FIRST = """\
principals:
  User:alice:
    consumer:
      topics: [orders]
      groups: [billing]
  User:mallory:
    acls:
      - topic: orders
        operations: [All]
        permission: deny
"""
SECOND = """\
principals:
  User:alice:
    acls:
      - topic: orders
        operations: [Read]
  User:bob:
    producer:
      topics: [orders]
"""


def run(runner: CliRunner, command: str, bootstrap: str, config: Path, *args: str, stdin: str | None = None) -> Result:
    return runner.invoke(
        app, [command, "--bootstrap-server", bootstrap, "--command-config", str(config), *args], input=stdin
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def test_plan_apply_export_round_trip(runner, bootstrap, admin_config, checker, tmp_path) -> None:
    first, second = write(tmp_path, "first.yaml", FIRST), write(tmp_path, "second.yaml", SECOND)

    planned = run(runner, "plan", bootstrap, admin_config, "-f", str(first), "--detailed-exitcode")
    assert planned.exit_code == 2, planned.output
    assert "Step 1: add 1 DENY ACL(s)\nStep 2: add 3 ALLOW ACL(s)\n" in planned.stdout
    assert "Plan: 4 to add, 0 to remove, 0 unchanged." in planned.stdout
    assert (
        "  + ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL) "
        "(principal=User:mallory, host=*, operation=ALL, permissionType=DENY)"
    ) in planned.stdout

    dry = run(runner, "apply", bootstrap, admin_config, "-f", str(first), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Dry run: nothing was changed." in dry.stdout
    assert cluster_acls(checker) == set()

    applied = run(runner, "apply", bootstrap, admin_config, "-f", str(first))
    assert applied.exit_code == 0, applied.output
    assert cluster_acls(checker) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("GROUP", "billing", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:mallory", "*", "ALL", "DENY"),
    }

    exported = run(runner, "export", bootstrap, admin_config, "-o", str(tmp_path / "exported.yaml"))
    assert exported.exit_code == 0, exported.output
    again = run(
        runner, "plan", bootstrap, admin_config, "-f", str(tmp_path / "exported.yaml"), "--prune", "--detailed-exitcode"
    )
    assert again.exit_code == 0, again.output
    assert "Plan: 0 to add, 0 to remove, 4 unchanged." in again.stdout
    as_json = run(runner, "export", bootstrap, admin_config, "--format", "json", "-o", str(tmp_path / "exported.json"))
    assert as_json.exit_code == 0
    same = run(
        runner, "plan", bootstrap, admin_config, "-f", str(tmp_path / "exported.json"), "--prune", "--detailed-exitcode"
    )
    assert same.exit_code == 0, same.output

    # Without --prune the old ACLs stay (shown as ~); with it they go, after a confirmation.
    added_only = run(runner, "apply", bootstrap, admin_config, "-f", str(second))
    assert added_only.exit_code == 0, added_only.output
    assert "--prune would remove them" in added_only.stdout
    assert len(cluster_acls(checker)) == 7
    declined = run(runner, "apply", bootstrap, admin_config, "-f", str(second), "--prune", stdin="n\n")
    assert declined.exit_code == 1
    assert len(cluster_acls(checker)) == 7
    pruned = run(runner, "apply", bootstrap, admin_config, "-f", str(second), "--prune", stdin="y\n")
    assert pruned.exit_code == 0, pruned.output
    assert "Step 1: remove 2 ALLOW ACL(s): done\nStep 2: remove 1 DENY ACL(s): done\n" in pruned.stdout
    assert cluster_acls(checker) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:bob", "*", "WRITE", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:bob", "*", "CREATE", "ALLOW"),
    }
    nothing = run(runner, "apply", bootstrap, admin_config, "-f", str(second), "--prune")
    assert "Nothing to do" in nothing.stdout


def test_a_failed_step_stops_the_run(runner, bootstrap, server: ServerHandle, checker, tmp_path) -> None:
    server.add_user(CLI_USER, CLI_PASSWORD)
    config = write_properties(tmp_path / "op.properties", CLI_USER, CLI_PASSWORD)
    before = cluster_acls(checker)
    # The operator may not even read the ACLs: the plan cannot be made, nothing is attempted.
    result = run(runner, "apply", bootstrap, config, "-f", str(write(tmp_path, "x.yaml", FIRST)))
    assert result.exit_code == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in result.stderr
    assert cluster_acls(checker) == before


def test_invalid_file_is_refused_before_connecting(runner, tmp_path) -> None:
    bad = write(
        tmp_path, "bad.yaml", "principals:\n  User:a:\n    acls:\n      - topic: t\n        operations: [Reed]\n"
    )
    result = runner.invoke(app, ["apply", "--bootstrap-server", "127.0.0.1:1", "-f", str(bad)])
    assert result.exit_code == 2
    assert (
        "bad.yaml:5: principals.User:a.acls[0].operations[0]: 'Reed' is not a valid AclOperation name" in result.stderr
    )


def test_a_refused_deny_step_stops_before_the_allows(
    runner, bootstrap, admin_config, checker, tmp_path, monkeypatch
) -> None:
    from kafkaguard.cli.client import Failure, KafkaAdmin
    from kafkaguard.model import AclPermissionType

    calls: list[AclPermissionType] = []

    def refuse_denies(self, bindings):
        calls.append(bindings[0].entry.permission_type)
        return (
            [Failure("deny", "INVALID_REQUEST", "refused for the test")] if calls[-1] is AclPermissionType.DENY else []
        )

    monkeypatch.setattr(KafkaAdmin, "create_acls", refuse_denies)
    before = cluster_acls(checker)
    text = (
        "principals:\n  User:zed:\n    acls:\n      - {topic: z, operations: [Read]}\n"
        "      - {topic: z, operations: [Write], permission: deny}\n"
    )
    result = run(runner, "apply", bootstrap, admin_config, "-f", str(write(tmp_path, "z.yaml", text)))
    assert result.exit_code == 1
    assert calls == [AclPermissionType.DENY]
    assert "INVALID_REQUEST: refused for the test" in result.stderr
    assert "step 1 (add 1 DENY ACL(s)) failed; stopped before the next step (nothing was changed)" in result.stderr
    assert cluster_acls(checker) == before

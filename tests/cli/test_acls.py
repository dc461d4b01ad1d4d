"""``kafkaguard acls`` against a real kafkaguard server: kafka-acls.sh's flags, defaults, checks and output; the
cluster's state is checked afterwards with kafka-python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from tests.cli.conftest import CLI_PASSWORD, CLI_USER, cluster_acls, unique, write_properties
from tests.server.conftest import ServerHandle

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]


def run(runner: CliRunner, bootstrap: str, config: Path, *args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(
        app, ["acls", "--bootstrap-server", bootstrap, "--command-config", str(config), *args], input=stdin
    )


def test_add_then_list_prints_kafka_acls_format(runner, bootstrap, admin_config, checker) -> None:
    topic = unique("orders")
    added = run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "DESCRIBE",
        "--topic",
        topic,
    )
    assert added.exit_code == 0, added.output
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    # AclCommand.addAcls: "Adding ACLs for resource `R`: " NL " " entries-joined-by-NL NL, then println's NL.
    assert added.stdout == (
        f"Adding ACLs for resource `{pattern}`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
    )
    assert cluster_acls(checker, topic) == {
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
    }
    listed = run(runner, bootstrap, admin_config, "--list", "--topic", topic)
    assert listed.exit_code == 0, listed.output
    # AclCommand.printResourceAcls (Kafka 4.x): "Current ACLs for resource `R`:" NL TAB-entries NL, println NL.
    assert listed.stdout == (
        f"Current ACLs for resource `{pattern}`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
    )
    again = run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        topic,
    )
    assert again.exit_code == 0
    assert again.stdout == (
        f"Acl (pattern={pattern}, entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)) "
        "already exists.\n"
    )

"""``kafkaguard acls`` against a real kafkaguard server: kafka-acls.sh's flags, defaults, checks and output; the
cluster's state is checked afterwards with kafka-python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kafkaguard.cli.main import app
from tests.cli.conftest import CLI_PASSWORD, CLI_USER, cluster_acls, unique, write_properties
from tests.serving import ServerHandle

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]
READ_ALICE = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
DESCRIBE_ALICE = "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"


def run(runner: CliRunner, bootstrap: str, config: Path, *args: str, stdin: str | None = None) -> Result:
    return runner.invoke(
        app, ["acls", "--bootstrap-server", bootstrap, "--command-config", str(config), *args], input=stdin
    )


def literal(resource_type: str, name: str) -> str:
    return f"ResourcePattern(resourceType={resource_type}, name={name}, patternType=LITERAL)"


def test_add_then_list_prints_kafka_acls_format(runner, bootstrap, admin_config, checker) -> None:
    topic = unique("orders")
    args = ("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "DESCRIBE")
    added = run(runner, bootstrap, admin_config, *args, "--topic", topic)
    assert added.exit_code == 0, added.output
    # AclCommand.addAcls: "Adding ACLs for resource `R`: " NL " " entries-joined-by-NL NL, then println's NL.
    assert added.stdout == (
        f"Adding ACLs for resource `{literal('TOPIC', topic)}`: \n \t{READ_ALICE}\n\t{DESCRIBE_ALICE}\n\n"
    )
    assert cluster_acls(checker, topic) == {
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
    }
    listed = run(runner, bootstrap, admin_config, "--list", "--topic", topic)
    assert listed.exit_code == 0, listed.output
    # AclCommand.printResourceAcls (Kafka 4.x): "Current ACLs for resource `R`:" NL TAB-entries NL, println NL.
    assert (
        listed.stdout
        == f"Current ACLs for resource `{literal('TOPIC', topic)}`:\n\t{READ_ALICE}\n\t{DESCRIBE_ALICE}\n\n"
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
    assert again.stdout == f"Acl (pattern={literal('TOPIC', topic)}, entry={READ_ALICE}) already exists.\n"


def test_defaults_deny_hosts_and_prefixed(runner, bootstrap, admin_config, checker) -> None:
    prefix = unique("pay")
    result = run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--deny-principal",
        "User:mallory",
        "--deny-host",
        "10.0.0.9",
        "--allow-principal",
        "User:*",
        "--topic",
        prefix,
        "--resource-pattern-type",
        "prefixed",
    )
    assert result.exit_code == 0, result.output
    # --operation defaults to ALL; --allow-host defaults to * once --allow-principal is given.
    assert cluster_acls(checker, prefix) == {
        ("TOPIC", prefix, "PREFIXED", "User:*", "*", "ALL", "ALLOW"),
        ("TOPIC", prefix, "PREFIXED", "User:mallory", "10.0.0.9", "ALL", "DENY"),
    }
    matched = run(
        runner, bootstrap, admin_config, "--list", "--topic", f"{prefix}-eu", "--resource-pattern-type", "match"
    )
    assert f"name={prefix}, patternType=PREFIXED" in matched.stdout
    assert "(principal=User:mallory, host=10.0.0.9, operation=ALL, permissionType=DENY)" in matched.stdout


def test_producer_and_consumer_shorthands(runner, bootstrap, admin_config, checker) -> None:
    topic, group, tx = unique("t"), unique("g"), unique("tx")
    produce = run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--allow-principal",
        "User:carol",
        "--producer",
        "--idempotent",
        "--topic",
        topic,
        "--transactional-id",
        tx,
    )
    assert produce.exit_code == 0, produce.output
    consume = run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--allow-principal",
        "User:dave",
        "--consumer",
        "--topic",
        topic,
        "--group",
        group,
    )
    assert consume.exit_code == 0, consume.output
    everything = cluster_acls(checker)
    assert {(t, n, op) for t, n, _, p, _, op, _ in everything if p == "User:carol"} >= {
        ("TOPIC", topic, "WRITE"),
        ("TOPIC", topic, "DESCRIBE"),
        ("TOPIC", topic, "CREATE"),
        ("TRANSACTIONAL_ID", tx, "WRITE"),
        ("TRANSACTIONAL_ID", tx, "DESCRIBE"),
        ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
    }
    assert {(t, n, op) for t, n, _, p, _, op, _ in everything if p == "User:dave"} == {
        ("TOPIC", topic, "READ"),
        ("TOPIC", topic, "DESCRIBE"),
        ("GROUP", group, "READ"),
    }


def test_list_by_principal_and_as_json(runner, bootstrap, admin_config) -> None:
    topic = unique("j")
    run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--allow-principal",
        "User:erin",
        "--allow-principal",
        "User:frank",
        "--operation",
        "Write",
        "--topic",
        topic,
    )
    text = run(runner, bootstrap, admin_config, "--list", "--topic", topic, "--principal", "User:erin")
    assert text.stdout == (
        "ACLs for principal `User:erin`\n"
        f"Current ACLs for resource `{literal('TOPIC', topic)}`:\n"
        "\t(principal=User:erin, host=*, operation=WRITE, permissionType=ALLOW)\n\n"
    )
    as_json = run(runner, bootstrap, admin_config, "--list", "--topic", topic, "--output", "json")
    assert json.loads(as_json.stdout)["acls"] == [
        {
            "principal": p,
            "host": "*",
            "resource_type": "TOPIC",
            "resource_name": topic,
            "pattern_type": "LITERAL",
            "operation": "WRITE",
            "permission_type": "ALLOW",
        }
        for p in ("User:erin", "User:frank")
    ]


def test_remove_asks_unless_forced(runner, bootstrap, admin_config, checker) -> None:
    topic = unique("r")
    run(
        runner,
        bootstrap,
        admin_config,
        "--add",
        "--allow-principal",
        "User:gina",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        topic,
    )
    declined = run(
        runner,
        bootstrap,
        admin_config,
        "--remove",
        "--allow-principal",
        "User:gina",
        "--operation",
        "Read",
        "--topic",
        topic,
        stdin="n\n",
    )
    assert declined.exit_code == 0
    assert declined.stdout.startswith(
        "Are you sure you want to remove ACLs: \n \t(principal=User:gina, host=*, operation=READ, "
        f"permissionType=ALLOW)\n from resource filter `ResourcePatternFilter(resourceType=TOPIC, name={topic}, "
        "patternType=LITERAL)`? (y/n)\n"
    )
    assert len(cluster_acls(checker, topic)) == 2
    accepted = run(
        runner,
        bootstrap,
        admin_config,
        "--remove",
        "--allow-principal",
        "User:gina",
        "--operation",
        "Read",
        "--topic",
        topic,
        stdin="y\n",
    )
    assert accepted.exit_code == 0
    assert cluster_acls(checker, topic) == {("TOPIC", topic, "LITERAL", "User:gina", "*", "WRITE", "ALLOW")}
    forced = run(runner, bootstrap, admin_config, "--remove", "--force", "--topic", topic)
    assert forced.exit_code == 0, forced.output
    assert forced.stdout == ""
    assert cluster_acls(checker, topic) == set()


@pytest.fixture(scope="module")
def operator_config(server: ServerHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user with no ACLs at all: every ACL call is denied (CLUSTER_AUTHORIZATION_FAILED)."""
    server.add_user(CLI_USER, CLI_PASSWORD)
    return write_properties(tmp_path_factory.mktemp("op") / "op.properties", CLI_USER, CLI_PASSWORD)


def test_unauthorized_callers_get_kafkas_error_and_a_non_zero_exit(runner, bootstrap, operator_config, checker) -> None:
    listed = run(runner, bootstrap, operator_config, "--list")
    assert listed.exit_code == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in listed.stderr
    topic = unique("denied")
    added = run(runner, bootstrap, operator_config, "--add", "--allow-principal", "User:x", "--topic", topic)
    assert added.exit_code == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in added.stderr
    assert "Traceback" not in added.output
    assert cluster_acls(checker, topic) == set()


def test_refused_binding_names_kafkas_error(runner, bootstrap, admin_config) -> None:
    result = run(runner, bootstrap, admin_config, "--add", "--allow-principal", "User:x", "--topic", "")
    assert result.exit_code == 1
    assert "INVALID_REQUEST: Invalid empty resource name" in result.stderr


def test_an_invalid_cidr_host_is_refused_over_the_wire_and_a_valid_one_stored(runner, bootstrap, admin_config) -> None:
    topic = unique("cidr")
    bad = run(runner, bootstrap, admin_config, "--add", "--allow-principal", "User:x", "--allow-host", "10.0.0.0/33",
              "--topic", topic)  # fmt: skip
    assert bad.exit_code == 1
    assert "INVALID_REQUEST: Invalid CIDR notation '10.0.0.0/33': prefix length 33 is out of range" in bad.stderr
    good = run(runner, bootstrap, admin_config, "--add", "--allow-principal", "User:x", "--allow-host", "10.0.0.0/8",
               "--topic", topic)  # fmt: skip
    assert good.exit_code == 0, good.output
    listed = run(runner, bootstrap, admin_config, "--list", "--topic", topic)
    assert "(principal=User:x, host=10.0.0.0/8, operation=ALL, permissionType=ALLOW)" in listed.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--list", "--add"), "exactly one action"),
        (("--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal"),
        (("--add", "--allow-principal", "User:a"), "You must provide at least one resource"),
        (("--add", "--allow-principal", "alice", "--topic", "t"), "Invalid principal 'alice'"),
        (("--add", "--allow-principal", "User:a", "--operation", "Reed", "--topic", "t"), "'Reed' is not a valid"),
        (
            ("--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"),
            "ResourceType CLUSTER only supports",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
            "not valid when adding",
        ),
        (("--list", "--producer", "--topic", "t"), "can't be used with"),
        (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"), "With --consumer you must specify"),
        (("--add", "--principal", "User:a", "--topic", "t"), "only available if --list"),
        (
            ("--add", "--allow-principal", "User:a", "--user-principal", "bob", "--operation", "CreateTokens"),
            "librdkafka",
        ),
    ],
)
def test_usage_errors_say_what_to_fix(runner, bootstrap, admin_config, args, message) -> None:
    result = run(runner, bootstrap, admin_config, *args)
    assert result.exit_code != 0
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_unreachable_cluster_is_one_clear_line(runner, admin_config) -> None:
    result = runner.invoke(
        app,
        [
            "acls",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--command-config",
            str(admin_config),
            "--list",
            "--timeout",
            "2",
        ],
    )
    assert result.exit_code == 1
    assert "cannot reach the cluster at 127.0.0.1:1" in result.stderr or "no answer from 127.0.0.1:1" in result.stderr


def test_every_command_has_help(runner) -> None:
    for command in (["acls"], ["configs"], ["users", "configs"], ["plan"], ["apply"], ["export"], ["check"]):
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, command
        assert "Usage:" in result.stdout

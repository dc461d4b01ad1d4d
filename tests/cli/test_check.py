"""``kafkaguard check``: the decision and the deciding rule, offline from an ACL file with the core authorizer, and
from a running console through ``POST /api/authorize``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kafkaguard.cli.main import app
from kafkaguard.config import SecurityProtocol
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle

ACLS = """\
principals:
  User:alice:
    consumer:
      topics: [orders]
      groups: [billing]
  User:*:
    acls:
      - topic: orders
        operations: [Write]
        permission: deny
        hosts: ["10.0.0.66"]
"""


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "acls.yaml"
    path.write_text(ACLS, "utf-8")
    return path


def check(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(app, ["check", *args])


def test_allowed_by_a_matching_acl(runner, acl_file) -> None:
    result = check(
        runner,
        "--principal",
        "User:alice",
        "--host",
        "10.0.0.1",
        "--operation",
        "READ",
        "--topic",
        "orders",
        "--acls",
        str(acl_file),
    )
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert first.startswith("ALLOWED by MatchingAcl(acl=(pattern=Topic:LITERAL:orders, entry=(principal=User:alice")
    assert second.startswith("ALLOWED: User:alice from 10.0.0.1 READ on Topic:LITERAL:orders, because ACL acls.yaml#")


def test_denied_by_default_and_by_deny(runner, acl_file) -> None:
    bob = check(runner, "--principal", "User:bob", "--operation", "Read", "--topic", "orders", "--acls", str(acl_file))
    assert bob.exit_code == 1
    assert bob.stdout.startswith("DENIED by DefaultDeny\n")
    denied = check(
        runner,
        "--principal",
        "User:alice",
        "--host",
        "10.0.0.66",
        "--operation",
        "Write",
        "--topic",
        "orders",
        "--acls",
        str(acl_file),
        "--json",
    )
    assert denied.exit_code == 1
    answer = json.loads(denied.stdout)
    assert answer["decision"] == "DENIED"
    assert "permissionType=DENY" in answer["rule"]
    nobody = check(
        runner,
        "--principal",
        "User:bob",
        "--operation",
        "Read",
        "--topic",
        "other",
        "--acls",
        str(acl_file),
        "--allow-everyone-if-no-acl-found",
    )
    assert nobody.exit_code == 0
    assert nobody.stdout.startswith("ALLOWED by DefaultAllow\n")
    admin = check(
        runner,
        "--principal",
        "User:admin",
        "--operation",
        "Alter",
        "--cluster",
        "--acls",
        str(acl_file),
        "--super-users",
        "User:admin",
    )
    assert admin.stdout.startswith("ALLOWED by SuperUser\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--principal", "alice", "--operation", "Read", "--topic", "t"), "Invalid principal"),
        (("--principal", "User:a", "--operation", "Reed", "--topic", "t"), "'Reed' is not a valid"),
        (("--principal", "User:a", "--operation", "Read"), "name exactly one resource"),
        (("--principal", "User:a", "--operation", "Read", "--topic", "t"), "give either --acls FILE"),
    ],
)
def test_usage_errors(runner, args, message) -> None:
    result = check(runner, *args)
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.fixture(scope="module")
def console_url(server: ServerHandle) -> Iterator[str]:
    """The REST console on the test server's own event loop, sharing its services."""
    from kafkaguard.console.app import create_app
    from kafkaguard.console.runner import ConsoleServer, HttpListener

    console = ConsoleServer(create_app(server.services), HttpListener("127.0.0.1", 0))
    server.run(console.start())
    try:
        yield console.url
    finally:
        server.run(console.stop())


@pytest.mark.integration
def test_asks_a_running_console(runner, server: ServerHandle, console_url, bootstrap, admin_config, tmp_path) -> None:
    assert bootstrap == server.bootstrap(SecurityProtocol.SASL_PLAINTEXT)
    applied = runner.invoke(
        app,
        ["apply", "--bootstrap-server", bootstrap, "--command-config", str(admin_config), "-f", str(_write(tmp_path))],
    )
    assert applied.exit_code == 0, applied.output
    args = [
        "--principal",
        "User:alice",
        "--host",
        "10.0.0.1",
        "--operation",
        "READ",
        "--topic",
        "orders",
        "--console-url",
        console_url,
        "--user",
        ADMIN,
    ]
    allowed = check(runner, *args, "--password", ADMIN_PASSWORD)
    assert allowed.exit_code == 0, allowed.output
    assert allowed.stdout.startswith("ALLOWED by MatchingAcl(")
    prompted = runner.invoke(app, ["check", *args], input=f"{ADMIN_PASSWORD}\n")
    assert prompted.exit_code == 0, prompted.output
    wrong = check(runner, *args, "--password", "wrong")
    assert wrong.exit_code == 2
    assert "the console answered 401" in wrong.stderr
    gone = check(runner, *args[:-4], "--console-url", "http://127.0.0.1:1", "--user", ADMIN, "--password", "x")
    assert gone.exit_code == 2
    assert "cannot ask the console" in gone.stderr


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "acls.yaml"
    path.write_text(ACLS, "utf-8")
    return path


def test_a_login_group_decides_and_the_explanation_says_it_came_with_the_login(runner, tmp_path: Path) -> None:
    path = tmp_path / "groups.yaml"
    path.write_text(
        "principals:\n  Group:payments:\n    consumer:\n      topics: [ledger]\n      groups: [g]\n", "utf-8"
    )
    common = ["--principal", "User:bob", "--operation", "READ", "--topic", "ledger", "--acls", str(path)]
    without = check(runner, *common)
    assert without.exit_code == 1, without.output
    with_group = check(runner, *common, "--login-group", "payments")
    assert with_group.exit_code == 0, with_group.output
    assert "through group Group:payments, which User:bob belongs to (by its login's token)" in with_group.stdout
    online = check(runner, "--principal", "User:bob", "--operation", "READ", "--topic", "ledger",
                   "--console-url", "http://127.0.0.1:1", "--login-group", "payments")  # fmt: skip
    assert online.exit_code == 2
    assert "--login-group is for deciding offline" in online.output

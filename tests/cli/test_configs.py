"""``kafkaguard configs --entity-type users`` (and ``users configs``) against a real server: KIP-554's example
command, kafka-configs.sh's output, the new credentials log in, and kafka-python sees the same state."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner, Result

from kafkaguard.cli.client import CliError
from kafkaguard.cli.configs import parse_add_config
from kafkaguard.cli.main import app
from kafkaguard.scram import ScramMechanism
from tests.cli.conftest import CLI_PASSWORD, CLI_USER, unique, write_properties
from tests.serving import ServerHandle

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]


def run(runner: CliRunner, bootstrap: str, config: Path, *args: str, stdin: str | None = None) -> Result:
    return runner.invoke(
        app,
        ["configs", "--bootstrap-server", bootstrap, "--command-config", str(config), "--entity-type", "users", *args],
        input=stdin,
    )


def logs_in(bootstrap: str, user: str, password: str, mechanism: str) -> bool:
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "logger": __import__("logging").getLogger("rdkafka-test"),
        }
    )
    try:
        admin.describe_cluster(request_timeout=3).result(timeout=5)
    except Exception:  # noqa: BLE001 - any failure means "did not log in"
        return False
    return True


def test_kip_554_example_then_describe(runner, bootstrap, admin_config, server: ServerHandle) -> None:
    name = unique("alice")
    added = run(
        runner,
        bootstrap,
        admin_config,
        "--alter",
        "--entity-name",
        name,
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
    )
    assert added.exit_code == 0, added.output
    assert added.stdout == f"Completed updating config for user {name}.\n"
    described = run(runner, bootstrap, admin_config, "--describe", "--entity-name", name)
    assert described.exit_code == 0, described.output
    assert described.stdout == (
        f"SCRAM credential configs for user-principal '{name}' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=8192\n"  # the default (kafkaguard.scram.DEFAULT_ITERATIONS)
    )
    # The server's own store agrees (the second opinion), and the password works for both mechanisms.
    stored = {c.mechanism: c.iterations for c in server.services.credentials.describe([name])[0].credentials}
    assert stored == {ScramMechanism.SCRAM_SHA_256: 8192, ScramMechanism.SCRAM_SHA_512: 8192}
    assert logs_in(bootstrap, name, "alice-secret", "SCRAM-SHA-256")
    assert logs_in(bootstrap, name, "alice-secret", "SCRAM-SHA-512")
    assert not logs_in(bootstrap, name, "wrong", "SCRAM-SHA-512")

    deleted = run(runner, bootstrap, admin_config, "--alter", "--entity-name", name, "--delete-config", "SCRAM-SHA-512")
    assert deleted.exit_code == 0, deleted.output
    after = run(runner, bootstrap, admin_config, "--describe", "--entity-name", name)
    assert after.stdout == f"SCRAM credential configs for user-principal '{name}' are SCRAM-SHA-256=iterations=8192\n"


def test_password_from_prompt_or_file(runner, bootstrap, admin_config, tmp_path) -> None:
    prompted = unique("bob")
    result = runner.invoke(
        app,
        [
            "users",
            "configs",
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            str(admin_config),
            "--alter",
            "--entity-name",
            prompted,
            "--add-config",
            "SCRAM-SHA-512=[iterations=4096]",
        ],
        input="bob-secret\nbob-secret\n",
    )
    assert result.exit_code == 0, result.output
    assert "bob-secret" not in result.stdout  # hidden input is not echoed
    assert logs_in(bootstrap, prompted, "bob-secret", "SCRAM-SHA-512")
    from_file = unique("carol")
    secret = tmp_path / "password"
    secret.write_text("carol-secret\n", "utf-8")
    result = run(
        runner,
        bootstrap,
        admin_config,
        "--alter",
        "--user",
        from_file,
        "--add-config",
        "SCRAM-SHA-256=[iterations=4096]",
        "--password-file",
        str(secret),
    )
    assert result.exit_code == 0, result.output
    assert logs_in(bootstrap, from_file, "carol-secret", "SCRAM-SHA-256")


def test_describe_missing_user_and_server_refusals(runner, bootstrap, admin_config) -> None:
    missing = run(runner, bootstrap, admin_config, "--describe", "--entity-name", "nobody-here")
    assert missing.exit_code == 1
    assert missing.stdout.startswith(
        "Error retrieving SCRAM credential configs for user-principal 'nobody-here': ResourceNotFoundException: "
    )
    few = run(
        runner,
        bootstrap,
        admin_config,
        "--alter",
        "--entity-name",
        "x",
        "--add-config",
        "SCRAM-SHA-256=[iterations=100,password=p]",
    )
    assert few.exit_code == 2
    assert "Too few iterations" in few.stderr


def test_unauthorized_describe_fails_cleanly_instead_of_crashing(runner, bootstrap, server, tmp_path) -> None:
    # librdkafka 2.16 aborts the process on this answer; the CLI must ask for its rights first.
    server.add_user(CLI_USER, CLI_PASSWORD)
    config = write_properties(tmp_path / "op.properties", CLI_USER, CLI_PASSWORD)
    result = run(runner, bootstrap, config, "--describe")
    assert result.exit_code == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in result.stderr
    altered = run(
        runner, bootstrap, config, "--alter", "--entity-name", "eve", "--add-config", "SCRAM-SHA-256=[password=p]"
    )
    assert altered.exit_code == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in altered.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("consumer_byte_rate=1024", "not a user config"),
        ("SCRAM-SHA-256=iterations=8192", "expected SCRAM-SHA-256=[iterations=N,password=SECRET]"),
        ("SCRAM-SHA-256=[salt=abc]", "expected iterations=N and/or password=SECRET"),
        ("SCRAM-SHA-256=[iterations=many]", "iterations must be a number"),
    ],
)
def test_add_config_errors(text, message) -> None:
    with pytest.raises(CliError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_add_config(text)


def test_add_config_splits_mechanisms_only_outside_brackets() -> None:
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=a=b],SCRAM-SHA-512=[password=x]") == {
        ScramMechanism.SCRAM_SHA_256: (8192, "a=b"),
        ScramMechanism.SCRAM_SHA_512: (8192, "x"),  # kafkaguard.scram.DEFAULT_ITERATIONS
    }
    assert parse_add_config("scram-sha-512=[iterations=16384]") == {ScramMechanism.SCRAM_SHA_512: (16384, None)}

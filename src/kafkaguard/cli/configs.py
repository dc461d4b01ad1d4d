"""``kafkaguard configs --entity-type users``: SCRAM credentials as kafka-configs.sh --bootstrap-server manages them
(KIP-554), over confluent-kafka's AdminClient — for kafkaguard and any Apache Kafka cluster::

    kafkaguard configs --bootstrap-server HOST:PORT --command-config admin.properties --alter \\
        --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    kafkaguard configs ... --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    kafkaguard configs ... --describe --entity-type users [--entity-name alice]

Also reachable as ``kafkaguard users configs ...`` (same options). The password never crosses the wire: the client
salts it and sends only (salt, SaltedPassword). It can come from ``--add-config``, from ``--password-file`` or from
a prompt when ``--add-config`` names a mechanism without ``password=``.

Each request alters at most one mechanism per user: a KRaft controller refuses two alterations of the same user in
one request (DUPLICATE_RESOURCE), so ``SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]`` is sent as two requests.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.cli.client import DEFAULT_TIMEOUT, CliError, Failure, KafkaAdmin
from kafkaguard.cli.connection import BootstrapServer, CommandConfig, Timeout, connect
from kafkaguard.cli.output import fail
from kafkaguard.errors import ScramError
from kafkaguard.scram import DEFAULT_ITERATIONS, DEFAULT_SALT_BYTES, ScramMechanism, check_iterations

_ACTIONS = "Action (exactly one)"
#: Random salt bytes per credential (Kafka's Java client uses a 130-bit random number).
SALT_BYTES = DEFAULT_SALT_BYTES


def parse_add_config(text: str) -> dict[ScramMechanism, tuple[int, str | None]]:
    """``SCRAM-SHA-256=[iterations=8192,password=s],SCRAM-SHA-512=[password=s]`` → mechanism → (iterations,
    password or None). Commas inside ``[...]`` separate a mechanism's settings, as in ConfigCommand.

    :raises CliError: anything that is not a SCRAM mechanism with iterations/password settings.
    """
    out: dict[ScramMechanism, tuple[int, str | None]] = {}
    for part in re.split(r",(?![^\[]*\])", text.strip()):
        if not part.strip():
            continue
        key, equals, value = part.partition("=")
        try:
            mechanism = ScramMechanism.from_name(key)
        except ScramError as e:
            raise CliError(
                f"--add-config: {key.strip()!r} is not a user config this command sets; expected SCRAM-SHA-256 or "
                "SCRAM-SHA-512 (quotas are not supported)",
                exit_code=2,
            ) from e
        value = value.strip()
        if not equals or not (value.startswith("[") and value.endswith("]")):
            raise CliError(f"--add-config: expected {key.strip()}=[iterations=N,password=SECRET]", exit_code=2)
        settings: dict[str, str] = {}
        for item in value[1:-1].split(","):
            name, eq, setting = item.partition("=")
            name = name.strip()
            if not eq or name not in ("iterations", "password"):
                raise CliError(
                    f"--add-config: {item.strip()!r} in {mechanism.mechanism_name}; expected iterations=N and/or "
                    "password=SECRET",
                    exit_code=2,
                )
            settings[name] = setting
        try:
            iterations = int(settings.get("iterations", DEFAULT_ITERATIONS))
        except ValueError as e:
            raise CliError(f"--add-config: iterations must be a number in {mechanism.mechanism_name}", 2) from e
        out[mechanism] = (iterations, settings.get("password"))
    if not out:
        raise CliError("--add-config is empty", exit_code=2)
    return out


def parse_delete_config(text: str) -> list[ScramMechanism]:
    """:raises CliError: a name that is not a SCRAM mechanism."""
    try:
        return [ScramMechanism.from_name(name) for name in text.split(",") if name.strip()]
    except ScramError as e:
        raise CliError(f"--delete-config: {e}", exit_code=2) from e


def configs(
    bootstrap_server: BootstrapServer,
    command_config: CommandConfig = None,
    entity_type: Annotated[str, typer.Option("--entity-type", help="Only 'users' (SCRAM credentials).")] = "users",
    entity_name: Annotated[
        list[str] | None, typer.Option("--entity-name", help="User name (repeatable for --describe).")
    ] = None,
    user: Annotated[list[str] | None, typer.Option("--user", help="Same as --entity-type users --entity-name.")] = None,
    alter: Annotated[
        bool, typer.Option("--alter", help="Add or delete credentials.", rich_help_panel=_ACTIONS)
    ] = False,
    describe: Annotated[
        bool, typer.Option("--describe", help="Show mechanisms and iterations.", rich_help_panel=_ACTIONS)
    ] = False,
    add_config: Annotated[
        str | None,
        typer.Option(
            "--add-config",
            help="'SCRAM-SHA-256=[iterations=8192,password=SECRET],SCRAM-SHA-512=[password=SECRET]'. Leave out "
            "password= to be prompted or to use --password-file. "
            f"iterations: 4096 to 16384, default {DEFAULT_ITERATIONS} (kafka-configs.sh's is 4096).",
        ),
    ] = None,
    delete_config: Annotated[
        str | None,
        typer.Option("--delete-config", help="Mechanisms to delete: 'SCRAM-SHA-512' or both, comma-separated."),
    ] = None,
    password_file: Annotated[
        Path | None,
        typer.Option(
            "--password-file", help="Read the password from this file's first line.", exists=True, dir_okay=False
        ),
    ] = None,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> None:
    """Add, delete or describe users' SCRAM credentials, as kafka-configs.sh --entity-type users does."""
    if entity_type.strip().lower() not in ("users", "user"):
        fail(f"--entity-type {entity_type}: only 'users' is supported (SCRAM credentials)", 2)
    names = [*(entity_name or []), *(user or [])]
    if alter == describe:
        fail("Command must include exactly one action: --alter or --describe", 2)
    try:
        if describe:
            if add_config or delete_config:
                fail("--add-config and --delete-config need --alter, not --describe", 2)
            _describe(connect(bootstrap_server, command_config, timeout), names)
            return
        if len(names) != 1:
            fail("--alter needs exactly one --entity-name", 2)
        if not add_config and not delete_config:
            fail("--alter needs --add-config and/or --delete-config", 2)
        additions = parse_add_config(add_config) if add_config else {}
        deletions = parse_delete_config(delete_config) if delete_config else []
        both = set(additions) & set(deletions)
        if both:
            fail(f"{', '.join(m.mechanism_name for m in both)} is both added and deleted", 2)
        upserts = _with_passwords(names[0], additions, password_file)
        _alter(connect(bootstrap_server, command_config, timeout), names[0], upserts, deletions)
    except CliError as e:
        fail(str(e), e.exit_code)


def _with_passwords(
    name: str, additions: dict[ScramMechanism, tuple[int, str | None]], password_file: Path | None
) -> list[tuple[ScramMechanism, int, str]]:
    shared: str | None = None
    out: list[tuple[ScramMechanism, int, str]] = []
    for mechanism, (iterations, password) in additions.items():
        try:
            check_iterations(mechanism, iterations)
        except ScramError as e:
            fail(f"--add-config {mechanism.mechanism_name}: {e} (allowed: 4096 to 16384)", 2)
        if password is None:
            if shared is None:
                shared = _read_password(name, password_file)
            password = shared
        if not password:
            fail(f"--add-config {mechanism.mechanism_name}: the password must not be empty", 2)
        out.append((mechanism, iterations, password))
    return out


def _read_password(name: str, password_file: Path | None) -> str:
    if password_file is not None:
        try:
            lines = password_file.read_text("utf-8").splitlines()
        except OSError as e:
            fail(f"cannot read --password-file {password_file}: {e.strerror or e}", 2)
        return lines[0] if lines else ""
    return str(typer.prompt(f"Password for user {name}", hide_input=True, confirmation_prompt=True))


def _alter(
    admin: KafkaAdmin, name: str, upserts: list[tuple[ScramMechanism, int, str]], deletions: list[ScramMechanism]
) -> None:
    failures: list[Failure] = []
    # One alteration per request (module docstring); deletions first, like ConfigCommand's order of effects.
    for mechanism in deletions:
        failures += admin.alter_scram([], [(name, mechanism)])
    for mechanism, iterations, password in upserts:
        # A fresh random salt; the client library derives SaltedPassword = Hi(password, salt, iterations) locally.
        salt = secrets.token_bytes(SALT_BYTES)
        failures += admin.alter_scram([(name, mechanism, iterations, password.encode("utf-8"), salt)], [])
    if failures:
        for failure in failures:
            typer.secho(f"error: updating user {name} failed: {failure.error_name}: {failure.message}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"Completed updating config for user {name}.")


def _exception_name(error_name: str) -> str:
    """Kafka's exception class for an error name (RESOURCE_NOT_FOUND → ResourceNotFoundException)."""
    words = error_name.replace("_FAILED", "").split("_")
    return "".join(w.capitalize() for w in words) + "Exception"


def _describe(admin: KafkaAdmin, names: list[str]) -> None:
    """ConfigCommand.describeClientQuotaAndUserScramCredentialConfigs' SCRAM lines."""
    failed = False
    for name, described in admin.describe_scram(names or None).items():
        if isinstance(described, Failure):
            failed = True
            typer.echo(
                f"Error retrieving SCRAM credential configs for user-principal '{name}': "
                f"{_exception_name(described.error_name)}: {described.message}"
            )
            continue
        text = ", ".join(f"{m.mechanism_name}=iterations={i}" for m, i in described)
        typer.echo(f"SCRAM credential configs for user-principal '{name}' are {text}")
    if failed:
        raise typer.Exit(code=1)

"""``kafkaguard groups``: principal groups (kafkaguard's, beyond Kafka). An ACL for ``Group:ops`` applies to every
member of ``ops``. The commands write straight into the store of the data directory (or the PostgreSQL store the
config names), like ``users add``; running servers, proxies and consoles pick the change up within their sync
interval."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.bootstrap import Services, build_services
from kafkaguard.cli.actor import cli_actor
from kafkaguard.cli.output import fail
from kafkaguard.config import SERVED_SETTINGS_FILE, Settings, load_settings, with_served_settings
from kafkaguard.errors import KafkaguardError

app = typer.Typer(no_args_is_help=True, help="Principal groups: Group:NAME in an ACL applies to every member.")

DataDir = Annotated[Path | None, typer.Option(help="Data directory of the server. Default: ./data")]
ConfigFile = Annotated[Path | None, typer.Option(help="YAML config file (data_dir, store).")]
Group = Annotated[str, typer.Argument(help="The group: ops, or Group:ops.")]
Members = Annotated[list[str], typer.Argument(help="Member principals, e.g. User:alice User:bob.")]


@contextmanager
def store_services(
    config: Path | None, data_dir: Path | None, *, as_served: bool = False, quiet: bool = False
) -> Iterator[Services]:
    """The services of the configured store, closed afterwards; any kafkaguard error is one line and exit 2.
    ``as_served``: deciding as the server of that data directory does, with the super users and the no-ACL rule it
    recorded (``served-settings.json``) where the config does not give them; which is said on stderr unless
    ``quiet`` (JSON output)."""
    try:
        settings = load_settings(config, data_dir=data_dir)
        if as_served:
            settings, served_by = with_served_settings(settings)
            if not quiet:
                _say_where_super_users_come_from(settings, served_by)
        services = build_services(settings)
    except KafkaguardError as e:
        fail(str(e), 2)
    try:
        yield services
    except KafkaguardError as e:
        fail(str(e), 2)
    finally:
        services.close()


def _say_where_super_users_come_from(settings: Settings, served_by: str | None) -> None:
    if served_by is not None:
        typer.echo(
            f"(super users and allow_everyone_if_no_acl_found as {served_by} recorded them in "
            f"{settings.data_dir / SERVED_SETTINGS_FILE})",
            err=True,
        )
    elif not settings.super_users:
        typer.echo(
            f"(no super users known: no server has recorded its settings in {settings.data_dir}, and no "
            "--config gives them)",
            err=True,
        )


def _change(config: Path | None, data_dir: Path | None, act: Callable[[Services], str]) -> None:
    with store_services(config, data_dir) as services:
        typer.echo(act(services))


@app.command("add")
def add(group: Group, members: Members, data_dir: DataDir = None, config: ConfigFile = None) -> None:
    """Add principals to a group (creating it)."""

    def act(services: Services) -> str:
        services.groups.add_members(group, members, actor=cli_actor())
        return f"added {', '.join(members)} to {_principal(group)}"

    _change(config, data_dir, act)


@app.command("remove")
def remove(group: Group, members: Members, data_dir: DataDir = None, config: ConfigFile = None) -> None:
    """Remove principals from a group (principals not in it are ignored)."""

    def act(services: Services) -> str:
        services.groups.remove_members(group, members, actor=cli_actor())
        return f"removed {', '.join(members)} from {_principal(group)}"

    _change(config, data_dir, act)


@app.command("delete")
def delete(group: Group, data_dir: DataDir = None, config: ConfigFile = None) -> None:
    """Remove every member of a group (its ACLs stay, and apply to no one until it has members again)."""

    def act(services: Services) -> str:
        removed = services.groups.delete_group(group, actor=cli_actor())
        return f"{_principal(group)} had {len(removed)} member(s); it has none now"

    _change(config, data_dir, act)


@app.command("list")
def list_groups(
    data_dir: DataDir = None,
    config: ConfigFile = None,
    output_json: Annotated[bool, typer.Option("--json", help="Print {group: [members]} as JSON.")] = False,
) -> None:
    """Every group and its members."""
    with store_services(config, data_dir) as services:
        groups = services.groups.groups()
        if output_json:
            typer.echo(json.dumps({f"Group:{g}": list(m) for g, m in groups.items()}, indent=2))
            return
        if not groups:
            typer.echo("no principal groups")
        for group, members in groups.items():
            typer.echo(f"Group:{group}: {', '.join(members)}")


def _principal(group: str) -> str:
    return group if group.startswith("Group:") else f"Group:{group}"

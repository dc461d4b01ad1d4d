"""``kafkaguard users``: SCRAM users. ``users add`` writes straight into the local store (no server needed), which is
how the first admin of a fresh installation is created."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.bootstrap import build_services
from kafkaguard.cli.actor import cli_actor
from kafkaguard.config import load_settings
from kafkaguard.errors import KafkaguardError
from kafkaguard.scram import DEFAULT_ITERATIONS, ScramMechanism

app = typer.Typer(no_args_is_help=True, help="SCRAM users (kafka-configs --entity-type users).")


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="User name (the principal will be User:<name>).")],
    password: Annotated[
        str,
        typer.Option(prompt=True, confirmation_prompt=True, hide_input=True, help="Password (prompted if omitted)."),
    ],
    mechanism: Annotated[
        list[str] | None, typer.Option(help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (repeatable). Default: both.")
    ] = None,
    iterations: Annotated[
        int, typer.Option(min=4096, max=16384, help="PBKDF2 iterations (4096..16384).")
    ] = DEFAULT_ITERATIONS,
    data_dir: Annotated[Path | None, typer.Option(help="Data directory of the server. Default: ./data")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file (for data_dir).")] = None,
) -> None:
    """Create or replace a user's SCRAM credentials in the local store."""
    try:
        mechanisms = [ScramMechanism.from_name(m) for m in mechanism or ["SCRAM-SHA-256", "SCRAM-SHA-512"]]
        services = build_services(load_settings(config, data_dir=data_dir))
    except KafkaguardError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    actor = cli_actor()
    try:
        for chosen in mechanisms:
            error = services.credentials.upsert_password(name, chosen, password, iterations, actor=actor).error
            if error is not None:
                typer.secho(f"error: {error.summary}", fg=typer.colors.RED, err=True)
                raise typer.Exit(code=1)
            typer.echo(f"{chosen} credential stored for User:{name} (iterations={iterations})")
    finally:
        services.close()

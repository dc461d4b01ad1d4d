"""``kafkaguard store``: the store itself. ``store migrate`` copies a store (an SQLite data directory, or a PostgreSQL
store URL) into an empty PostgreSQL database, so that a team can move from one host to several.

Passwords: a PostgreSQL side takes its password from ``--from-password-file`` / ``--to-password-file``, else from
``KAFKAGUARD_STORE_PASSWORD`` or the config's ``store_password_file`` (as every kafkaguard command does); never
from the URL, which is refused if it holds one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.bootstrap import open_postgres_store
from kafkaguard.cli.actor import cli_actor
from kafkaguard.config import Settings, load_settings
from kafkaguard.errors import InvalidConfigError, KafkaguardError
from kafkaguard.store import SqliteStore, Store, StoreUrl, is_store_url
from kafkaguard.store.migration import MigrationTarget, migrate_store
from kafkaguard.store.sqlite import DATABASE_NAME

app = typer.Typer(no_args_is_help=True, help="The store: move between SQLite and PostgreSQL.")


@app.command("migrate")
def migrate(
    source: Annotated[
        str, typer.Option("--from", help="The store to copy: an SQLite data directory, or postgresql://user@host/db.")
    ],
    target: Annotated[str, typer.Option("--to", help="An empty PostgreSQL database: postgresql://user@host:port/db.")],
    from_password_file: Annotated[
        Path | None, typer.Option(help="File holding the source's password (PostgreSQL source only).")
    ] = None,
    to_password_file: Annotated[Path | None, typer.Option(help="File holding the target's password.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file (for store_password_file).")] = None,
) -> None:
    """Copy ACLs (keeping their ids), SCRAM credentials, topics (keeping their ids), client quotas and the cluster id
    into an empty PostgreSQL database, then compare both stores. A target that holds anything is refused."""
    opened: list[Store] = []
    try:
        settings = load_settings(config)
        if not is_store_url(target):
            raise InvalidConfigError(
                f"--to must be a PostgreSQL URL postgresql://user@host:port/database, not {target}"
            )
        target_url = _url(target, settings, to_password_file)  # checked before anything is opened
        source_store = _open_source(source, settings, from_password_file)
        opened.append(source_store)
        cluster_id = source_store.cluster_id()
        target_store = _open_target(target_url, cluster_id)
        opened.append(target_store)
        counts = migrate_store(source_store, target_store, actor=cli_actor("migrate"))
        target_cluster_id = target_store.cluster_id()
    except KafkaguardError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    finally:
        for store in opened:
            store.close()
    typer.echo(f"copied {counts} from {source} to {target_url}; both stores hold the same")
    if target_cluster_id != cluster_id:
        typer.secho(
            f"warning: the target already had cluster id {target_cluster_id} (the source's is {cluster_id}): "
            "Kafka clients will see the target's",
            fg=typer.colors.YELLOW,
            err=True,
        )


def _url(text: str, settings: Settings, password_file: Path | None) -> StoreUrl:
    """``text`` with its password: from ``password_file``, else from the settings (environment, config file)."""
    if password_file is not None:
        try:
            password: str | None = password_file.read_text().rstrip("\r\n")
        except OSError as e:
            raise InvalidConfigError(f"password file {password_file} cannot be read: {e.strerror}") from None
    else:
        url = settings.model_copy(update={"store": text}).store_url
        password = url.password if url is not None else None
    return StoreUrl.parse(text, password=password)


def _open_source(text: str, settings: Settings, password_file: Path | None) -> Store:
    if is_store_url(text):
        return open_postgres_store(_url(text, settings, password_file))
    database = Path(text) / DATABASE_NAME
    if not database.is_file():
        raise InvalidConfigError(f"--from {text}: no kafkaguard database {database} there")
    return SqliteStore(database)


def _open_target(url: StoreUrl, cluster_id: str) -> MigrationTarget:
    """The target, which takes the source's cluster id unless it already has one (Kafka clients check it)."""
    from kafkaguard.store.postgres import PostgresStore

    return PostgresStore(url, cluster_id_factory=lambda: cluster_id)

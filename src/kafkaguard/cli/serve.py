"""``kafkaguard serve``: the Kafka-protocol server on the embedded SQLite store.

Every flag is also a config-file key and a ``KAFKAGUARD_*`` environment variable (flags win, then the
environment, then the file); see ``kafkaguard.config``.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.config import load_settings
from kafkaguard.errors import KafkaguardError


def serve(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (SQLite database). Default: ./data")] = None,
    listener: Annotated[
        list[str] | None,
        typer.Option(
            help="PROTOCOL://host:port, repeatable (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL). "
            "Default: SASL_PLAINTEXT://127.0.0.1:9092"
        ),
    ] = None,
    super_users: Annotated[str | None, typer.Option(help="Super users, e.g. 'User:admin;User:ops'.")] = None,
    allow_everyone_if_no_acl_found: Annotated[
        bool | None, typer.Option("--allow-everyone-if-no-acl-found", help="Kafka's setting (default: deny).")
    ] = None,
    auto_create_topics: Annotated[
        bool | None, typer.Option("--auto-create-topics", help="Create missing topics on Metadata (AUTO_CREATE).")
    ] = None,
    advertised_host: Annotated[str | None, typer.Option(help="Host name clients should connect to.")] = None,
    audit_log: Annotated[
        Path | None, typer.Option(help="Write authorization decisions to this JSON-lines file.")
    ] = None,
    audit_mode: Annotated[str | None, typer.Option(help="'denied' (default) or 'all'.")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(help="PEM certificate chain for SASL_SSL.")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="PEM private key for SASL_SSL.")] = None,
    http_listener: Annotated[str | None, typer.Option(help="host:port for the REST console (off by default).")] = None,
    trusted_proxies: Annotated[
        list[str] | None,
        typer.Option(
            help="CIDR of a proxy whose X-Forwarded-For the console believes, repeatable or comma-separated "
            "(default: none; the client is the socket's peer)."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file; its keys are these flags' names.")] = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
) -> None:
    """Run the Kafka-protocol server: ACLs, SCRAM users and topics for real Kafka clients."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings(
            config,
            data_dir=data_dir,
            listeners=listener or None,
            super_users=super_users,
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            auto_create_topics=auto_create_topics,
            advertised_host=advertised_host,
            audit_log=audit_log,
            audit_mode=audit_mode,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            http_listener=http_listener,
            trusted_proxies=trusted_proxies or None,
        )
        if settings.http_listener is not None:  # the Kafka server and the console in one event loop
            from kafkaguard.cli.console import serve_with_console

            asyncio.run(serve_with_console(settings))
            return
        from kafkaguard.server.app import serve as run_server  # the server extra is imported only to serve

        asyncio.run(run_server(settings))
    except KafkaguardError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None

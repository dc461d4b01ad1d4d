"""The options the long-running commands share (``serve``, ``proxy``, ``console``), declared once, and the one way
they start: logging, settings (flags, then ``KAFKAGUARD_*``, then the YAML file), run, and errors as one line.

Every option is also a config-file key and a ``KAFKAGUARD_*`` environment variable (see ``kafkaguard.config``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer

from kafkaguard.config import Settings
from kafkaguard.errors import KafkaguardError

DataDir = Annotated[Path | None, typer.Option(help="Data directory (SQLite database). Default: ./data")]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="A PostgreSQL store shared by several nodes, postgresql://user@host:port/database (password from "
        "KAFKAGUARD_STORE_PASSWORD or store_password_file, never in the URL). Default: SQLite in the data directory.",
    ),
]
Listeners = Annotated[
    list[str] | None,
    typer.Option(
        "--listener",
        help="PROTOCOL://host:port, repeatable (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL). "
        "Default: SASL_PLAINTEXT://127.0.0.1:9092",
    ),
]
SuperUsers = Annotated[str | None, typer.Option(help="Super users, e.g. 'User:admin;User:ops'.")]
AllowEveryone = Annotated[
    bool | None, typer.Option("--allow-everyone-if-no-acl-found", help="Kafka's setting (default: deny).")
]
AdvertisedHost = Annotated[str | None, typer.Option(help="Host name clients should connect to.")]
AuditLog = Annotated[Path | None, typer.Option(help="Write authorization decisions to this JSON-lines file.")]
AuditMode = Annotated[str | None, typer.Option(help="'denied' (default) or 'all'.")]
SslCertfile = Annotated[Path | None, typer.Option(help="PEM certificate chain for SASL_SSL.")]
SslKeyfile = Annotated[Path | None, typer.Option(help="PEM private key for SASL_SSL.")]
HttpListener = Annotated[str | None, typer.Option(help="host:port for the REST console (off by default).")]
TrustedProxies = Annotated[
    list[str] | None,
    typer.Option(
        help="CIDR of a proxy whose X-Forwarded-For the console believes, repeatable or comma-separated "
        "(default: none; the client is the socket's peer)."
    ),
]
MaxConnectionsPerIp = Annotated[
    int | None,
    typer.Option(help="Connections one client address may hold, all listeners together (Kafka's "
                 "max.connections.per.ip). Default: 500."),
]  # fmt: skip
MaxConnectionsPerIpOverrides = Annotated[
    str | None,
    typer.Option(help="Other limits per address or CIDR block, address:count,CIDR:count "
                 "(Kafka's max.connections.per.ip.overrides), e.g. 10.0.0.7:2000,10.1.0.0/16:50."),
]  # fmt: skip
MaxConnectionsPerListener = Annotated[
    list[str] | None,
    typer.Option(help="LISTENER=count, repeatable (Kafka's listener.name.X.max.connections), e.g. "
                 "SASL_SSL://0.0.0.0:9093=8000. Default: only the global max_connections."),
]  # fmt: skip
ConfigFile = Annotated[Path | None, typer.Option(help="YAML config file; its keys are these flags' names.")]
LogLevel = Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")]


def run_service(
    log_level: str, settings: Callable[[], Settings], run: Callable[[Settings], Coroutine[Any, Any, None]]
) -> None:
    """Log at ``log_level``, load the settings, run until signalled; a ``KafkaguardError`` is one red line and
    exit code 2, Ctrl-C exit code 130."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # psycopg's pool warns at every failed reconnection attempt (every second while PostgreSQL is down); the store
    # logs an outage once when it starts and once when it ends.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    try:
        asyncio.run(run(settings()))
    except KafkaguardError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None

"""The connection options every remote command shares (kafka-acls.sh's names) and the admin they build."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.cli.client import DEFAULT_TIMEOUT, KafkaAdmin, client_config, load_properties
from kafkaguard.cli.output import fail

BootstrapServer = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        help="host1:port1,host2:port2,... of the Kafka cluster (kafkaguard or Apache Kafka).",
        envvar="KAFKAGUARD_BOOTSTRAP_SERVER",
        show_envvar=True,
    ),
]
#: ``--bootstrap-server`` of a command group whose subcommands may not need it (``acls`` and ``acls history``).
OptionalBootstrapServer = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        help="host1:port1,host2:port2,... of the Kafka cluster (kafkaguard or Apache Kafka).",
        envvar="KAFKAGUARD_BOOTSTRAP_SERVER",
        show_envvar=True,
    ),
]
CommandConfig = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        help="Client properties file as for kafka-acls.sh: security.protocol, sasl.mechanism, sasl.jaas.config "
        "(ScramLoginModule username/password) or sasl.username/sasl.password, ssl.truststore.location "
        "(PEM) or ssl.ca.location.",
        exists=True,
        dir_okay=False,
        readable=True,
        envvar="KAFKAGUARD_COMMAND_CONFIG",
        show_envvar=True,
    ),
]
Timeout = Annotated[float, typer.Option("--timeout", min=1, help="Seconds to wait for each answer.")]


def require_bootstrap(bootstrap_server: str) -> str:
    """``--bootstrap-server`` of a command whose first argument is a file (so the option has an empty default,
    to keep the argument first): a clear error (exit 2) when neither the flag nor the variable gives it."""
    if not bootstrap_server.strip():
        fail("no cluster: give --bootstrap-server HOST:PORT (or set KAFKAGUARD_BOOTSTRAP_SERVER)", 2)
    return bootstrap_server


def connect(
    bootstrap_server: str,
    command_config: Path | None,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    client_id: str | None = None,
) -> KafkaAdmin:
    """``client_id``: the client id the command announces unless ``--command-config`` sets ``client.id``; a
    management event made through Kafka carries it in its request id (``kafkaguard-apply/17``), which tells the
    history which command made the change.

    :raises CliError: unreadable properties or a configuration librdkafka refuses."""
    properties = load_properties(command_config) if command_config is not None else {}
    config = client_config(bootstrap_server, properties)
    if client_id is not None:
        config.setdefault("client.id", client_id)
    return KafkaAdmin(config, timeout)

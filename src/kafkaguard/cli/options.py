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
from kafkaguard.protocol.repeated_lines import collapse_repeats

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
        help="PROTOCOL://host:port, repeatable (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). "
        "Default: SASL_PLAINTEXT://127.0.0.1:9092",
    ),
]
SuperUsers = Annotated[str | None, typer.Option(help="Super users, e.g. 'User:admin;User:ops'.")]
AllowEveryone = Annotated[
    bool | None, typer.Option("--allow-everyone-if-no-acl-found", help="Kafka's setting (default: deny).")
]
AdvertisedHost = Annotated[str | None, typer.Option(help="Host name clients should connect to.")]
AuditLog = Annotated[Path | None, typer.Option(help="Write authorization decisions to this JSON-lines file.")]
AuditMode = Annotated[
    str | None,
    typer.Option(
        help="'usage' (default: allowed decisions counted per access and window, repeated denials collapsed), "
        "'denied' or 'all'."
    ),
]
AuditUsageWindow = Annotated[
    float | None,
    typer.Option(help="With --audit-mode usage: seconds per window in which decisions are counted (default 60)."),
]
AuditKafkaBootstrapServers = Annotated[
    str | None,
    typer.Option(
        help="Also send the audit trail to Kafka: host:port[,host:port...] of any cluster, or 'upstream' (the "
        "proxy's). Security, routes and the spool: audit_kafka_* and audit_spool_* in the config file."
    ),
]
AuditKafkaTopic = Annotated[
    str | None, typer.Option(help="The audit topic (default kafkaguard-audit-log-events): where unrouted events go.")
]
SslCertfile = Annotated[Path | None, typer.Option(help="PEM certificate chain for SSL and SASL_SSL listeners.")]
SslKeyfile = Annotated[Path | None, typer.Option(help="PEM private key for SSL and SASL_SSL listeners.")]
HttpListener = Annotated[str | None, typer.Option(help="host:port for the REST console (off by default).")]
TrustedProxies = Annotated[
    list[str] | None,
    typer.Option(
        help="CIDR of a proxy whose X-Forwarded-For the console believes, repeatable or comma-separated "
        "(default: none; the client is the socket's peer)."
    ),
]
ShutdownGraceSeconds = Annotated[
    float | None,
    typer.Option(
        help="On SIGTERM: how long the drain may take (in-flight requests answered, idle connections closed) "
        "before what is still open is closed. Default: 30."
    ),
]
MaxConnectionsPerIp = Annotated[
    int | None,
    typer.Option(
        help="Connections one client address may hold, all listeners together (Kafka's "
        "max.connections.per.ip). Default: 500."
    ),
]
MaxConnectionsPerIpOverrides = Annotated[
    str | None,
    typer.Option(
        help="Other limits per address or CIDR block, address:count,CIDR:count "
        "(Kafka's max.connections.per.ip.overrides), e.g. 10.0.0.7:2000,10.1.0.0/16:50."
    ),
]
MaxConnectionsPerListener = Annotated[
    list[str] | None,
    typer.Option(
        help="LISTENER=count, repeatable (Kafka's listener.name.X.max.connections), e.g. "
        "SASL_SSL://0.0.0.0:9093=8000. Default: only the global max_connections."
    ),
]
# Identity (how clients log in): the names of Kafka's settings where Kafka has one. Secrets (key passwords) come
# from KAFKAGUARD_* variables or files only, never a flag.
SslKeyfilePasswordFile = Annotated[
    Path | None, typer.Option(help="File with the TLS key's password (or KAFKAGUARD_SSL_KEYFILE_PASSWORD).")
]
SslClientAuth = Annotated[
    str | None,
    typer.Option(help="Kafka's ssl.client.auth on SSL/SASL_SSL listeners: none (default), requested or required."),
]
SaslSslClientAuth = Annotated[
    str | None,
    typer.Option(help="The same on SASL_SSL listeners (the SASL login names the principal): none (default)."),
]
SslCafile = Annotated[Path | None, typer.Option(help="PEM bundle of the CAs that sign client certificates.")]
SslCrlfile = Annotated[Path | None, typer.Option(help="PEM revocation list(s) for client certificates.")]
SslPrincipalMappingRules = Annotated[
    str | None,
    typer.Option(help="Kafka's ssl.principal.mapping.rules, e.g. 'RULE:^CN=([^,]*),.*$/$1/L,DEFAULT'."),
]
SaslMechanisms = Annotated[
    list[str] | None,
    typer.Option(
        "--sasl-mechanism",
        help="SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER or GSSAPI, repeatable. Default: both SCRAM mechanisms.",
    ),
]
SaslPlainWithoutTls = Annotated[
    bool | None, typer.Option("--sasl-plain-without-tls", help="Offer PLAIN on SASL_PLAINTEXT listeners too.")
]
JwksUrl = Annotated[
    str | None, typer.Option(help="Kafka's sasl.oauthbearer.jwks.endpoint.url: https://… or file:/path.")
]
JwksRefreshMs = Annotated[int | None, typer.Option(help="How often the JWKS is read again, in ms (default 3600000).")]
JwksCafile = Annotated[Path | None, typer.Option(help="PEM CA bundle for an https JWKS endpoint.")]
ExpectedAudience = Annotated[
    list[str] | None, typer.Option(help="Kafka's sasl.oauthbearer.expected.audience, repeatable.")
]
ExpectedIssuer = Annotated[str | None, typer.Option(help="Kafka's sasl.oauthbearer.expected.issuer.")]
SubClaimName = Annotated[str | None, typer.Option(help="Kafka's sasl.oauthbearer.sub.claim.name (default sub).")]
ScopeClaimName = Annotated[str | None, typer.Option(help="Kafka's sasl.oauthbearer.scope.claim.name (default scope).")]
ClockSkewSeconds = Annotated[int | None, typer.Option(help="Kafka's sasl.oauthbearer.clock.skew.seconds (default 30).")]
GroupsClaimName = Annotated[
    str | None,
    typer.Option(help="Claim (or dotted path, e.g. realm_access.roles) holding a token's groups: Group:NAME."),
]
ProxyProtocol = Annotated[
    str | None,
    typer.Option(
        help="PROXY protocol v1/v2 on the Kafka listeners: off (default), optional or required; "
        "believed only from trusted_proxies."
    ),
]
#: The identity flags' settings: ``identity_settings(locals())`` passes them on.
IDENTITY = (
    "ssl_keyfile_password_file",
    "ssl_client_auth",
    "sasl_ssl_client_auth",
    "ssl_cafile",
    "ssl_crlfile",
    "ssl_principal_mapping_rules",
    "sasl_mechanisms",
    "sasl_plain_without_tls",
    "sasl_oauthbearer_jwks_endpoint_url",
    "sasl_oauthbearer_jwks_endpoint_refresh_ms",
    "sasl_oauthbearer_jwks_endpoint_cafile",
    "sasl_oauthbearer_expected_audience",
    "sasl_oauthbearer_expected_issuer",
    "sasl_oauthbearer_sub_claim_name",
    "sasl_oauthbearer_scope_claim_name",
    "sasl_oauthbearer_clock_skew_seconds",
    "sasl_oauthbearer_groups_claim_name",
    "proxy_protocol",
)


def identity_settings(flags: dict[str, Any]) -> dict[str, Any]:
    """The identity flags given (an empty repeatable flag counts as not given)."""
    return {name: flags[name] or None if isinstance(flags[name], list) else flags[name] for name in IDENTITY}


ConfigFile = Annotated[Path | None, typer.Option(help="YAML config file; its keys are these flags' names.")]
LogLevel = Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")]
Workers = Annotated[
    str | None,
    typer.Option(
        help="Processes serving this node, sharing every port (SO_REUSEPORT) under a supervisor that restarts one "
        "that dies: a number, or auto (one per core). Default 1."
    ),
]
#: How long the supervisor gives its workers to drain on SIGTERM when the settings name no
#: ``shutdown_grace_seconds`` (the drain's setting), before the margin and SIGKILL.
DEFAULT_GRACE_SECONDS = 30.0


def run_service(
    log_level: str,
    settings: Callable[[], Settings],
    run: Callable[[Settings], Coroutine[Any, Any, None]],
    *,
    supervised: bool = False,
) -> None:
    """Log at ``log_level``, load the settings, run until signalled; a ``KafkaguardError`` is one red line and
    exit code 2, Ctrl-C exit code 130. With ``supervised`` (``serve``, ``proxy``) and ``workers`` above 1, this
    process is the supervisor of that many workers, each this command again (``node.workers``); a worker's log
    lines say ``worker=N``."""
    from kafkaguard.node.workers import worker_number

    number = worker_number()
    role = "" if number is None else f"worker={number} "
    logging.basicConfig(level=log_level.upper(), format=f"%(asctime)s %(levelname)s {role}%(name)s: %(message)s")
    # psycopg's pool warns at every failed reconnection attempt (every second while PostgreSQL is down); the store
    # logs an outage once when it starts and once when it ends.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    repeats = collapse_repeats()  # a client retrying a failing login writes one line a minute, with its count
    try:
        loaded = settings()
        if loaded.log_level is not None:  # the config file's (or KAFKAGUARD_LOG_LEVEL's) wins over the flag
            logging.getLogger().setLevel(loaded.log_level)
        if supervised and loaded.workers > 1 and number is None:
            from kafkaguard.node.workers import supervise

            # the drain's setting where it exists; a plain float either way
            grace = float(getattr(loaded, "shutdown_grace_seconds", DEFAULT_GRACE_SECONDS))
            code = supervise(loaded, grace_seconds=grace)
            if code:
                raise typer.Exit(code=code)
            return
        asyncio.run(run(loaded))
    except KafkaguardError as e:
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None
    finally:
        for repeated in repeats:
            repeated.flush()

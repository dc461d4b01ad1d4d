"""``kafkaguard serve``: the Kafka-protocol server on the embedded SQLite store, or a shared PostgreSQL (``--store``).

Every flag is also a config-file key and a ``KAFKAGUARD_*`` environment variable (flags win, then the
environment, then the file); see ``kafkaguard.config``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from kafkaguard.cli import options as o
from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.config import Settings, load_settings


async def _run(settings: Settings, *, reload_settings: Callable[[], Settings]) -> None:
    # the server extra is imported only to serve
    from kafkaguard.server.app import KafkaServer

    server_type = functools.partial(KafkaServer, shadow_loader=load_acl_file)
    if settings.http_listener is not None:  # the Kafka server and the console in one event loop
        from kafkaguard.cli.console import serve_with_console

        await serve_with_console(settings, server_type, reload_settings=reload_settings)
        return
    from kafkaguard.node.listening import serve as run_server

    await run_server(settings, server_type, reload_settings=reload_settings)  # SIGHUP: the live settings again


def serve(
    data_dir: o.DataDir = None,
    store: o.StoreOption = None,
    listener: o.Listeners = None,
    super_users: o.SuperUsers = None,
    allow_everyone_if_no_acl_found: o.AllowEveryone = None,
    auto_create_topics: Annotated[
        bool | None, typer.Option("--auto-create-topics", help="Create missing topics on Metadata (AUTO_CREATE).")
    ] = None,
    advertised_host: o.AdvertisedHost = None,
    audit_log: o.AuditLog = None,
    audit_mode: o.AuditMode = None,
    audit_usage_window_seconds: o.AuditUsageWindow = None,
    audit_kafka_bootstrap_servers: o.AuditKafkaBootstrapServers = None,
    audit_kafka_topic: o.AuditKafkaTopic = None,
    shadow_acls: Annotated[
        Path | None,
        typer.Option(help="A candidate ACL file (apply's format) decided beside the active ACLs; flips are audited."),
    ] = None,
    ssl_certfile: o.SslCertfile = None,
    ssl_keyfile: o.SslKeyfile = None,
    ssl_keyfile_password_file: o.SslKeyfilePasswordFile = None,
    ssl_client_auth: o.SslClientAuth = None,
    sasl_ssl_client_auth: o.SaslSslClientAuth = None,
    ssl_cafile: o.SslCafile = None,
    ssl_crlfile: o.SslCrlfile = None,
    ssl_principal_mapping_rules: o.SslPrincipalMappingRules = None,
    sasl_mechanisms: o.SaslMechanisms = None,
    sasl_plain_without_tls: o.SaslPlainWithoutTls = None,
    sasl_oauthbearer_jwks_endpoint_url: o.JwksUrl = None,
    sasl_oauthbearer_jwks_endpoint_refresh_ms: o.JwksRefreshMs = None,
    sasl_oauthbearer_jwks_endpoint_cafile: o.JwksCafile = None,
    sasl_oauthbearer_expected_audience: o.ExpectedAudience = None,
    sasl_oauthbearer_expected_issuer: o.ExpectedIssuer = None,
    sasl_oauthbearer_sub_claim_name: o.SubClaimName = None,
    sasl_oauthbearer_scope_claim_name: o.ScopeClaimName = None,
    sasl_oauthbearer_clock_skew_seconds: o.ClockSkewSeconds = None,
    sasl_oauthbearer_groups_claim_name: o.GroupsClaimName = None,
    proxy_protocol: o.ProxyProtocol = None,
    http_listener: o.HttpListener = None,
    trusted_proxies: o.TrustedProxies = None,
    max_connections_per_ip: o.MaxConnectionsPerIp = None,
    shutdown_grace_seconds: o.ShutdownGraceSeconds = None,
    max_connections_per_ip_overrides: o.MaxConnectionsPerIpOverrides = None,
    max_connections_per_listener: o.MaxConnectionsPerListener = None,
    workers: o.Workers = None,
    config: o.ConfigFile = None,
    log_level: o.LogLevel = "INFO",
) -> None:
    """Run the Kafka-protocol server: ACLs, SCRAM users and topics for real Kafka clients."""
    identity = o.identity_settings(locals())

    def settings() -> Settings:
        return load_settings(
            config,
            **identity,
            data_dir=data_dir,
            store=store,
            listeners=listener or None,
            super_users=super_users,
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            auto_create_topics=auto_create_topics,
            advertised_host=advertised_host,
            audit_log=audit_log,
            audit_mode=audit_mode,
            audit_usage_window_seconds=audit_usage_window_seconds,
            audit_kafka_bootstrap_servers=audit_kafka_bootstrap_servers,
            audit_kafka_topic=audit_kafka_topic,
            shadow_acls=shadow_acls,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            http_listener=http_listener,
            trusted_proxies=trusted_proxies or None,
            max_connections_per_ip=max_connections_per_ip,
            shutdown_grace_seconds=shutdown_grace_seconds,
            max_connections_per_ip_overrides=max_connections_per_ip_overrides,
            max_connections_per_listener=max_connections_per_listener or None,
            workers=workers,
        )

    o.run_service(log_level, settings, functools.partial(_run, reload_settings=settings), supervised=True)

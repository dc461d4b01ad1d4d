"""``kafkaguard proxy``: kafkaguard's ACLs, SCRAM users and audit log enforced on real traffic, in front of any
Kafka cluster (see ``kafkaguard.proxy``).

Every flag is also a config-file key and a ``KAFKAGUARD_*`` environment variable; the service user's password comes
from ``KAFKAGUARD_UPSTREAM_PASSWORD`` or ``--upstream-password-file``, never a flag (it would show in ``ps``), as do
the OAuth client secret and the client key's password (``KAFKAGUARD_UPSTREAM_SASL_OAUTHBEARER_CLIENT_SECRET``,
``KAFKAGUARD_UPSTREAM_SSL_KEYFILE_PASSWORD`` or their ``…_file`` flags).
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
    from kafkaguard.proxy.app import ProxyServer  # the server extra, imported only to serve

    server_type = functools.partial(ProxyServer, shadow_loader=load_acl_file)
    if settings.http_listener is not None:
        from kafkaguard.cli.console import serve_with_console

        await serve_with_console(settings, server_type, reload_settings=reload_settings)
        return
    from kafkaguard.node.listening import serve as run_server

    await run_server(settings, server_type, reload_settings=reload_settings)  # SIGHUP: the live settings again


def proxy(
    upstream: Annotated[
        str | None, typer.Option(help="The upstream cluster's bootstrap servers, host:port[,host:port...].")
    ] = None,
    upstream_security_protocol: Annotated[
        str | None, typer.Option(help="PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL towards the upstream.")
    ] = None,
    upstream_sasl_mechanism: Annotated[
        str | None, typer.Option(help="SCRAM-SHA-512 (default), SCRAM-SHA-256 or OAUTHBEARER.")
    ] = None,
    upstream_user: Annotated[str | None, typer.Option(help="The proxy's service user on the upstream.")] = None,
    upstream_authentication: Annotated[
        str | None,
        typer.Option(
            help="service_account (default) or passthrough: relay each client's SCRAM/PLAIN/OAUTHBEARER login to the "
            "broker, which decides it, and send its requests up as itself (upstream_passthrough_mechanisms: which)."
        ),
    ] = None,
    upstream_password_file: Annotated[
        Path | None, typer.Option(help="File with the service user's password (or KAFKAGUARD_UPSTREAM_PASSWORD).")
    ] = None,
    upstream_ssl_cafile: Annotated[Path | None, typer.Option(help="PEM CA bundle for the upstream's TLS.")] = None,
    upstream_ssl_certfile: Annotated[
        Path | None, typer.Option(help="PEM client certificate for an upstream that asks for one (ssl.client.auth).")
    ] = None,
    upstream_ssl_keyfile: Annotated[
        Path | None, typer.Option(help="PEM private key of --upstream-ssl-certfile.")
    ] = None,
    upstream_ssl_keyfile_password_file: Annotated[
        Path | None,
        typer.Option(help="File with that key's password, if encrypted (or KAFKAGUARD_UPSTREAM_SSL_KEYFILE_PASSWORD)."),
    ] = None,
    upstream_sasl_oauthbearer_token_endpoint_url: Annotated[
        str | None, typer.Option(help="OAUTHBEARER: the token endpoint (client-credentials grant), https://….")
    ] = None,
    upstream_sasl_oauthbearer_client_id: Annotated[
        str | None, typer.Option(help="OAUTHBEARER: the proxy's OAuth client id.")
    ] = None,
    upstream_sasl_oauthbearer_client_secret_file: Annotated[
        Path | None,
        typer.Option(
            help="OAUTHBEARER: file with the client secret (or KAFKAGUARD_UPSTREAM_SASL_OAUTHBEARER_CLIENT_SECRET)."
        ),
    ] = None,
    upstream_sasl_oauthbearer_scope: Annotated[
        str | None, typer.Option(help="OAUTHBEARER: the scope to ask for (optional).")
    ] = None,
    data_dir: o.DataDir = None,
    listener: o.Listeners = None,
    advertised_host: o.AdvertisedHost = None,
    super_users: o.SuperUsers = None,
    allow_everyone_if_no_acl_found: o.AllowEveryone = None,
    audit_log: o.AuditLog = None,
    audit_mode: o.AuditMode = None,
    audit_usage_window_seconds: o.AuditUsageWindow = None,
    audit_kafka_bootstrap_servers: o.AuditKafkaBootstrapServers = None,
    audit_kafka_topic: o.AuditKafkaTopic = None,
    enforcement: Annotated[
        str | None,
        typer.Option(
            help="enforcing (default) or permissive: forward what the ACLs would deny, audited as would-be denials "
            "(needs --audit-log; for rolling out ACLs, never left on)."
        ),
    ] = None,
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
    """Proxy Kafka clients to an upstream cluster, authorizing every request with kafkaguard's ACLs.

    On a listener of port P, upstream broker N is served on port P+1+N: open those ports to clients too."""
    identity = o.identity_settings(locals())

    def settings() -> Settings:
        return load_settings(
            config,
            **identity,
            upstream=upstream,
            upstream_security_protocol=upstream_security_protocol,
            upstream_sasl_mechanism=upstream_sasl_mechanism,
            upstream_user=upstream_user,
            upstream_authentication=upstream_authentication,
            upstream_password_file=upstream_password_file,
            upstream_ssl_cafile=upstream_ssl_cafile,
            upstream_ssl_certfile=upstream_ssl_certfile,
            upstream_ssl_keyfile=upstream_ssl_keyfile,
            upstream_ssl_keyfile_password_file=upstream_ssl_keyfile_password_file,
            upstream_sasl_oauthbearer_token_endpoint_url=upstream_sasl_oauthbearer_token_endpoint_url,
            upstream_sasl_oauthbearer_client_id=upstream_sasl_oauthbearer_client_id,
            upstream_sasl_oauthbearer_client_secret_file=upstream_sasl_oauthbearer_client_secret_file,
            upstream_sasl_oauthbearer_scope=upstream_sasl_oauthbearer_scope,
            data_dir=data_dir,
            listeners=listener or None,
            advertised_host=advertised_host,
            super_users=super_users,
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            audit_log=audit_log,
            audit_mode=audit_mode,
            audit_usage_window_seconds=audit_usage_window_seconds,
            audit_kafka_bootstrap_servers=audit_kafka_bootstrap_servers,
            audit_kafka_topic=audit_kafka_topic,
            enforcement=enforcement,
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

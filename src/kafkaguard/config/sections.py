"""The settings in typed sections, each handed to what needs it: ``Sections.of(settings)`` builds them once from the
validated flat ``Settings`` (whose keys, environment variables and YAML stay as users write them).

A section holds only what its mode has: an OAUTHBEARER upstream has no SCRAM mechanism (``UpstreamOAuthBearer``),
a SCRAM one no token endpoint (``UpstreamScram``), a listener set without OAUTHBEARER no token rules
(``IdentitySettings.oauthbearer`` is None). Secrets stay unread until used (``Secret``): a mode that does not use one
never reads its file, and a file that cannot be read fails where it is needed, with the setting's name.

Cost: building the sections reads every field once and parses the listeners (microseconds); done at start
(``bootstrap``: ``Services.sections``), never per connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr

from kafkaguard.errors import InvalidConfigError
from kafkaguard.scram import ScramMechanism
from kafkaguard.store.url import StoreUrl

if TYPE_CHECKING:
    from kafkaguard.config import Listener, Settings

ClientAuth = Literal["none", "requested", "required"]
KafkaProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]


@dataclass(frozen=True, slots=True)
class Secret:
    """A secret given as a value (a ``KAFKAGUARD_*`` variable) or as a file whose first line it is; read by
    ``read`` only, so no repr or log line holds it."""

    value: SecretStr | None = field(repr=False)
    file: Path | None
    #: The file's setting, named when the file cannot be read.
    file_setting: str
    #: None: the locale's (as the listener key and the store password have always been read).
    encoding: str | None = "utf-8"

    def read(self) -> str | None:
        """The value, else the file's content without its line end, else None.

        :raises InvalidConfigError: the file cannot be read.
        """
        if self.value is not None:
            return self.value.get_secret_value()
        if self.file is None:
            return None
        try:
            return self.file.read_text(self.encoding).rstrip("\r\n")
        except OSError as e:
            raise InvalidConfigError(f"{self.file_setting} {self.file} cannot be read: {e.strerror}") from None


# ----------------------------------------------------------------------------------------------------- listeners


@dataclass(frozen=True, slots=True)
class ListenerTls:
    """The certificate of the SSL and SASL_SSL listeners, and the CAs and revocation lists that client
    certificates are checked against (Kafka's ssl.keystore.* and ssl.truststore.*)."""

    certfile: Path
    keyfile: Path
    key_password: Secret
    cafile: Path | None
    crlfile: Path | None


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """The Kafka listeners and their connections (``node.listening``, ``protocol.connection``)."""

    listeners: tuple[Listener, ...]
    advertised_host: str | None
    #: None: no certificate and key given (an SSL or SASL_SSL listener then cannot be bound).
    tls: ListenerTls | None
    ssl_client_auth: ClientAuth
    sasl_ssl_client_auth: ClientAuth
    proxy_protocol: Literal["off", "optional", "required"]
    trusted_proxies: tuple[str, ...]
    max_request_bytes: int
    max_unauthenticated_request_bytes: int
    max_request_items: int
    sasl_login_timeout_seconds: float
    idle_timeout_seconds: float
    #: 0: the TLS files are never reloaded (``node.tls_reload``).
    tls_reload_interval_seconds: float
    #: How long a SIGTERM's drain may take (``node.drain``), read when it starts (a SIGHUP may change it).
    shutdown_grace_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> ListenerSettings:
        tls = None
        if settings.ssl_certfile is not None and settings.ssl_keyfile is not None:
            password = Secret(
                settings.ssl_keyfile_password,
                settings.ssl_keyfile_password_file,
                "ssl_keyfile_password_file",
                encoding=None,
            )
            tls = ListenerTls(
                settings.ssl_certfile, settings.ssl_keyfile, password, settings.ssl_cafile, settings.ssl_crlfile
            )
        return cls(
            listeners=tuple(settings.parsed_listeners),
            advertised_host=settings.advertised_host,
            tls=tls,
            ssl_client_auth=settings.ssl_client_auth,
            sasl_ssl_client_auth=settings.sasl_ssl_client_auth,
            proxy_protocol=settings.proxy_protocol,
            trusted_proxies=tuple(settings.trusted_proxies),
            max_request_bytes=settings.max_request_bytes,
            max_unauthenticated_request_bytes=settings.max_unauthenticated_request_bytes,
            max_request_items=settings.max_request_items,
            sasl_login_timeout_seconds=settings.sasl_login_timeout_seconds,
            idle_timeout_seconds=settings.idle_timeout_seconds,
            tls_reload_interval_seconds=settings.tls_reload_interval_seconds,
            shutdown_grace_seconds=settings.shutdown_grace_seconds,
        )


# ------------------------------------------------------------------------------------------------------ identity


@dataclass(frozen=True, slots=True)
class OAuthBearerSettings:
    """How OAUTHBEARER tokens are checked (Kafka's sasl.oauthbearer.*, and kafkaguard's groups claim)."""

    jwks_endpoint_url: str
    jwks_endpoint_refresh_ms: int
    jwks_endpoint_cafile: Path | None
    jwks_expedited_refreshes_per_minute: int
    expected_audience: tuple[str, ...]
    expected_issuer: str | None
    sub_claim_name: str
    scope_claim_name: str
    clock_skew_seconds: int
    groups_claim_name: str | None


@dataclass(frozen=True, slots=True)
class KerberosSettings:
    """The node's own Kerberos service (GSSAPI): its principal and keytab, and Kafka's principal-to-local rules."""

    service_name: str
    keytab: Path
    principal: str
    principal_to_local_rules: tuple[str, ...]
    accept_workers: int
    accept_max_pending: int


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """Who a client is (``protocol.identity``, ``protocol.connection``) and the first admin (``bootstrap``)."""

    sasl_mechanisms: tuple[str, ...]
    sasl_plain_without_tls: bool
    #: None unless OAUTHBEARER is among the mechanisms (the settings then have its JWKS endpoint).
    oauthbearer: OAuthBearerSettings | None
    #: None unless GSSAPI is among the mechanisms (the settings' validation then makes sure each part is given).
    kerberos: KerberosSettings | None
    ssl_principal_mapping_rules: str
    auth_failure_delay_ms: int
    connections_max_reauth_ms: int
    admin_user: str | None
    admin_password: SecretStr | None = field(repr=False)

    @classmethod
    def of(cls, settings: Settings) -> IdentitySettings:
        oauthbearer = None
        url = settings.sasl_oauthbearer_jwks_endpoint_url
        if "OAUTHBEARER" in settings.sasl_mechanisms and url is not None:
            oauthbearer = OAuthBearerSettings(
                jwks_endpoint_url=url,
                jwks_endpoint_refresh_ms=settings.sasl_oauthbearer_jwks_endpoint_refresh_ms,
                jwks_endpoint_cafile=settings.sasl_oauthbearer_jwks_endpoint_cafile,
                jwks_expedited_refreshes_per_minute=settings.sasl_oauthbearer_jwks_expedited_refreshes_per_minute,
                expected_audience=tuple(settings.sasl_oauthbearer_expected_audience),
                expected_issuer=settings.sasl_oauthbearer_expected_issuer,
                sub_claim_name=settings.sasl_oauthbearer_sub_claim_name,
                scope_claim_name=settings.sasl_oauthbearer_scope_claim_name,
                clock_skew_seconds=settings.sasl_oauthbearer_clock_skew_seconds,
                groups_claim_name=settings.sasl_oauthbearer_groups_claim_name,
            )
        kerberos = None
        keytab, principal = settings.sasl_kerberos_keytab, settings.sasl_kerberos_principal
        if "GSSAPI" in settings.sasl_mechanisms and keytab is not None and principal is not None:
            kerberos = KerberosSettings(
                service_name=settings.sasl_kerberos_service_name or "",
                keytab=keytab,
                principal=principal,
                principal_to_local_rules=tuple(settings.sasl_kerberos_principal_to_local_rules),
                accept_workers=settings.sasl_kerberos_accept_workers,
                accept_max_pending=settings.sasl_kerberos_accept_max_pending,
            )
        return cls(
            sasl_mechanisms=tuple(settings.sasl_mechanisms),
            sasl_plain_without_tls=settings.sasl_plain_without_tls,
            oauthbearer=oauthbearer,
            kerberos=kerberos,
            ssl_principal_mapping_rules=settings.ssl_principal_mapping_rules,
            auth_failure_delay_ms=settings.auth_failure_delay_ms,
            connections_max_reauth_ms=settings.connections_max_reauth_ms,
            admin_user=settings.admin_user,
            admin_password=settings.admin_password,
        )

    def listener_mechanisms(self, listener: Listener) -> list[str]:
        """The SASL mechanisms ``listener`` offers: PLAIN only with TLS, unless ``sasl_plain_without_tls``."""
        if listener.protocol.uses_tls or self.sasl_plain_without_tls:
            return list(self.sasl_mechanisms)
        return [mechanism for mechanism in self.sasl_mechanisms if mechanism != "PLAIN"]

    def withheld_mechanisms(self, listener: Listener) -> dict[str, str]:
        """The configured mechanisms ``listener`` does not offer, each with why and what to change (said at start,
        ``node.listener_summary``, and when a client asks for one, ``protocol.sasl``)."""
        offered = self.listener_mechanisms(listener)
        return {
            name: (
                f"{name} is in sasl_mechanisms but not offered on {listener}: it sends the password in clear and "
                f"this listener has no TLS; use a SASL_SSL listener, or set sasl_plain_without_tls: true to offer "
                f"it anyway"
            )
            for name in self.sasl_mechanisms
            if name not in offered
        }


@dataclass(frozen=True, slots=True)
class AuthorizationSettings:
    """What decides besides the ACLs (``bootstrap``'s authorizer, ``node.rollout_watch``, the rollout)."""

    super_users: str
    allow_everyone_if_no_acl_found: bool
    enforcement: Literal["enforcing", "permissive"]
    shadow_acls: Path | None

    @classmethod
    def of(cls, settings: Settings) -> AuthorizationSettings:
        return cls(
            settings.super_users, settings.allow_everyone_if_no_acl_found, settings.enforcement, settings.shadow_acls
        )


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """The topics this server creates (``bootstrap``'s topic service, ``server.handlers.topics``)."""

    auto_create_topics: bool
    default_partitions: int

    @classmethod
    def of(cls, settings: Settings) -> TopicSettings:
        return cls(settings.auto_create_topics, settings.default_partitions)


# -------------------------------------------------------------------------------------------------------- limits


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """What one client, address or principal may cost: connections (``node.admission``), protocol violations
    (``protocol.violations``), failed logins and refused changes (``bootstrap``)."""

    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: Mapping[str, int]
    max_connections_per_listener: Mapping[str, int]
    max_connection_creation_rate_per_ip: float
    ipv6_prefix_length: int
    protocol_violation_penalty_seconds: float
    protocol_violation_penalty_max_seconds: float
    protocol_violations_per_address: int
    protocol_violation_window_seconds: float
    login_failures_per_address_burst: int
    login_failures_per_address_per_minute: float
    login_failures_per_user_burst: int
    login_failures_per_user_per_minute: float
    login_failure_memory_seconds: float
    login_success_memory_seconds: float
    refused_changes_per_request: int
    refused_changes_burst: int
    refused_changes_per_minute: float

    @classmethod
    def of(cls, settings: Settings) -> LimitSettings:
        return cls(**{name: getattr(settings, name) for name in cls.__dataclass_fields__})


# --------------------------------------------------------------------------------------------------------- audit


@dataclass(frozen=True, slots=True)
class KafkaClientSettings:
    """How a librdkafka client reaches a cluster (the audit sink: its own settings, or the proxy's upstream ones)."""

    bootstrap_servers: str
    security_protocol: KafkaProtocol
    sasl_mechanism: str
    user: str | None
    password: Secret
    ssl_cafile: Path | None
    ssl_certfile: Path | None
    ssl_keyfile: Path | None
    #: None: the key has no password setting (the audit sink's own key).
    ssl_key_password: Secret | None


@dataclass(frozen=True, slots=True)
class AuditKafkaSettings:
    """The audit trail's Kafka topic sink and its spool."""

    client: KafkaClientSettings
    topic: str
    routes: tuple[dict[str, Any], ...]
    delivery_timeout_seconds: float
    spool_path: Path
    spool_max_bytes: int
    spool_fsync_seconds: float


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """The audit trail (``audit.trail.from_settings``): the JSON lines file, the Kafka sink, either or both."""

    log: Path | None
    mode: Literal["usage", "denied", "all"]
    max_bytes: int
    node_name: str | None
    login_failure_window_seconds: float
    usage_window_seconds: float
    #: None: no Kafka sink (``audit_kafka_bootstrap_servers`` unset).
    kafka: AuditKafkaSettings | None

    @classmethod
    def of(cls, settings: Settings) -> AuditSettings:
        kafka = None
        servers = settings.audit_kafka_bootstrap_servers
        if servers is not None:
            kafka = AuditKafkaSettings(
                client=_audit_client(settings, servers),
                topic=settings.audit_kafka_topic,
                routes=tuple(settings.audit_kafka_routes),
                delivery_timeout_seconds=settings.audit_kafka_delivery_timeout_seconds,
                spool_path=settings.audit_spool_path,
                spool_max_bytes=settings.audit_spool_max_bytes,
                spool_fsync_seconds=settings.audit_spool_fsync_seconds,
            )
        return cls(
            log=settings.audit_log,
            mode=settings.audit_mode,
            max_bytes=settings.audit_max_bytes,
            node_name=settings.audit_node_name,
            login_failure_window_seconds=settings.audit_login_failure_window_seconds,
            usage_window_seconds=settings.audit_usage_window_seconds,
            kafka=kafka,
        )


def _audit_client(settings: Settings, servers: str) -> KafkaClientSettings:
    """The audit sink's cluster: its own (``audit_kafka_*``), or with ``upstream`` the proxy's upstream (whose
    mechanism the settings' validation holds to SCRAM there)."""
    if servers == "upstream":
        if settings.upstream is None:  # refused by the settings' validation: never reached
            raise InvalidConfigError("audit_kafka_bootstrap_servers 'upstream' needs upstream")
        return KafkaClientSettings(
            bootstrap_servers=settings.upstream,
            security_protocol=settings.upstream_security_protocol,
            sasl_mechanism=settings.upstream_sasl_mechanism,
            user=settings.upstream_user,
            password=Secret(settings.upstream_password, settings.upstream_password_file, "upstream_password_file"),
            ssl_cafile=settings.upstream_ssl_cafile,
            ssl_certfile=settings.upstream_ssl_certfile,
            ssl_keyfile=settings.upstream_ssl_keyfile,
            ssl_key_password=_upstream_key_password(settings),
        )
    return KafkaClientSettings(
        bootstrap_servers=servers,
        security_protocol=settings.audit_kafka_security_protocol,
        sasl_mechanism=settings.audit_kafka_sasl_mechanism,
        user=settings.audit_kafka_user,
        password=Secret(settings.audit_kafka_password, settings.audit_kafka_password_file, "audit_kafka_password_file"),
        ssl_cafile=settings.audit_kafka_ssl_cafile,
        ssl_certfile=settings.audit_kafka_ssl_certfile,
        ssl_keyfile=settings.audit_kafka_ssl_keyfile,
        ssl_key_password=None,
    )


# --------------------------------------------------------------------------------------------------------- proxy


@dataclass(frozen=True, slots=True)
class UpstreamScram:
    """The proxy's SCRAM login upstream. A missing user or password is refused when the proxy starts
    (``proxy.app.upstream_security``), not when the settings load: ``serve`` never logs in upstream."""

    mechanism: ScramMechanism
    user: str | None
    password: Secret


@dataclass(frozen=True, slots=True)
class UpstreamOAuthBearer:
    """The proxy's OAUTHBEARER login upstream: tokens of the client-credentials grant (the settings' validation
    makes sure each part is given)."""

    token_endpoint_url: str
    client_id: str
    client_secret: Secret
    scope: str | None


@dataclass(frozen=True, slots=True)
class UpstreamKerberos:
    """The proxy's GSSAPI login upstream, by keytab (the settings' validation makes sure each part is given)."""

    service_name: str
    keytab: Path
    principal: str


UpstreamCredential = UpstreamScram | UpstreamOAuthBearer | UpstreamKerberos


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """TLS towards the upstream: the CAs that verify it, and the proxy's client certificate if it has one."""

    cafile: Path | None
    certfile: Path | None
    keyfile: Path | None
    key_password: Secret


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The proxy's upstream cluster (``proxy.app``)."""

    #: As given, for messages (None: no upstream; the proxy refuses to start).
    upstream: str | None
    servers: tuple[tuple[str, int], ...]
    security_protocol: KafkaProtocol
    #: None unless the protocol is SASL_PLAINTEXT or SASL_SSL.
    login: UpstreamCredential | None
    #: None unless the protocol is SSL or SASL_SSL.
    tls: UpstreamTls | None
    timeout_seconds: float
    #: ``service_account``: kafkaguard decides the clients' logins; ``passthrough``: the brokers do
    #: (``protocol.passthrough``, ``proxy.passthrough``).
    authentication: Literal["service_account", "passthrough"]
    #: In passthrough: the mechanisms whose logins go to the broker (the others stay kafkaguard's own).
    passthrough_mechanisms: tuple[str, ...]
    #: In passthrough, OAUTHBEARER: the claim naming the principal (checked at start to be the broker's
    #: ``sasl.oauthbearer.sub.claim.name``) and the groups claim, read from a token once the broker accepted it.
    passthrough_sub_claim_name: str = "sub"
    passthrough_groups_claim_name: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> ProxySettings:
        protocol = settings.upstream_security_protocol
        login: UpstreamCredential | None = None
        if protocol.startswith("SASL_"):
            if settings.upstream_sasl_mechanism == "OAUTHBEARER":
                url = settings.upstream_sasl_oauthbearer_token_endpoint_url
                client_id = settings.upstream_sasl_oauthbearer_client_id
                if url is None or client_id is None:  # refused by the settings' validation: never reached
                    raise InvalidConfigError("upstream_sasl_mechanism OAUTHBEARER needs a token endpoint and client id")
                login = UpstreamOAuthBearer(
                    url,
                    client_id,
                    Secret(
                        settings.upstream_sasl_oauthbearer_client_secret,
                        settings.upstream_sasl_oauthbearer_client_secret_file,
                        "upstream_sasl_oauthbearer_client_secret_file",
                    ),
                    settings.upstream_sasl_oauthbearer_scope,
                )
            elif settings.upstream_sasl_mechanism == "GSSAPI":
                keytab, principal = settings.upstream_sasl_kerberos_keytab, settings.upstream_sasl_kerberos_principal
                if keytab is None or principal is None:  # refused by the settings' validation: never reached
                    raise InvalidConfigError("upstream_sasl_mechanism GSSAPI needs a keytab and a principal")
                login = UpstreamKerberos(settings.upstream_sasl_kerberos_service_name or "", keytab, principal)
            else:
                login = UpstreamScram(
                    ScramMechanism.from_name(settings.upstream_sasl_mechanism),
                    settings.upstream_user,
                    Secret(settings.upstream_password, settings.upstream_password_file, "upstream_password_file"),
                )
        tls = None
        if protocol in ("SSL", "SASL_SSL"):
            tls = UpstreamTls(
                settings.upstream_ssl_cafile,
                settings.upstream_ssl_certfile,
                settings.upstream_ssl_keyfile,
                _upstream_key_password(settings),
            )
        return cls(
            settings.upstream,
            tuple(settings.upstream_servers),
            protocol,
            login,
            tls,
            settings.upstream_timeout_seconds,
            settings.upstream_authentication,
            tuple(settings.upstream_passthrough_mechanisms),
            settings.sasl_oauthbearer_sub_claim_name,
            settings.sasl_oauthbearer_groups_claim_name,
        )


def _upstream_key_password(settings: Settings) -> Secret:
    return Secret(
        settings.upstream_ssl_keyfile_password,
        settings.upstream_ssl_keyfile_password_file,
        "upstream_ssl_keyfile_password_file",
    )


# --------------------------------------------------------------------------------------------------------- store


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where the store is (``bootstrap``) and how often other processes' changes are picked up (``following``)."""

    data_dir: Path
    #: The PostgreSQL store's URL as given (no password in it); None: SQLite in ``data_dir``.
    postgres: str | None
    password: SecretStr | None = field(repr=False)
    password_file: Path | None
    sync_interval_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> StoreSettings:
        return cls(
            settings.data_dir,
            settings.store,
            settings.store_password,
            settings.store_password_file,
            settings.sync_interval_seconds,
        )

    @property
    def database_path(self) -> Path:
        return self.data_dir / "kafkaguard.db"

    def url(self) -> StoreUrl | None:
        """The PostgreSQL store, with its password (from ``store_password`` or ``store_password_file``), or None
        for SQLite in ``data_dir``.

        :raises InvalidConfigError: both password settings are given, or the file cannot be read.
        """
        if self.postgres is None:
            return None
        if self.password is not None and self.password_file is not None:
            raise InvalidConfigError("give the store password once: store_password or store_password_file, not both")
        password = Secret(self.password, self.password_file, "store_password_file", encoding=None).read()
        return StoreUrl.parse(self.postgres, password=password)


# ------------------------------------------------------------------------------------------------------- console


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """The REST console (``console.app``, ``cli.console``); its PBKDF2 bounds are PLAIN's too (``protocol.identity``):
    a PLAIN login costs what a console login costs."""

    http_listener: str | None
    trusted_proxies: tuple[str, ...]
    login_workers: int
    login_max_pending: int
    login_failure_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> ConsoleSettings:
        return cls(
            settings.http_listener,
            tuple(settings.trusted_proxies),
            settings.console_login_workers,
            settings.console_login_max_pending,
            settings.console_login_failure_seconds,
        )


# ------------------------------------------------------------------------------------------------------- logging


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    """The process's log level (``node.live``): None leaves the command line's ``--log-level``."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None

    @classmethod
    def of(cls, settings: Settings) -> LoggingSettings:
        return cls(settings.log_level)


# ---------------------------------------------------------------------------------------------------------- all


@dataclass(frozen=True, slots=True)
class Sections:
    """Every section of one process's settings."""

    listening: ListenerSettings
    identity: IdentitySettings
    authorization: AuthorizationSettings
    topics: TopicSettings
    limits: LimitSettings
    audit: AuditSettings
    proxy: ProxySettings
    store: StoreSettings
    console: ConsoleSettings
    logging: LoggingSettings

    @classmethod
    def of(cls, settings: Settings) -> Sections:
        return cls(
            listening=ListenerSettings.of(settings),
            identity=IdentitySettings.of(settings),
            authorization=AuthorizationSettings.of(settings),
            topics=TopicSettings.of(settings),
            limits=LimitSettings.of(settings),
            audit=AuditSettings.of(settings),
            proxy=ProxySettings.of(settings),
            store=StoreSettings.of(settings),
            console=ConsoleSettings.of(settings),
            logging=LoggingSettings.of(settings),
        )

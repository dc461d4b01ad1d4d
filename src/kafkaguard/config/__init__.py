"""Every setting of kafkaguard, from (highest first) command-line flags, ``KAFKAGUARD_*`` environment variables,
a YAML config file, then defaults that work out of the box (SQLite in ./data, SASL_PLAINTEXT on 127.0.0.1:9092).

Each setting is a field here, so each flag is also a config-file key (``super_users: "User:admin"``) and an
environment variable (``KAFKAGUARD_SUPER_USERS``). Unknown config-file keys are errors, so a typo is reported
instead of silently ignored.

What runs does not read this flat set: ``config.sections`` views it in typed sections (listening, identity, limits,
audit, proxy, store, console …), each handed to what it configures.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from kafkaguard.audit.records.routing import parse_routes, topic_name_error
from kafkaguard.authorizer import parse_super_users
from kafkaguard.config.sections import Secret, StoreSettings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.identity.kerberos_names import KerberosMappingError, KerberosName, KerberosShortNamer, split_rules
from kafkaguard.identity.ssl_mapping import SslPrincipalMapper
from kafkaguard.model.host import cidr_error, java_host
from kafkaguard.store.files import write_private
from kafkaguard.store.url import StoreUrl

log = logging.getLogger(__name__)


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self is SecurityProtocol.SASL_PLAINTEXT or self is SecurityProtocol.SASL_SSL

    @property
    def uses_tls(self) -> bool:
        return self is SecurityProtocol.SSL or self is SecurityProtocol.SASL_SSL


#: The most ``workers`` a node may run (a typo such as 1000 would fork that many processes).
MAX_WORKERS = 256
#: The SASL mechanisms a Kafka listener can offer.
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER", "GSSAPI")

_LISTENER = re.compile(r"^(?P<protocol>[A-Z_]+)://(?P<host>\[[0-9a-fA-F:.]+\]|[^:/\s]*):(?P<port>\d{1,5})$")


@dataclass(frozen=True, slots=True)
class Listener:
    """``SASL_PLAINTEXT://127.0.0.1:9092``; port 0 asks the OS for a free port (tests)."""

    protocol: SecurityProtocol
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        """:raises InvalidConfigError: not ``PROTOCOL://host:port`` with a known protocol."""
        match = _LISTENER.match(text.strip())
        if match is None:
            raise InvalidConfigError(
                f"listener {text!r} is not PROTOCOL://host:port, for example SASL_PLAINTEXT://127.0.0.1:9092"
            )
        try:
            protocol = SecurityProtocol(match["protocol"])
        except ValueError:
            names = ", ".join(p.value for p in SecurityProtocol)
            raise InvalidConfigError(f"listener {text!r}: unknown protocol; expected one of {names}") from None
        port = int(match["port"])
        if port > 65535:
            raise InvalidConfigError(f"listener {text!r}: port {port} is above 65535")
        return cls(protocol, match["host"].strip("[]"), port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol.value}://{host}:{self.port}"


_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[^:/\s,]+):(?P<port>\d{1,5})$")


def parse_host_ports(text: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (Kafka's bootstrap.servers) as (host, port) pairs.

    :raises InvalidConfigError: an entry that is not host:port with a port in 1..65535.
    """
    servers = []
    for entry in (part.strip() for part in text.split(",")):
        match = _HOST_PORT.match(entry)
        if match is None or not 0 < int(match["port"]) <= 65535:
            raise InvalidConfigError(f"upstream server {entry!r} is not host:port, for example kafka-1.internal:9092")
        servers.append((match["host"].strip("[]"), int(match["port"])))
    return servers


class Settings(BaseSettings):
    """kafkaguard's configuration. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(env_prefix="KAFKAGUARD_", extra="forbid", validate_default=True)
    _yaml_file: ClassVar[Path | None] = None

    data_dir: Path = Field(Path("data"), description="Directory of the SQLite database and the server secret.")
    store: str | None = Field(
        None,
        description="A PostgreSQL store shared by several nodes, postgresql://user@host:port/database (no password "
        "in it). Default: SQLite in data_dir.",
    )
    store_password: SecretStr | None = Field(
        None, description="The PostgreSQL store's password (KAFKAGUARD_STORE_PASSWORD; never logged)."
    )
    store_password_file: Path | None = Field(None, description="A file holding the PostgreSQL store's password.")
    listeners: list[str] = Field(
        default_factory=lambda: ["SASL_PLAINTEXT://127.0.0.1:9092"],
        description="Kafka listeners, PROTOCOL://host:port (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
    )
    advertised_host: str | None = Field(None, description="Host clients are told to connect to (default: bound host).")
    super_users: str = Field("", description="Super users, Kafka style: 'User:admin;User:ops'.")
    allow_everyone_if_no_acl_found: bool = Field(False, description="Kafka's allow.everyone.if.no.acl.found.")
    auto_create_topics: bool = Field(False, description="Kafka's auto.create.topics.enable (needs AUTO_CREATE).")
    default_partitions: int = Field(1, ge=1, description="Kafka's num.partitions for new topics.")
    sasl_mechanisms: list[str] = Field(
        default_factory=lambda: ["SCRAM-SHA-256", "SCRAM-SHA-512"], description="Enabled SASL mechanisms."
    )
    ssl_certfile: Path | None = Field(None, description="PEM certificate chain for SSL and SASL_SSL listeners.")
    ssl_keyfile: Path | None = Field(None, description="PEM private key for SSL and SASL_SSL listeners.")
    ssl_keyfile_password: SecretStr | None = Field(
        None, description="The private key's password, if it is encrypted (KAFKAGUARD_SSL_KEYFILE_PASSWORD only)."
    )
    ssl_keyfile_password_file: Path | None = Field(None, description="A file holding the private key's password.")
    ssl_client_auth: Literal["none", "requested", "required"] = Field(
        "none",
        description="Kafka's ssl.client.auth on SSL listeners: ask for a client certificate and verify it against "
        "ssl_cafile ('requested': a client without one is User:ANONYMOUS; 'required': the TLS handshake fails "
        "without one).",
    )
    sasl_ssl_client_auth: Literal["none", "requested", "required"] = Field(
        "none",
        description="The same on SASL_SSL listeners, where the SASL login still names the principal (Kafka, since "
        "KIP-684, reads only listener.name.X.ssl.client.auth there, never the broker-wide ssl.client.auth).",
    )
    ssl_cafile: Path | None = Field(
        None, description="PEM bundle of the CAs that sign client certificates (Kafka's ssl.truststore.*)."
    )
    ssl_crlfile: Path | None = Field(
        None, description="PEM certificate revocation list(s): a revoked client certificate fails the handshake."
    )
    tls_reload_interval_seconds: float = Field(
        5.0,
        ge=0,
        description="How often the TLS files (ssl_certfile, ssl_keyfile, ssl_cafile, ssl_crlfile; the proxy's "
        "upstream_ssl_* too) are checked for a change (their mtime, size and inode); a changed set that loads is "
        "used by new connections, one that does not is logged and the previous one kept. 0: never reloaded.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None = Field(
        None,
        description="The log level; given here (or KAFKAGUARD_LOG_LEVEL) it wins over --log-level, and a SIGHUP "
        "applies a changed one.",
    )
    ssl_principal_mapping_rules: str = Field(
        "DEFAULT",
        description="Kafka's ssl.principal.mapping.rules: how a client certificate's subject (RFC 2253, as Java "
        "writes it) becomes the User: principal on an SSL listener, e.g. 'RULE:^CN=([^,]*),.*$/$1/L,DEFAULT'.",
    )
    sasl_plain_without_tls: bool = Field(
        False,
        description="Offer SASL/PLAIN on SASL_PLAINTEXT listeners too (the password then crosses the network in the "
        "clear); by default PLAIN is offered on SASL_SSL listeners only.",
    )
    sasl_oauthbearer_jwks_endpoint_url: str | None = Field(
        None,
        description="Kafka's sasl.oauthbearer.jwks.endpoint.url: the identity provider's JWKS, https://… or "
        "file:/path (needed for OAUTHBEARER).",
    )
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = Field(
        3_600_000, ge=1000, description="Kafka's sasl.oauthbearer.jwks.endpoint.refresh.ms: how often the JWKS is read."
    )
    sasl_oauthbearer_jwks_endpoint_cafile: Path | None = Field(
        None, description="PEM CA bundle to verify an https JWKS endpoint (default: the system's)."
    )
    sasl_oauthbearer_jwks_expedited_refreshes_per_minute: int = Field(
        6,
        ge=0,
        description="Refreshes of the JWKS for tokens naming an unknown kid, at most this many in any 60 s for the "
        "whole key set (kafkaguard's addition beside Kafka's once-per-kid-a-minute rule, which stays): beyond it a "
        "token with an unknown kid fails without a fetch. 0: never refresh for an unknown kid.",
    )
    sasl_oauthbearer_expected_audience: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Kafka's sasl.oauthbearer.expected.audience (comma-separated): a token must name one of them "
        "in its aud claim. Unset: a token with an aud claim is refused (Kafka's jose4j rule).",
    )
    sasl_oauthbearer_expected_issuer: str | None = Field(
        None, description="Kafka's sasl.oauthbearer.expected.issuer: the iss claim a token must have."
    )
    sasl_oauthbearer_sub_claim_name: str = Field(
        "sub", min_length=1, description="Kafka's sasl.oauthbearer.sub.claim.name: the claim naming the principal."
    )
    sasl_oauthbearer_scope_claim_name: str = Field(
        "scope", min_length=1, description="Kafka's sasl.oauthbearer.scope.claim.name."
    )
    sasl_oauthbearer_clock_skew_seconds: int = Field(
        30, ge=0, description="Kafka's sasl.oauthbearer.clock.skew.seconds, for exp, nbf and iat."
    )
    sasl_oauthbearer_groups_claim_name: str | None = Field(
        None,
        description="A claim (or dotted path to a nested one, e.g. realm_access.roles) whose strings are the "
        "token's groups: each becomes a Group:NAME principal of the session, beside the stored memberships. "
        "kafkaguard's addition; Kafka has none.",
    )
    sasl_kerberos_service_name: str | None = Field(
        None,
        description="Kafka's sasl.kerberos.service.name: the service of this node's Kerberos principal (usually "
        "kafka; needed for GSSAPI). Clients ask for a ticket to <service>/<the host they connect to>.",
    )
    sasl_kerberos_keytab: Path | None = Field(
        None, description="The keytab holding the key of sasl_kerberos_principal (needed for GSSAPI; keep it private)."
    )
    sasl_kerberos_principal: str | None = Field(
        None,
        description="This node's own Kerberos principal, <service>/<host>@REALM (Kafka's JAAS principal; needed for "
        "GSSAPI): a ticket is bound to the service it was issued for, so GSSAPI logins end here.",
    )
    sasl_kerberos_accept_workers: int = Field(
        1, ge=1, description="Threads accepting GSSAPI tickets (each reads the keytab and writes the replay cache)."
    )
    sasl_kerberos_accept_max_pending: int = Field(
        256,
        ge=1,
        description="GSSAPI tickets being accepted or waiting at once (a ticket costs well under a millisecond); "
        "beyond that a login is refused at once, to retry.",
    )
    sasl_kerberos_principal_to_local_rules: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["DEFAULT"],
        description="Kafka's sasl.kerberos.principal.to.local.rules (a list; comma-separated as a flag or variable): "
        "how a Kerberos principal becomes the User: name, e.g. 'RULE:[2:$1@$0](.*@EXAMPLE\\.COM)s/@.*//L,DEFAULT'. "
        "The first rule that applies wins; DEFAULT maps the default realm's principals to their first component.",
    )
    proxy_protocol: Literal["off", "optional", "required"] = Field(
        "off",
        description="The PROXY protocol (v1 and v2) on every Kafka listener: the client's address is the one the "
        "header carries (host ACLs, connection limits, audit). Accepted only from trusted_proxies; 'required' "
        "refuses connections from anywhere else, 'optional' serves them with their socket's address.",
    )
    max_request_bytes: int = Field(100 * 1024 * 1024, ge=1024, description="Kafka's socket.request.max.bytes.")
    max_unauthenticated_request_bytes: int = Field(
        16 * 1024,
        ge=1024,
        description="Largest SASL token frame before login (SaslAuthenticate, or a raw token after a v0 handshake): "
        "SCRAM needs under 5 KiB; raise it for large OAUTHBEARER tokens. ApiVersions and SaslHandshake get 1 KiB. "
        "Kafka's sasl.server.max.receive.size is 512 KiB.",
    )
    protocol_violation_penalty_seconds: float = Field(
        1.0,
        ge=0,
        description="A connection closed for bytes no Kafka client sends (a dishonest length, too many items, an "
        "oversized frame before login) is charged to its logged-in principal, whose new logins are then refused for "
        "this long, or else to its address, refused this long once it is over protocol_violations_per_address; each "
        "refusal in a row lasts twice the last, up to protocol_violation_penalty_max_seconds (0: off).",
    )
    protocol_violation_penalty_max_seconds: float = Field(
        30.0,
        ge=0,
        description="The longest refusal for protocol violations in a row (a value below "
        "protocol_violation_penalty_seconds: every refusal lasts protocol_violation_penalty_seconds).",
    )
    protocol_violations_per_address: int = Field(
        10,
        ge=0,
        description="Protocol violations an address (IPv6: its ipv6_prefix_length block) may make without a login "
        "within protocol_violation_window_seconds before its new connections are refused: one buggy client behind a "
        "NAT does not lock out its neighbours (0: refused at the first).",
    )
    protocol_violation_window_seconds: float = Field(
        5.0,
        gt=0,
        description="The window of protocol_violations_per_address (a bucket of that many refilled over this long), "
        "and how long an offender must stay clean after a refusal before its next refusal starts again from "
        "protocol_violation_penalty_seconds.",
    )
    ipv6_prefix_length: int = Field(
        64,
        ge=1,
        le=128,
        description="IPv6 clients are counted per block of this prefix length by the connection limits, the "
        "protocol-violation penalty and the login failure budgets (one host holds a whole /64; 128: each address "
        "apart). IPv4 clients are counted per address.",
    )
    max_request_items: int = Field(
        10_000,
        ge=100,
        description="Items (topics, partitions, groups, ids … all arrays together) one request may carry; a request "
        "with more closes its connection. Kafka's clients stay far below; raise it for a client that names more.",
    )
    refused_changes_per_request: int = Field(
        20,
        ge=1,
        le=1000,
        description="Items of one request refused by authorization (ACLs, users, quotas, topics, members) that each "
        "get a management event; the rest of that request's are counted in one summary event.",
    )
    refused_changes_burst: int = Field(
        100,
        ge=1,
        description="Management events a principal's refused changes may make at once (a token bucket; beyond it "
        "they are counted in kafkaguard_refused_changes_total and logged, not recorded).",
    )
    refused_changes_per_minute: float = Field(
        100.0,
        gt=0,
        description="Management events of refused changes a principal regains per minute after refused_changes_burst.",
    )
    max_connections: int = Field(10_000, ge=1, description="Connections accepted at once, all listeners together.")
    max_connections_per_ip: int = Field(
        500,
        ge=0,
        description="Kafka's max.connections.per.ip: connections one client address may hold at once, all listeners "
        "(and the proxy's per-broker ports) together; 0 admits only the addresses of max_connections_per_ip_overrides.",
    )
    max_connections_per_ip_overrides: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="Kafka's max.connections.per.ip.overrides, address:count or CIDR:count, comma-separated "
        "('10.0.0.7:2000,10.1.0.0/16:50'; a YAML mapping too): the most specific entry holding an address sets that "
        "address's limit.",
    )
    max_connections_per_listener: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="Kafka's listener.name.X.max.connections, LISTENER=count, comma-separated "
        "('SASL_SSL://0.0.0.0:9093=8000'; a YAML mapping listener: count too); a proxy listener's per-broker ports "
        "count with it. Listeners not named: only max_connections.",
    )
    max_connection_creation_rate_per_ip: float = Field(
        100.0,
        gt=0,
        description="New connections per second one address may open (KIP-612), up to one second's worth at once; "
        "a stored connection_creation_rate ip quota (the address's own, else the default ip entity's) overrides it.",
    )
    sasl_login_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="A connection to a SASL listener that has not logged in this long after it was accepted (TLS "
        "handshake included) is closed. Kafka has no such deadline.",
    )
    idle_timeout_seconds: float = Field(600.0, gt=0, description="Kafka's connections.max.idle.ms, in seconds.")
    shutdown_grace_seconds: float = Field(
        30.0,
        description="How long a SIGTERM's graceful drain may take: /healthz answers 503 at once, the listeners stop "
        "accepting, requests in flight are answered (relayed fetches included), idle connections are closed between "
        "requests; what is still open after this long is closed. A second SIGTERM ends the drain at once.",
    )
    auth_failure_delay_ms: int = Field(100, ge=0, description="Delay before answering a failed authentication.")
    connections_max_reauth_ms: int = Field(
        0,
        ge=0,
        description="Kafka's connections.max.reauth.ms (KIP-368): a SASL session lasts this long, then the client "
        "must re-authenticate on its connection or have it closed at its next request; 0 (Kafka's default): "
        "sessions last as long as their connection (they still end when their user's credential is deleted or "
        "changed).",
    )
    audit_log: Path | None = Field(None, description="JSON-lines audit log file (off when unset).")
    audit_mode: Literal["usage", "denied", "all"] = Field(
        "usage",
        description="usage: allowed decisions counted per access and window, repeated denials collapsed (cheap "
        "enough to keep on; what `kafkaguard audit usage` needs); denied: denials only; all: one record per "
        "decision.",
    )
    audit_usage_window_seconds: float = Field(
        60.0, gt=0, description="usage mode: the window per which decisions are counted and written."
    )
    enforcement: Literal["enforcing", "permissive"] = Field(
        "enforcing",
        description="The proxy only. permissive: forward what the ACLs would deny and audit each such decision as "
        'DENIED with "enforced": false (rolling out ACLs; needs an audit trail). kafkaguard\'s own APIs (ACLs, SCRAM '
        "users, quotas), logins and limits stay enforced.",
    )
    shadow_acls: Path | None = Field(
        None,
        description="A candidate ACL file (the format kafkaguard apply reads) decided beside the active ACLs on "
        "every request; each decision it would flip is audited as a shadow event (needs an audit trail). Reloaded when "
        "the file changes.",
    )
    audit_max_bytes: int = Field(100 * 1024 * 1024, ge=1024, description="Rotate the audit log at this size.")
    audit_node_name: str | None = Field(
        None,
        description="This node's name in the audit trail's events (source kafkaguard://NAME); default: the host name.",
    )
    audit_login_failure_window_seconds: float = Field(
        60.0,
        ge=0,
        description="Identical failed logins (same name, mechanism, address, listener, error) within this many seconds "
        "of the first are one authentication event with a count, written when the window ends (0: one event each).",
    )
    audit_kafka_bootstrap_servers: str | None = Field(
        None,
        description="Send the audit trail to Kafka: the cluster's bootstrap servers, host:port[,host:port...], or "
        "'upstream' for the proxy's upstream cluster with the upstream_* security settings (off when unset).",
    )
    audit_kafka_topic: str = Field(
        "kafkaguard-audit-log-events", description="The audit topic: where events go that no route names."
    )
    audit_kafka_routes: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Routing rules, a YAML list, first match wins: each matches on category (authorization, "
        "management, authentication, shadow, broker), result (allowed/denied, success/failure), principal (exact, or a "
        "prefix ending in *) and resource (a prefix of the event's subject, e.g. 'TOPIC:pii-'), and names a topic or "
        "'drop'.",
    )
    audit_kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="How the audit sink reaches its cluster (Kafka's security.protocol)."
    )
    audit_kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        "SCRAM-SHA-512", description="The audit sink's SASL mechanism."
    )
    audit_kafka_user: str | None = Field(None, description="The audit sink's SASL user.")
    audit_kafka_password: SecretStr | None = Field(
        None, description="The audit sink's SASL password (KAFKAGUARD_AUDIT_KAFKA_PASSWORD; never logged)."
    )
    audit_kafka_password_file: Path | None = Field(None, description="A file holding the audit sink's password.")
    audit_kafka_ssl_cafile: Path | None = Field(None, description="PEM CA bundle to verify the audit cluster's TLS.")
    audit_kafka_ssl_certfile: Path | None = Field(None, description="PEM client certificate for the audit cluster.")
    audit_kafka_ssl_keyfile: Path | None = Field(None, description="PEM private key of audit_kafka_ssl_certfile.")
    audit_kafka_delivery_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="How long the audit sink waits for the cluster to acknowledge a record before it counts the "
        "cluster unreachable and retries from the spool (librdkafka's message.timeout.ms).",
    )
    audit_spool_dir: Path | None = Field(
        None, description="The audit sink's on-disk spool (default: data_dir/audit-spool)."
    )
    audit_spool_max_bytes: int = Field(
        1024 * 1024 * 1024,
        ge=64 * 1024,
        description="The spool's bound on disk: records beyond it are dropped, counted and logged.",
    )
    audit_spool_fsync_seconds: float = Field(
        1.0, ge=0, description="fsync the spool at most this often (a power loss loses at most this much)."
    )
    sync_interval_seconds: float = Field(0.5, gt=0, description="How often to pick up other processes' changes.")
    admin_user: str | None = Field(None, description="On start, create this SCRAM user if it has no credential.")
    admin_password: SecretStr | None = Field(None, description="Password for admin_user (never logged).")
    http_listener: str | None = Field(None, description="host:port of the REST console (off when unset).")
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="CIDRs of the proxies whose X-Forwarded-For the console believes, and whose PROXY protocol "
        "headers the Kafka listeners believe (proxy_protocol; comma-separated in the environment); none by "
        "default: the client is the socket's peer.",
    )
    workers: int = Field(
        1,
        description="Processes serving this node (kafkaguard serve and proxy), sharing every listener's port; "
        "auto: one per core (node.workers).",
    )
    console_login_workers: int = Field(1, ge=1, description="Threads deriving PBKDF2 for console logins.")
    console_login_max_pending: int = Field(
        4, ge=1, description="Console PBKDF2 derivations running or waiting at once; beyond that logins get 429."
    )
    login_failures_per_address_burst: int = Field(
        10,
        ge=1,
        description="Failed logins one client address (an IPv6 client: its ipv6_prefix_length block) may make at "
        "once, every mechanism together (SCRAM, PLAIN, OAUTHBEARER, client certificates, the console); past it and "
        "its rate, its logins are refused (SASL_AUTHENTICATION_FAILED / HTTP 429, 'retry after N s') unchecked.",
    )
    login_failures_per_address_per_minute: float = Field(
        30.0, gt=0, description="Failed logins a client address regains per minute after its burst."
    )
    login_failures_per_user_burst: int = Field(
        20,
        ge=1,
        description="Failed logins claiming one user name (SCRAM, PLAIN, the console; known or not) at once, from "
        "every address together; past it and its rate, that name's logins from addresses that failed within "
        "login_failure_memory_seconds are refused. A clean address is always checked: no lockout.",
    )
    login_failures_per_user_per_minute: float = Field(
        10.0, gt=0, description="Failed logins a user name regains per minute after its burst."
    )
    login_failure_memory_seconds: float = Field(
        600.0,
        ge=0,
        description="How long an address that failed a login counts as failing: a user name whose budget is spent "
        "is refused from failing addresses only.",
    )
    login_success_memory_seconds: float = Field(
        86_400.0,
        ge=0,
        description="How long a user that logged in from an address stays exempt there from that address's spent "
        "budget (its neighbours behind a NAT keep logging in while one client fails; PLAIN and the console only "
        "with the same password). 0: no exemption.",
    )
    console_login_failure_seconds: float = Field(
        0.25,
        gt=0,
        le=60,
        description="Every refused console login (401 or 429) is answered this long after its request arrived, "
        "whoever the user; above the slowest PBKDF2 the console derives (SCRAM-SHA-512 at 16384 iterations, ~6 ms).",
    )
    upstream: str | None = Field(
        None, description="The proxy's upstream cluster: bootstrap servers, host:port[,host:port...]."
    )
    upstream_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="How the proxy reaches the upstream (Kafka's security.protocol)."
    )
    upstream_sasl_mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"] = Field(
        "SCRAM-SHA-512", description="The proxy's SASL mechanism towards the upstream."
    )
    upstream_sasl_kerberos_service_name: str | None = Field(
        None,
        description="Kafka's sasl.kerberos.service.name for the upstream (GSSAPI): the service of the upstream "
        "brokers' principals; the proxy asks for a ticket to <service>/<broker host>.",
    )
    upstream_sasl_kerberos_keytab: Path | None = Field(
        None, description="The keytab of upstream_sasl_kerberos_principal (GSSAPI; keep it private)."
    )
    upstream_sasl_kerberos_principal: str | None = Field(
        None, description="The proxy's own Kerberos principal on the upstream (GSSAPI), e.g. kafkaguard-proxy@REALM."
    )
    upstream_user: str | None = Field(None, description="The proxy's service user on the upstream (SASL).")
    upstream_password: SecretStr | None = Field(
        None, description="The service user's password (KAFKAGUARD_UPSTREAM_PASSWORD; never logged)."
    )
    upstream_password_file: Path | None = Field(None, description="A file holding the service user's password.")
    upstream_ssl_cafile: Path | None = Field(None, description="PEM CA bundle to verify the upstream's TLS.")
    upstream_timeout_seconds: float = Field(
        40.0, gt=0, description="Longest wait for the upstream to connect or answer one request."
    )
    # The proxy's own identity towards the upstream besides SCRAM: a client certificate, or OAUTHBEARER tokens
    # from the client-credentials grant (names after Kafka's client settings).
    upstream_ssl_certfile: Path | None = Field(
        None, description="PEM client certificate (chain) for an upstream with ssl.client.auth (SSL, SASL_SSL)."
    )
    upstream_ssl_keyfile: Path | None = Field(None, description="PEM private key of upstream_ssl_certfile.")
    upstream_ssl_keyfile_password: SecretStr | None = Field(
        None, description="The upstream client key's password (KAFKAGUARD_UPSTREAM_SSL_KEYFILE_PASSWORD only)."
    )
    upstream_ssl_keyfile_password_file: Path | None = Field(
        None, description="A file holding the upstream client key's password."
    )
    upstream_sasl_oauthbearer_token_endpoint_url: str | None = Field(
        None,
        description="Kafka's sasl.oauthbearer.token.endpoint.url: where the proxy gets its OAUTHBEARER token "
        "(client-credentials grant), https://… (or http://… on a trusted network).",
    )
    upstream_sasl_oauthbearer_client_id: str | None = Field(
        None, description="Kafka's sasl.oauthbearer.client.credentials.client.id: the proxy's OAuth client."
    )
    upstream_sasl_oauthbearer_client_secret: SecretStr | None = Field(
        None,
        description="Kafka's sasl.oauthbearer.client.credentials.client.secret "
        "(KAFKAGUARD_UPSTREAM_SASL_OAUTHBEARER_CLIENT_SECRET only; never logged).",
    )
    upstream_sasl_oauthbearer_client_secret_file: Path | None = Field(
        None, description="A file holding the OAuth client secret."
    )
    upstream_sasl_oauthbearer_scope: str | None = Field(
        None, description="Kafka's sasl.oauthbearer.scope: the scope asked for with the token (optional)."
    )

    # Logins passed through to the upstream (issue 38; the checks are the proxy's, proxy/passthrough.py)
    upstream_authentication: Literal["service_account", "passthrough"] = Field(
        "service_account",
        description="How the proxy's clients reach the upstream: 'service_account' (kafkaguard checks their logins, "
        "and their requests go up as the proxy's service user) or 'passthrough' (each client's SCRAM, PLAIN or "
        "OAUTHBEARER login "
        "is relayed to the broker, which decides it, and its requests go up on its own connection as itself).",
    )
    upstream_passthrough_mechanisms: list[str] = Field(
        default_factory=lambda: ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"],
        description="With upstream_authentication passthrough: which enabled mechanisms are passed through (the "
        "others are kafkaguard's own logins, going up as the service user). SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, "
        "OAUTHBEARER (the broker checks the token; kafkaguard reads sasl_oauthbearer_sub_claim_name and "
        "sasl_oauthbearer_groups_claim_name from it once the broker accepted it, and needs no JWKS).",
    )

    @property
    def oauthbearer_passed_through(self) -> bool:
        """The proxy passes OAUTHBEARER logins through: the broker checks the tokens, kafkaguard needs no JWKS."""
        return self.upstream_authentication == "passthrough" and "OAUTHBEARER" in self.upstream_passthrough_mechanisms

    @model_validator(mode="after")
    def _check_upstream_login(self) -> Settings:
        """The upstream identity settings that only mean something together (each message says what to add)."""
        protocol = SecurityProtocol(self.upstream_security_protocol)
        if (self.upstream_ssl_certfile is None) != (self.upstream_ssl_keyfile is None):
            raise InvalidConfigError("upstream_ssl_certfile and upstream_ssl_keyfile go together: give both")
        if self.upstream_ssl_certfile is not None and not protocol.uses_tls:
            raise InvalidConfigError(
                f"upstream_ssl_certfile needs upstream_security_protocol SSL or SASL_SSL, not {protocol.value}"
            )
        if self.upstream_ssl_keyfile_password is not None and self.upstream_ssl_keyfile_password_file is not None:
            raise InvalidConfigError(
                "give the upstream key password once: upstream_ssl_keyfile_password or "
                "upstream_ssl_keyfile_password_file"
            )
        if self.upstream_sasl_oauthbearer_client_secret is not None and (
            self.upstream_sasl_oauthbearer_client_secret_file is not None
        ):
            raise InvalidConfigError(
                "give the OAuth client secret once: upstream_sasl_oauthbearer_client_secret or "
                "upstream_sasl_oauthbearer_client_secret_file"
            )
        url = self.upstream_sasl_oauthbearer_token_endpoint_url
        if url is not None and not url.startswith(("https://", "http://")):
            raise InvalidConfigError(
                f"upstream_sasl_oauthbearer_token_endpoint_url {url!r} is not https://… or http://…"
            )
        if self.upstream_sasl_mechanism == "GSSAPI":
            return self._check_upstream_kerberos(protocol)
        if self.upstream_sasl_mechanism != "OAUTHBEARER":
            return self
        missing = [
            name
            for name, value in (
                ("upstream_sasl_oauthbearer_token_endpoint_url", url),
                ("upstream_sasl_oauthbearer_client_id", self.upstream_sasl_oauthbearer_client_id),
                (
                    "a client secret (KAFKAGUARD_UPSTREAM_SASL_OAUTHBEARER_CLIENT_SECRET or "
                    "upstream_sasl_oauthbearer_client_secret_file)",
                    self.upstream_sasl_oauthbearer_client_secret or self.upstream_sasl_oauthbearer_client_secret_file,
                ),
            )
            if not value
        ]
        if not protocol.uses_sasl:
            raise InvalidConfigError(
                f"upstream_sasl_mechanism OAUTHBEARER needs upstream_security_protocol SASL_PLAINTEXT or SASL_SSL, "
                f"not {protocol.value}"
            )
        if missing:
            raise InvalidConfigError(f"upstream_sasl_mechanism OAUTHBEARER needs {', '.join(missing)}")
        return self

    def _check_upstream_kerberos(self, protocol: SecurityProtocol) -> Settings:
        if not protocol.uses_sasl:
            raise InvalidConfigError(
                f"upstream_sasl_mechanism GSSAPI needs upstream_security_protocol SASL_PLAINTEXT or SASL_SSL, "
                f"not {protocol.value}"
            )
        missing = [
            name
            for name in (
                "upstream_sasl_kerberos_service_name",
                "upstream_sasl_kerberos_keytab",
                "upstream_sasl_kerberos_principal",
            )
            if not getattr(self, name)
        ]
        if missing:
            raise InvalidConfigError(f"upstream_sasl_mechanism GSSAPI needs {', '.join(missing)}")
        _check_principal("upstream_sasl_kerberos_principal", str(self.upstream_sasl_kerberos_principal))
        return self

    @field_validator("shutdown_grace_seconds")
    @classmethod
    def _positive_grace(cls, value: float) -> float:
        if not value > 0:  # also refuses NaN
            raise ValueError(
                f"{value:g} is not above 0: give the seconds a SIGTERM's drain may take before the connections still "
                "open are closed (default 30)"
            )
        return value

    @field_validator("audit_kafka_routes")
    @classmethod
    def _check_audit_routes(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            parse_routes(value)
        except ValueError as e:
            raise InvalidConfigError(f"audit_kafka_routes: {e}") from None
        return value

    @field_validator("audit_kafka_topic")
    @classmethod
    def _check_audit_topic(cls, value: str) -> str:
        problem = topic_name_error(value)
        if problem is not None:
            raise InvalidConfigError(f"audit_kafka_topic: {problem}")
        return value

    @model_validator(mode="after")
    def _check_audit_kafka(self) -> Settings:
        """The audit sink's settings that only mean something together (each message says what to add)."""
        servers = self.audit_kafka_bootstrap_servers
        if servers is None:
            return self
        if servers == "upstream":
            if self.upstream is None:
                raise InvalidConfigError(
                    "audit_kafka_bootstrap_servers 'upstream' needs upstream (the proxy's cluster); or name the "
                    "audit cluster's host:port"
                )
            if self.upstream_sasl_mechanism in ("OAUTHBEARER", "GSSAPI"):
                raise InvalidConfigError(
                    f"audit_kafka_bootstrap_servers 'upstream' cannot log in with {self.upstream_sasl_mechanism}: "
                    "name the cluster's host:port and give the audit sink a SCRAM or PLAIN user (audit_kafka_user)"
                )
            return self
        try:
            parse_host_ports(servers)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"audit_kafka_bootstrap_servers: {e}") from None
        protocol = SecurityProtocol(self.audit_kafka_security_protocol)
        if protocol.uses_sasl and self.audit_kafka_user is None:
            raise InvalidConfigError(
                f"audit_kafka_security_protocol {protocol.value} needs audit_kafka_user and a password "
                "(KAFKAGUARD_AUDIT_KAFKA_PASSWORD or audit_kafka_password_file)"
            )
        if protocol.uses_sasl and self.audit_kafka_password is None and self.audit_kafka_password_file is None:
            raise InvalidConfigError(
                "audit_kafka_user needs a password: KAFKAGUARD_AUDIT_KAFKA_PASSWORD or audit_kafka_password_file"
            )
        if self.audit_kafka_password is not None and self.audit_kafka_password_file is not None:
            raise InvalidConfigError("give the audit sink's password once: audit_kafka_password or its file")
        if (self.audit_kafka_ssl_certfile is None) != (self.audit_kafka_ssl_keyfile is None):
            raise InvalidConfigError("audit_kafka_ssl_certfile and audit_kafka_ssl_keyfile go together: give both")
        return self

    @property
    def audit_spool_path(self) -> Path:
        """The audit sink's spool directory."""
        return self.audit_spool_dir if self.audit_spool_dir is not None else self.data_dir / "audit-spool"

    @property
    def upstream_sasl_oauthbearer_secret(self) -> str | None:
        """The OAuth client secret, from ``upstream_sasl_oauthbearer_client_secret`` or its file.

        :raises InvalidConfigError: the file cannot be read.
        """
        return Secret(
            self.upstream_sasl_oauthbearer_client_secret,
            self.upstream_sasl_oauthbearer_client_secret_file,
            "upstream_sasl_oauthbearer_client_secret_file",
        ).read()

    # The validators raise InvalidConfigError: a ValueError, so pydantic collects it into its ValidationError like
    # any other; ``load_settings`` reports them all at once.
    @field_validator("listeners")
    @classmethod
    def _check_listeners(cls, value: list[str]) -> list[str]:
        if not value:
            raise InvalidConfigError("at least one listener is needed")
        for text in value:
            Listener.parse(text)
        return value

    @field_validator("workers", mode="before")
    @classmethod
    def _check_workers(cls, value: object) -> int:
        text = str(value).strip().lower()
        if text == "auto":
            return os.cpu_count() or 1
        if isinstance(value, bool) or not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
            raise InvalidConfigError(
                f"workers {value!r} is not a number of processes: give a whole number from 1 to {MAX_WORKERS}, "
                "or auto (one per core)"
            )
        return int(text)

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: str | None) -> str | None:
        if value is not None:
            StoreUrl.parse(value)  # refuses a password in it
        return value

    @field_validator("upstream")
    @classmethod
    def _check_upstream(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_ports(value)
        return value

    @field_validator("super_users")
    @classmethod
    def _check_super_users(cls, value: str) -> str:
        parse_super_users(value)
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_trusted_proxies(cls, value: object) -> object:
        """A comma-separated string (the environment, a repeated flag's values) → a list of its entries."""
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            return value
        return [part.strip() for item in items for part in str(item).split(",") if part.strip()]

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: list[str]) -> list[str]:
        """Each entry an IP network (a bare address is one host); host bits set after the mask are refused, since
        ``10.0.0.1/8`` is more likely a typo than a wish to trust all of 10/8."""
        networks = []
        for text in value:
            try:
                networks.append(str(ipaddress.ip_network(text)))
            except ValueError as e:
                raise InvalidConfigError(
                    f"trusted_proxies entry {text!r} is not an IP network such as 10.0.0.0/8 or 192.168.1.10 ({e})"
                ) from None
        return networks

    @field_validator("max_connections_per_ip_overrides", mode="before")
    @classmethod
    def _split_ip_overrides(cls, value: object) -> object:
        return _count_entries(value, ":", "max_connections_per_ip_overrides", "10.0.0.7:2000,10.1.0.0/16:50")

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _check_ip_overrides(cls, value: dict[str, int]) -> dict[str, int]:
        """Each key one IP address (Java's form) or a CIDR block (KIP-1276's rules); no host names: nothing is
        resolved. Each count at least 0 (0 refuses the address, as in Kafka)."""
        checked: dict[str, int] = {}
        for key, count in value.items():
            text = key.strip().strip("[]")
            if "/" in text:
                problem = cidr_error(text)
                if problem is not None:
                    raise InvalidConfigError(f"max_connections_per_ip_overrides: {problem}")
            else:
                try:
                    ipaddress.ip_address(text)
                except ValueError:
                    raise InvalidConfigError(
                        f"max_connections_per_ip_overrides: {key!r} is not an IP address or a CIDR block such as "
                        "10.1.0.0/16 (host names are not resolved)"
                    ) from None
                text = java_host(text)
            if count < 0:
                raise InvalidConfigError(f"max_connections_per_ip_overrides: {key}: count {count} is below 0")
            checked[text] = count
        return checked

    @field_validator("max_connections_per_listener", mode="before")
    @classmethod
    def _split_listener_counts(cls, value: object) -> object:
        return _count_entries(value, "=", "max_connections_per_listener", "SASL_SSL://0.0.0.0:9093=8000")

    @field_validator("max_connections_per_listener")
    @classmethod
    def _check_listener_counts(cls, value: dict[str, int]) -> dict[str, int]:
        checked: dict[str, int] = {}
        for key, count in value.items():
            if count < 1:
                raise InvalidConfigError(
                    f"max_connections_per_listener: {key}: count {count} would refuse every connection; at least 1"
                )
            checked[str(Listener.parse(key))] = count
        return checked

    @model_validator(mode="after")
    def _check_connection_limits(self) -> Settings:
        """The per-listener caps name configured listeners, and a per-address limit of 0 has exceptions (Kafka's
        rule: else no client could connect)."""
        configured = {str(listener) for listener in self.parsed_listeners}
        unknown = sorted(set(self.max_connections_per_listener) - configured)
        if unknown:
            raise InvalidConfigError(
                f"max_connections_per_listener names {', '.join(unknown)}, which is not a listener; the listeners "
                f"are {', '.join(sorted(configured))}"
            )
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise InvalidConfigError(
                "max_connections_per_ip 0 admits only the addresses of max_connections_per_ip_overrides, and there "
                "are none: no client could connect"
            )
        return self

    @model_validator(mode="after")
    def _check_rollout(self) -> Settings:
        """Permissive enforcement and shadow ACLs exist to write evidence: without an audit log they would only
        weaken enforcement (permissive) or cost work for nothing (shadow)."""
        if self.audit_log is None and self.audit_kafka_bootstrap_servers is None:
            if self.enforcement == "permissive":
                raise InvalidConfigError(
                    "enforcement permissive needs an audit trail (audit_log or audit_kafka_bootstrap_servers): the "
                    "would-be denials are written there (without it the proxy would only stop enforcing)"
                )
            if self.shadow_acls is not None:
                raise InvalidConfigError(
                    "shadow_acls needs an audit trail (audit_log or audit_kafka_bootstrap_servers): the flipped "
                    "decisions are written there"
                )
        return self

    @field_validator("sasl_mechanisms")
    @classmethod
    def _check_mechanisms(cls, value: list[str]) -> list[str]:
        unknown = [m for m in value if m not in SASL_MECHANISMS]
        if unknown:
            raise InvalidConfigError(f"unsupported SASL mechanism(s) {unknown}; supported: {list(SASL_MECHANISMS)}")
        return value

    @field_validator("sasl_oauthbearer_expected_audience", mode="before")
    @classmethod
    def _split_audience(cls, value: object) -> object:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            return value
        return [part.strip() for item in items for part in str(item).split(",") if part.strip()]

    @field_validator("sasl_kerberos_principal_to_local_rules", mode="before")
    @classmethod
    def _split_kerberos_rules(cls, value: object) -> object:
        """A string (a flag, a variable) is split as Kafka splits its list settings; a YAML list stays as it is."""
        return split_rules(value) if isinstance(value, str) else value

    @field_validator("sasl_kerberos_principal_to_local_rules")
    @classmethod
    def _check_kerberos_rules(cls, value: list[str]) -> list[str]:
        KerberosShortNamer.from_rules("", value)  # Kafka refuses bad rules at start; so does kafkaguard
        return value

    @field_validator("ssl_principal_mapping_rules")
    @classmethod
    def _check_mapping_rules(cls, value: str) -> str:
        SslPrincipalMapper.from_rules(value)  # Kafka refuses bad rules at start; so does kafkaguard
        return value

    @field_validator("sasl_oauthbearer_jwks_endpoint_url")
    @classmethod
    def _check_jwks_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "file:")):
            raise InvalidConfigError(
                f"sasl_oauthbearer_jwks_endpoint_url {value!r} is neither https://… nor file:/path (plain http is "
                "refused: the keys that decide who a client is must not be tampered with on the way)"
            )
        return value

    @model_validator(mode="after")
    def _check_identity(self) -> Settings:
        """Settings that only mean something together (each message says what to add)."""
        for name in ("ssl_client_auth", "sasl_ssl_client_auth"):
            if getattr(self, name) != "none" and self.ssl_cafile is None:
                raise InvalidConfigError(
                    f"{name} {getattr(self, name)} needs ssl_cafile: the CAs that sign client certificates"
                )
        if self.ssl_keyfile_password is not None and self.ssl_keyfile_password_file is not None:
            raise InvalidConfigError("give the key password once: ssl_keyfile_password or ssl_keyfile_password_file")
        if (
            "OAUTHBEARER" in self.sasl_mechanisms
            and self.sasl_oauthbearer_jwks_endpoint_url is None
            and not self.oauthbearer_passed_through
        ):
            raise InvalidConfigError(
                "sasl_mechanisms has OAUTHBEARER but sasl_oauthbearer_jwks_endpoint_url is not set: the identity "
                "provider's keys (https://…/jwks or file:/path) are needed to check tokens"
            )
        if "GSSAPI" in self.sasl_mechanisms:
            self._check_kerberos()
        if self.proxy_protocol != "off" and not self.trusted_proxies:
            raise InvalidConfigError(
                f"proxy_protocol {self.proxy_protocol} needs trusted_proxies: the load balancers' addresses whose "
                "PROXY headers are believed"
            )
        return self

    def _check_kerberos(self) -> None:
        missing = [
            name
            for name in ("sasl_kerberos_service_name", "sasl_kerberos_keytab", "sasl_kerberos_principal")
            if not getattr(self, name)
        ]
        if missing:
            raise InvalidConfigError(
                f"sasl_mechanisms has GSSAPI but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
                "the node's own Kerberos principal (<service>/<host>@REALM), its keytab and the service name"
            )
        principal = _check_principal("sasl_kerberos_principal", str(self.sasl_kerberos_principal))
        if principal.host is None:
            raise InvalidConfigError(
                f"sasl_kerberos_principal {self.sasl_kerberos_principal!r} has no host: a service principal is "
                "<service>/<host>@REALM, the host the clients connect to"
            )
        if principal.service != self.sasl_kerberos_service_name:
            raise InvalidConfigError(
                f"sasl_kerberos_principal {self.sasl_kerberos_principal!r} is not of the service "
                f"sasl_kerberos_service_name {self.sasl_kerberos_service_name!r}: clients ask for a ticket to "
                f"{self.sasl_kerberos_service_name}/<host>"
            )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if cls._yaml_file is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=cls._yaml_file))
        return tuple(sources)

    @property
    def upstream_servers(self) -> list[tuple[str, int]]:
        """The upstream bootstrap servers as (host, port), in the order given (empty when unset)."""
        return parse_host_ports(self.upstream) if self.upstream else []

    @property
    def parsed_listeners(self) -> list[Listener]:
        return [Listener.parse(text) for text in self.listeners]

    @property
    def database_path(self) -> Path:
        return self.data_dir / "kafkaguard.db"

    @property
    def store_url(self) -> StoreUrl | None:
        """The PostgreSQL store, with its password (from ``store_password`` or ``store_password_file``), or None
        for SQLite in ``data_dir``.

        :raises InvalidConfigError: both password settings are given, or the file cannot be read.
        """
        return StoreSettings.of(self).url()


def _check_principal(setting: str, principal: str) -> KerberosName:
    """``principal`` parsed as Kafka parses a Kerberos name.

    :raises InvalidConfigError: it is not ``name[/host][@REALM]``.
    """
    try:  # without a realm, the default realm's (krb5.conf)
        name: KerberosName | None = KerberosName.parse(principal if "@" in principal else principal + "@")
    except KerberosMappingError:
        name = None
    if name is None or not name.service:
        raise InvalidConfigError(f"{setting} {principal!r} is not a Kerberos principal, name[/host]@REALM")
    return name


def _count_entries(value: object, separator: str, setting: str, example: str) -> object:
    """A mapping as it is (YAML); a string, or a repeated flag's strings, of comma-separated KEY<separator>COUNT
    entries → a mapping (the key is everything before the last ``separator``: an IPv6 address keeps its colons).

    :raises InvalidConfigError: an entry without a separator or with a count that is not a number.
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return value
    counts: dict[str, int] = {}
    for entry in (part.strip() for item in items for part in str(item).split(",")):
        if not entry:
            continue
        key, found, count = entry.rpartition(separator)
        if not found or not key.strip() or not count.strip().isdigit():
            raise InvalidConfigError(f"{setting} entry {entry!r} is not KEY{separator}COUNT; for example {example}")
        counts[key.strip()] = int(count)
    return counts


#: What a list or mapping setting looks like as JSON, where its default is empty.
_ENVIRONMENT_EXAMPLES: dict[str, object] = {
    "audit_kafka_routes": [{"category": "management", "topic": "audit-changes"}],
}


def _environment_error(message: str) -> str:
    """What to write instead, for pydantic-settings' 'error parsing value for field "x" from source ...'."""
    found = re.search(r'field "(\w+)"', message)
    if found is None or found[1] not in Settings.model_fields:
        return f"invalid configuration: {message}"
    name = found[1]
    default = Settings.model_fields[name].get_default(call_default_factory=True, validated_data={})
    example = json.dumps(default or _ENVIRONMENT_EXAMPLES.get(name, ["..."]))
    return (
        f"KAFKAGUARD_{name.upper()} is not JSON: a list or mapping setting in the environment is written as JSON, "
        f"for example KAFKAGUARD_{name.upper()}='{example}' (or set {name} in the config file)"
    )


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from flags (``overrides``; None values mean "not given"), environment, config file, defaults.

    :raises InvalidConfigError: every problem at once, each naming the setting and what is expected.
    """
    if config_file is not None and not config_file.is_file():
        raise InvalidConfigError(f"config file {config_file} does not exist")
    given = {key: value for key, value in overrides.items() if value is not None}

    class _FromFile(Settings):
        _yaml_file = config_file

    try:
        loaded = _FromFile(**given)
    except SettingsError as e:  # a KAFKAGUARD_* list or mapping that is not JSON: pydantic-settings cannot split it
        raise InvalidConfigError(_environment_error(str(e))) from None
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}" for err in e.errors())
        raise InvalidConfigError(f"invalid configuration: {problems}") from None
    values = {name: getattr(loaded, name) for name in Settings.model_fields}
    # which were given (flag, environment, file) stays known: with_served_settings fills in only the others
    return Settings.model_construct(_fields_set=set(loaded.model_fields_set), **values)


#: What a running server (``serve``, ``proxy``) records in its data directory for the offline commands.
SERVED_SETTINGS_FILE = "served-settings.json"
#: The settings recorded: what decides who may do what besides the ACLs.
_SERVED_KEYS = ("super_users", "allow_everyone_if_no_acl_found")


def record_served_settings(settings: Settings, served_by: str) -> None:
    """Write the authorization settings a server runs with into its data directory (``served-settings.json``), so
    that ``kafkaguard can`` / ``who-can`` with ``--data-dir`` answer as that server decides. A failure to write is
    logged, not fatal: the offline commands then say the super users are unknown.
    """
    record = {key: getattr(settings, key) for key in _SERVED_KEYS} | {"served_by": served_by}
    path = settings.data_dir / SERVED_SETTINGS_FILE
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        write_private(path, (json.dumps(record, indent=2) + "\n").encode())  # like every file of the data directory
    except OSError as e:
        log.warning("cannot record the served settings in %s: %s", path, e.strerror)


def with_served_settings(settings: Settings) -> tuple[Settings, str | None]:
    """``settings`` with the super users and the no-ACL rule a server recorded in its data directory, where they
    were not given (flag, environment or config file); and which server recorded them (None: nothing used).

    :raises InvalidConfigError: the file exists but is not what a server writes.
    """
    missing = [key for key in _SERVED_KEYS if key not in settings.model_fields_set]
    path = settings.data_dir / SERVED_SETTINGS_FILE
    if not missing or not path.is_file():
        return settings, None
    try:
        record = json.loads(path.read_text())
        values = {key: record[key] for key in missing}
        served_by = str(record["served_by"])
        parse_super_users(values.get("super_users", ""))
        if not isinstance(values.get("allow_everyone_if_no_acl_found", False), bool):
            raise TypeError("allow_everyone_if_no_acl_found is not a boolean")
    except (OSError, ValueError, KeyError, TypeError, InvalidConfigError) as e:
        raise InvalidConfigError(
            f"{path} is not a record of a server's settings ({e}); delete it, or start the "
            "server once to write it again"
        ) from None
    return settings.model_copy(update=values), served_by

"""The composition root. ``build_services(settings)`` opens the store, loads the authorizer and wires the
services; the server, the console and the CLI all start from here, so they agree on what a data directory holds.

The store is SQLite in the data directory, or the PostgreSQL database that ``store`` names
(``postgresql://user@host:port/database``, password from ``KAFKAGUARD_STORE_PASSWORD`` or
``store_password_file``); ``open_store`` opens either, so ``kafkaguard store migrate`` opens them the same way."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kafkaguard.audit.records.broker_refusals import BrokerRefusals
from kafkaguard.audit.records.logins import LoginStatistics
from kafkaguard.audit.records.refusals import ConnectionRefusals
from kafkaguard.audit.records.tls_certificates import TlsStatistics
from kafkaguard.audit.records.trail_statistics import AuditTrailStatistics
from kafkaguard.audit.records.upstream_failures import UpstreamFailures
from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.authorizer.rollout import Rollout
from kafkaguard.config import Settings
from kafkaguard.config.sections import LimitSettings, Sections, StoreSettings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.identity.failure_budget import LoginFailureBudget
from kafkaguard.identity.jwks import JwksStatistics
from kafkaguard.model import INTERNAL_ACTOR
from kafkaguard.scram import ScramMechanism
from kafkaguard.service.acls import AclService
from kafkaguard.service.credentials import CredentialService
from kafkaguard.service.events import EventRelay
from kafkaguard.service.groups import GroupService
from kafkaguard.service.quotas import QuotaService
from kafkaguard.service.readiness import Readiness
from kafkaguard.service.refused import RefusalLimits, RefusedChanges
from kafkaguard.service.topics import TopicService
from kafkaguard.store import Store
from kafkaguard.store.files import tighten, write_private
from kafkaguard.store.sqlite import SqliteStore
from kafkaguard.store.url import StoreUrl

if TYPE_CHECKING:
    from kafkaguard.store.postgres import PostgresStore

log = logging.getLogger(__name__)

#: The server secret that derives decoy SCRAM salts for unknown users; kept in the data directory so that an
#: unknown user's salt is the same after a restart (a changing salt would reveal that the user does not exist).
#: On a PostgreSQL store it is kept in the database instead, so that every node answers alike.
SECRET_FILE = "server.secret"  # noqa: S105 - a file name, not a secret
_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class Services:
    """Everything one process serves from. ``store`` is called from worker threads only, never on an event loop;
    on the loop, reads go to the services' in-memory views (the authorizer's snapshot, the topic catalog)."""

    #: The whole configuration as loaded (the CLI's and the served-settings record's); what runs reads ``sections``.
    settings: Settings
    store: Store
    authorizer: StandardAuthorizer
    acls: AclService
    credentials: CredentialService
    topics: TopicService
    server_secret: bytes = field(repr=False)  # derives SCRAM decoys: never in a repr
    quotas: QuotaService
    groups: GroupService
    #: Changes refused by authorization, as management events: bounded per request, rate-limited per principal.
    refused: RefusedChanges
    #: Logins of this process (Kafka listeners and console), shared by the server and the console.
    logins: LoginStatistics = field(default_factory=LoginStatistics)
    #: Connections refused or closed before login (limits, login deadline), counted and logged rate-limited.
    refusals: ConnectionRefusals = field(default_factory=ConnectionRefusals)
    #: The audit trail's sinks: records sent, spooled, dropped, and the spool's bytes (the console's /metrics).
    audit_trail: AuditTrailStatistics = field(default_factory=AuditTrailStatistics)
    #: Where the services' management events go besides the store: callable as (category, subject, data); a no-op
    #: until an audit trail connects to it (``events.connect(trail.record_event)``). Services built by hand (tests)
    #: get their own relay, not connected to this one.
    events: EventRelay = field(default_factory=EventRelay)
    #: Permissive enforcement and the shadow ACL set (``authorizer.rollout``), read by the console's health too.
    rollout: Rollout = field(default_factory=Rollout)
    #: Failed logins per address and per user name, for every mechanism of every listener and the console
    #: (``identity.failure_budget``): one per process, so that the console and the Kafka listeners share it.
    login_budget: LoginFailureBudget = field(default_factory=LoginFailureBudget)
    #: The JWKS refreshes of the process's OAUTHBEARER key sources, by reason (the console's ``/metrics``).
    jwks: JwksStatistics = field(default_factory=JwksStatistics)
    #: The TLS listeners' served certificates (notAfter) and their reloads (``node.tls_reload``; ``/metrics``).
    tls: TlsStatistics = field(default_factory=TlsStatistics)
    #: The proxy's failed upstream connections by reason (``proxy.upstream``; ``/metrics``).
    upstream_failures: UpstreamFailures = field(default_factory=UpstreamFailures)
    #: In passthrough, the broker's refusals of what kafkaguard allowed (``proxy.broker_refusals``; ``/metrics``).
    broker_refusals: BrokerRefusals = field(default_factory=BrokerRefusals)
    #: Ready, or draining since a SIGTERM (``node.drain``): what the console's /healthz tells a balancer.
    readiness: Readiness = field(default_factory=Readiness)
    #: ``settings`` in typed sections, each read by what it configures (``config.sections``); built once here.
    sections: Sections = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sections", Sections.of(self.settings))  # frozen: set once, as __init__ would

    def close(self) -> None:
        self.store.close()

    def replace_settings(self, settings: Settings) -> None:
        """Run with ``settings`` from now on (a SIGHUP's live settings, ``node.live``, which applies them to what
        was built from the old ones): what reads ``sections`` per use sees them at its next read."""
        object.__setattr__(self, "settings", settings)  # frozen for everyone else: replaced whole, never edited
        object.__setattr__(self, "sections", Sections.of(settings))


def build_services(settings: Settings) -> Services:
    """Open (or create) the data directory and everything behind it.

    :raises InvalidConfigError: the data directory cannot be created or written.
    """
    sections = Sections.of(settings)
    where = sections.store
    try:
        where.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidConfigError(f"data directory {where.data_dir} cannot be created: {e.strerror}") from e
    url = where.url()
    store: Store
    if url is None:
        secret = _server_secret(where.data_dir / SECRET_FILE)
        store = SqliteStore(where.database_path)
    else:  # every node of one PostgreSQL store shares its secret, so all answer an unknown user alike
        postgres = open_postgres_store(url)
        secret, store = postgres.server_secret(lambda: secrets.token_bytes(_SECRET_BYTES)), postgres
    log.info("store: %s", url if url is not None else where.database_path)
    authorization, limits = sections.authorization, sections.limits
    authorizer = StandardAuthorizer(
        authorization.super_users, authorization.allow_everyone_if_no_acl_found, ready=False
    )
    # Memberships before the ACLs: AclService completes the initial load, after which every decision counts.
    events = EventRelay()
    groups = GroupService(store, authorizer, events=events)
    acls = AclService(store, authorizer, events=events)
    credentials = CredentialService(store, events=events)
    topics = TopicService(store, default_partitions=sections.topics.default_partitions, events=events)
    quotas = QuotaService(store, events=events)
    refusal_limits = RefusalLimits(
        limits.refused_changes_per_request, limits.refused_changes_burst, limits.refused_changes_per_minute
    )
    refused = RefusedChanges(store, events, refusal_limits)
    services = Services(
        settings,
        store,
        authorizer,
        acls,
        credentials,
        topics,
        secret,
        quotas,
        groups,
        refused,
        events=events,
        rollout=Rollout(authorization.enforcement),
        login_budget=login_budget(limits),
    )
    _bootstrap_admin(services)
    return services


def login_budget(limits: LimitSettings) -> LoginFailureBudget:
    """The failed-login budget ``limits`` describe (``login_failures_*``, ``login_*_memory_seconds``)."""
    return LoginFailureBudget(
        address_burst=limits.login_failures_per_address_burst,
        address_per_minute=limits.login_failures_per_address_per_minute,
        user_burst=limits.login_failures_per_user_burst,
        user_per_minute=limits.login_failures_per_user_per_minute,
        failure_memory_seconds=limits.login_failure_memory_seconds,
        success_memory_seconds=limits.login_success_memory_seconds,
        ipv6_prefix_length=limits.ipv6_prefix_length,
    )


def open_store(where: StoreSettings) -> Store:
    """The configured store alone, without loading anything from it (for a command that only reads it, such as
    ``acls history``): the PostgreSQL store ``store`` names, else the data directory's SQLite file.

    :raises InvalidConfigError: no store there (an SQLite data directory without a database), or no psycopg.
    :raises StoreError: it cannot be opened.
    """
    url = where.url()
    if url is not None:
        return open_postgres_store(url)
    if not where.database_path.exists():
        raise InvalidConfigError(
            f"no store at {where.database_path}: give the server's --data-dir, or --config naming its store"
        )
    return SqliteStore(where.database_path)


def open_postgres_store(url: StoreUrl) -> PostgresStore:
    """The PostgreSQL store at ``url`` (which carries the password, never shown).

    :raises InvalidConfigError: the ``postgresql`` extra (psycopg) is not installed.
    :raises StoreError: PostgreSQL cannot be reached (``StoreUnavailableError``) or refused.
    """
    try:
        from kafkaguard.store.postgres import PostgresStore
    except ImportError as e:
        raise InvalidConfigError(
            f"the store {url} is PostgreSQL, which needs psycopg: pip install 'kafkaguard[postgresql]' ({e})"
        ) from None
    return PostgresStore(url)


def _server_secret(path: Path) -> bytes:
    tighten(path)
    try:
        secret = path.read_bytes()
        if len(secret) >= _SECRET_BYTES:
            return secret
    except FileNotFoundError:
        pass
    # Written once; a concurrent first start may race, and the last writer's secret wins for both.
    write_private(path, secrets.token_bytes(_SECRET_BYTES))
    return path.read_bytes()


def _bootstrap_admin(services: Services) -> None:
    """``admin_user``/``admin_password``: create the first SCRAM user on first start, never overwrite it."""
    identity = services.sections.identity
    if identity.admin_user is None and identity.admin_password is None:
        return
    if identity.admin_user is None:
        raise InvalidConfigError(
            "admin_password is set (KAFKAGUARD_ADMIN_PASSWORD?) but admin_user is not: name the admin with "
            "admin_user (config/kafkaguard.yaml names admin: pass --config config/kafkaguard.yaml), or unset "
            "KAFKAGUARD_ADMIN_PASSWORD in this shell"
        )
    if identity.admin_password is None:
        log.info(
            "admin_user %s: no KAFKAGUARD_ADMIN_PASSWORD given; existing credentials are kept "
            "(create one with: kafkaguard users add %s)",
            identity.admin_user,
            identity.admin_user,
        )
        return
    for mechanism in ScramMechanism:
        if mechanism.mechanism_name not in identity.sasl_mechanisms:
            continue
        if services.credentials.lookup(identity.admin_user, mechanism) is None:
            result = services.credentials.upsert_password(
                identity.admin_user, mechanism, identity.admin_password.get_secret_value(), actor=INTERNAL_ACTOR
            )
            if not result.succeeded:
                raise InvalidConfigError(f"admin user {identity.admin_user!r}: {result.error}")
            log.info("created SCRAM credential %s for bootstrap user %s", mechanism, identity.admin_user)

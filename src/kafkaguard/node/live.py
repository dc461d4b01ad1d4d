"""What a SIGHUP changes in a running ``kafkaguard serve`` or ``kafkaguard proxy``: the config file is read again
(with the same flags and environment as at the start), and the settings in ``LIVE_SETTINGS`` that changed are applied;
any other changed setting is named in one warning ("… needs a restart: listeners, ssl_client_auth") and keeps its
running value: nothing changes half-way, nothing is ignored silently.

Worked example (``max_connections_per_ip: 100`` → ``20``, ``log_level: INFO`` → ``DEBUG``, a listener's port
changed)::

    kill -HUP $(pidof kafkaguard)   # illustrative
    # INFO  SIGHUP: applied log_level, max_connections_per_ip
    # WARNING SIGHUP: changed settings not applied, each needs a restart: listeners

A config file that does not load (bad YAML, an invalid value) changes nothing; the error is logged in one line.

**Why these.** A live setting is one whose new value the running objects can take without touching an open
connection: the connection limits and the login failure budget are read at each admission or failed login
(``AdmissionControl.reconfigure``, ``LoginFailureBudget.reconfigure``), the audit routes at each event (the Kafka
sink's router is one attribute, swapped whole), the log level at each log call, ``shutdown_grace_seconds`` when a
SIGTERM's drain starts. Listeners, TLS settings (the files
themselves are watched: ``node.tls_reload``), the store, identity and the upstream are built into sockets, contexts
and clients at the start; a restart (one node at a time behind the load balancer) changes those.

Cost model: one config file read and validation in a worker thread, one comparison of every setting, one rebuild
of the typed sections: milliseconds, once per SIGHUP.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkaguard.config import Settings

if TYPE_CHECKING:
    from kafkaguard.bootstrap import Services

log = logging.getLogger(__name__)

#: The connection limits (``node.admission``): read at each admission.
CONNECTION_LIMITS = frozenset(
    {
        "max_connections",
        "max_connections_per_ip",
        "max_connections_per_ip_overrides",
        "max_connections_per_listener",
        "max_connection_creation_rate_per_ip",
    }
)
#: The failed-login budget (``identity.failure_budget``): read at each failed login.
LOGIN_FAILURE_BUDGET = frozenset(
    {
        "login_failures_per_address_burst",
        "login_failures_per_address_per_minute",
        "login_failures_per_user_burst",
        "login_failures_per_user_per_minute",
    }
)
#: Where the audit trail's Kafka sink sends each event (``audit.records.routing``).
AUDIT_ROUTING = frozenset({"audit_kafka_routes", "audit_kafka_topic"})
#: The settings a SIGHUP applies; every other changed one needs a restart (and is named so).
#: Read when a SIGTERM's drain starts (``node.drain``).
SHUTDOWN = frozenset({"shutdown_grace_seconds"})
LIVE_SETTINGS: frozenset[str] = CONNECTION_LIMITS | LOGIN_FAILURE_BUDGET | AUDIT_ROUTING | SHUTDOWN | {"log_level"}


def changed_settings(running: Settings, loaded: Settings) -> list[str]:
    """The names of the settings whose values differ, in name order (secrets compared, never shown)."""
    return sorted(name for name in Settings.model_fields if getattr(running, name) != getattr(loaded, name))


def apply_log_level(level: str | None) -> None:
    """Set the root logger's level (None: leave the command line's ``--log-level``)."""
    if level is not None:
        logging.getLogger().setLevel(level)


def plan(running: Settings, loaded: Settings) -> tuple[Settings, list[str], list[str]]:
    """What a reload to ``loaded`` runs with: ``running`` with the changed live settings of ``loaded``; and the
    changed settings applied, and those that need a restart."""
    changed = changed_settings(running, loaded)
    live = [name for name in changed if name in LIVE_SETTINGS]
    fixed = [name for name in changed if name not in LIVE_SETTINGS]
    applied = running.model_copy(update={name: getattr(loaded, name) for name in live})
    return applied, live, fixed


def log_outcome(live: list[str], fixed: list[str]) -> None:
    """The reload's log lines: what was applied, and (a warning) what needs a restart."""
    if not live and not fixed:
        log.info("SIGHUP: the configuration is unchanged")
    if live:
        log.info("SIGHUP: applied %s", ", ".join(live))
    if fixed:
        log.warning("SIGHUP: changed settings not applied, each needs a restart: %s", ", ".join(fixed))


def apply_budget(services: Services) -> None:
    """The login failure budget from ``services``' (new) limits."""
    limits = services.sections.limits
    services.login_budget.reconfigure(
        address_burst=limits.login_failures_per_address_burst,
        address_per_minute=limits.login_failures_per_address_per_minute,
        user_burst=limits.login_failures_per_user_burst,
        user_per_minute=limits.login_failures_per_user_per_minute,
    )

"""The console's Prometheus metrics, in a registry of its own (one per app: no process-global state).

* ``kafkaguard_console_decisions_total{result}``: the console's authorization decisions (ALLOWED, DENIED);
* ``kafkaguard_console_logins_total{result}``: HTTP Basic logins (ok, failed, throttled: answered 429 unchecked);
* ``kafkaguard_console_late_login_failures_total``: refused logins answered after ``console_login_failure_seconds``
  because their check took longer (``kafkaguard.console.failure_timing``): above zero, raise the setting;
* ``kafkaguard_console_request_duration_seconds{method,route}``: request latency by route template;
* ``kafkaguard_acls``: ACLs the authorizer holds now (read at scrape time);
* ``kafkaguard_enforcement_permissive``, ``kafkaguard_permissive_would_be_denials_total``, ``kafkaguard_shadow_acls``,
  ``kafkaguard_shadow_flips_total{direction}``: rolling out ACL changes (``RolloutCollector``);
* ``kafkaguard_logins_total{listener,mechanism,result}``: the process's logins (``Services.logins``: Kafka
  listeners, and the console when it records there), read at scrape time; present only when ``logins`` is given;
* ``kafkaguard_audit_records_total{sink,outcome}``: the audit trail's records per sink (file, kafka) and outcome
  (sent, spooled, dropped, routed_drop), ``kafkaguard_audit_spool_dropped_records_total{principal,category}``: what
  the full spool lost, by who caused it (the ten principals that lost the most, the rest as ``(others)``), and
  ``kafkaguard_audit_spool_bytes``: the Kafka sink's spool on disk (``Services.audit_trail``, read at scrape time;
  present only when ``audit_trail`` is given);
* ``kafkaguard_connections_refused_total{listener,reason}``: Kafka connections refused or closed before login
  (``Services.refusals``: connection limits, the login deadline, oversized pre-login frames), read at scrape time;
  present only when ``refusals`` is given;
* ``kafkaguard_refused_changes_total{outcome}``: items of changes refused by authorization (``Services.refused``,
  ``service.refused``) by what became of them: ``recorded`` (an event each), ``summarized`` (counted in their
  request's summary event), ``rate_limited`` (not recorded: their principal was over refused_changes_burst /
  refused_changes_per_minute), read at scrape time; present only when ``refused`` is given;
* ``kafkaguard_login_throttled_total{mechanism,key}``: logins refused unchecked by the process's failed-login budget
  (``Services.login_budget``), by mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER, SSL, console) and by
  the bucket that was spent (address, user); present only when ``login_budget`` is given;
* ``kafkaguard_jwks_refreshes_total{reason}`` (scheduled, unknown_kid) and
  ``kafkaguard_jwks_refreshes_skipped_total{reason}`` (rate_limited, kid_recently_asked, kid_too_long): the
  OAUTHBEARER key set's refreshes and the unknown-kid refreshes it did not make (``Services.jwks``); present only when
  ``jwks`` is given;
* ``kafkaguard_tls_certificate_expiry_seconds{listener}``: seconds until the notAfter of the certificate each TLS
  listener protocol (SSL, SASL_SSL) serves, computed at scrape time (negative: expired), and
  ``kafkaguard_tls_reloads_total{listener,result}`` (ok, refused: the changed files did not load and the previous
  certificate is still served) (``Services.tls``, ``node.tls_reload``); present only when ``tls`` is given;
* ``kafkaguard_upstream_failures_total{reason}``: the proxy's failed upstream connections (unreachable, timeout,
  tls, login, closed, protocol; ``Services.upstream_failures``, ``proxy.upstream``); present only when
  ``upstream_failures`` is given (the proxy's console);
* ``kafkaguard_broker_refusals_total{api,error}``: in passthrough, the resources kafkaguard allowed and the broker
  then refused with an authorization error (``Services.broker_refusals``, ``proxy.broker_refusals``); with
  ``upstream_failures``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from kafkaguard.audit.records.broker_refusals import BrokerRefusals
from kafkaguard.audit.records.logins import LoginStatistics
from kafkaguard.audit.records.refusals import ConnectionRefusals
from kafkaguard.audit.records.tls_certificates import TlsStatistics
from kafkaguard.audit.records.trail_statistics import OTHERS, TOP_PRINCIPALS, AuditTrailStatistics
from kafkaguard.audit.records.upstream_failures import UpstreamFailures
from kafkaguard.authorizer.rollout import Rollout
from kafkaguard.identity.failure_budget import LoginFailureBudget
from kafkaguard.identity.jwks import JwksStatistics, RefreshReason, SkipReason
from kafkaguard.service.refused import RefusedChanges

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ConsoleMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(
        self,
        acl_count: Callable[[], int],
        logins: LoginStatistics | None = None,
        refusals: ConnectionRefusals | None = None,
        audit_trail: AuditTrailStatistics | None = None,
        rollout: Rollout | None = None,
        refused: RefusedChanges | None = None,
        login_budget: LoginFailureBudget | None = None,
        jwks: JwksStatistics | None = None,
        tls: TlsStatistics | None = None,
        upstream_failures: UpstreamFailures | None = None,
        broker_refusals: BrokerRefusals | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        if broker_refusals is not None:
            self.registry.register(BrokerRefusalCollector(broker_refusals))
        if tls is not None:
            self.registry.register(TlsCollector(tls))
        if upstream_failures is not None:
            self.registry.register(UpstreamFailureCollector(upstream_failures))
        if refused is not None:
            self.registry.register(RefusedChangesCollector(refused))
        if login_budget is not None:
            self.registry.register(ThrottleCollector(login_budget))
        if jwks is not None:
            self.registry.register(JwksCollector(jwks))
        if audit_trail is not None:
            self.registry.register(AuditTrailCollector(audit_trail))
        if rollout is not None:
            self.registry.register(RolloutCollector(rollout))
        if logins is not None:
            self.registry.register(LoginCollector(logins))
        if refusals is not None:
            self.registry.register(RefusalCollector(refusals))
        self.decisions = Counter(
            "kafkaguard_console_decisions",
            "Authorization decisions of console requests.",
            ["result"],
            registry=self.registry,
        )
        self.logins = Counter(
            "kafkaguard_console_logins", "HTTP Basic logins to the console.", ["result"], registry=self.registry
        )
        self.late_failures = Counter(
            "kafkaguard_console_late_login_failures",
            "Refused console logins answered after console_login_failure_seconds (their check took longer).",
            registry=self.registry,
        )
        self.latency = Histogram(
            "kafkaguard_console_request_duration_seconds",
            "Console request latency by route.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.acls = Gauge("kafkaguard_acls", "ACLs the authorizer holds.", registry=self.registry)
        self.acls.set_function(lambda: float(acl_count()))
        for result in ("ALLOWED", "DENIED"):
            self.decisions.labels(result)
        for result in ("ok", "failed", "throttled"):
            self.logins.labels(result)

    #: Combines this process's exposition with the other processes' serving the same node (``node.worker_metrics``,
    #: set by the command that runs several workers); None: this process's alone.
    combine: Callable[[bytes], bytes] | None = None

    def render_own(self) -> bytes:
        """This process's metrics alone."""
        return generate_latest(self.registry)

    def render(self) -> bytes:
        """What ``/metrics`` answers: this process's metrics, with the other workers' when there are several."""
        own = generate_latest(self.registry)
        return own if self.combine is None else self.combine(own)


class LoginCollector(Collector):
    """``kafkaguard_logins_total{listener,mechanism,result}`` from a ``LoginStatistics``, read at each scrape."""

    def __init__(self, logins: LoginStatistics) -> None:
        self._logins = logins

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_logins",
            "Logins by listener, SASL mechanism and result (ok, failed), as Kafka's successful-/failed-authentication"
            "-total.",
            labels=["listener", "mechanism", "result"],
        )
        for key, count in self._logins.counts().items():
            family.add_metric([key.listener, key.mechanism, key.result], count)
        yield family


class ThrottleCollector(Collector):
    """``kafkaguard_login_throttled_total{mechanism,key}`` from a ``LoginFailureBudget``, read at each scrape."""

    def __init__(self, budget: LoginFailureBudget) -> None:
        self._budget = budget

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_login_throttled",
            "Logins refused unchecked by the failed-login budget, by mechanism and the bucket that was spent "
            "(address: login_failures_per_address_*; user: login_failures_per_user_*).",
            labels=["mechanism", "key"],
        )
        for (mechanism, key), count in self._budget.throttled_counts().items():
            family.add_metric([mechanism, key], count)
        yield family


class JwksCollector(Collector):
    """``kafkaguard_jwks_refreshes_total{reason}`` and ``kafkaguard_jwks_refreshes_skipped_total{reason}`` from a
    ``JwksStatistics``, read at each scrape."""

    def __init__(self, statistics: JwksStatistics) -> None:
        self._statistics = statistics

    def collect(self) -> Iterator[CounterMetricFamily]:
        counts = self._statistics.counts()
        refreshes = CounterMetricFamily(
            "kafkaguard_jwks_refreshes",
            "Refreshes of the OAUTHBEARER JWKS, by reason (scheduled: every sasl_oauthbearer_jwks_endpoint_refresh_ms; "
            "unknown_kid: a token named a kid the keys do not have).",
            labels=["reason"],
        )
        for reason in RefreshReason:
            refreshes.add_metric([reason.value], counts.get(reason, 0))
        yield refreshes
        skipped = CounterMetricFamily(
            "kafkaguard_jwks_refreshes_skipped",
            "Unknown-kid refreshes not made, by reason (rate_limited: "
            "sasl_oauthbearer_jwks_expedited_refreshes_per_minute used up; kid_recently_asked: Kafka's once per kid a "
            "minute; kid_too_long: Kafka's 1000-character bound).",
            labels=["reason"],
        )
        for skip in SkipReason:
            skipped.add_metric([skip.value], counts.get(skip, 0))
        yield skipped


class RolloutCollector(Collector):
    """Permissive enforcement and the shadow ACL set (``authorizer.rollout``), read at each scrape:
    ``kafkaguard_enforcement_permissive`` (1 while requests the ACLs deny are forwarded),
    ``kafkaguard_permissive_would_be_denials_total``, ``kafkaguard_shadow_acls`` and
    ``kafkaguard_shadow_flips_total{direction}`` (newly_denied, newly_allowed)."""

    def __init__(self, rollout: Rollout) -> None:
        self._rollout = rollout

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rollout = self._rollout
        yield GaugeMetricFamily(
            "kafkaguard_enforcement_permissive",
            "1 while enforcement is permissive: requests the ACLs deny are forwarded and audited as would-be denials.",
            value=1.0 if rollout.permissive else 0.0,
        )
        yield CounterMetricFamily(
            "kafkaguard_permissive_would_be_denials",
            "Decisions audited as DENIED but not enforced (permissive).",
            value=rollout.would_be_denials,
        )
        shadow = rollout.shadow
        yield GaugeMetricFamily(
            "kafkaguard_shadow_acls",
            "ACLs of the shadow (candidate) set decided beside the active one (0: none).",
            value=0 if shadow is None else shadow.acl_count,
        )
        flips = CounterMetricFamily(
            "kafkaguard_shadow_flips", "Decisions the shadow ACL set would flip, by direction.", labels=["direction"]
        )
        flips.add_metric(["newly_denied"], rollout.shadow_newly_denied)
        flips.add_metric(["newly_allowed"], rollout.shadow_newly_allowed)
        yield flips


class RefusalCollector(Collector):
    """``kafkaguard_connections_refused_total{listener,reason}`` from a ``ConnectionRefusals``, read at each scrape."""

    def __init__(self, refusals: ConnectionRefusals) -> None:
        self._refusals = refusals

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_connections_refused",
            "Kafka connections refused or closed before login, by listener and reason (the setting that refused "
            "them: max_connections, max_connections_per_listener, max_connections_per_ip, connection_creation_rate, "
            "sasl_login_timeout, pre_login_frame_size, protocol_violation, proxy_protocol, login_failures).",
            labels=["listener", "reason"],
        )
        for key, count in self._refusals.counts().items():
            family.add_metric([key.listener, key.reason], count)
        yield family


class RefusedChangesCollector(Collector):
    """``kafkaguard_refused_changes_total{outcome}`` from a ``RefusedChanges``, read at each scrape."""

    def __init__(self, refused: RefusedChanges) -> None:
        self._refused = refused

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_refused_changes",
            "Items of changes refused by authorization, by outcome: recorded (a management event each), summarized "
            "(counted in their request's summary event), rate_limited (not recorded: the principal's "
            "refused_changes_burst / refused_changes_per_minute was used up).",
            labels=["outcome"],
        )
        for outcome, count in self._refused.counts().items():
            family.add_metric([outcome], count)
        yield family


class AuditTrailCollector(Collector):
    """``kafkaguard_audit_records_total{sink,outcome}`` and ``kafkaguard_audit_spool_bytes`` from an
    ``AuditTrailStatistics``, read at each scrape."""

    def __init__(self, statistics: AuditTrailStatistics) -> None:
        self._statistics = statistics

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_audit_records",
            "Audit trail records by sink (file, kafka) and outcome: sent (written or acknowledged), spooled (waited in "
            "the spool for the cluster), dropped (lost, and logged: spool full or writer behind), routed_drop (a "
            "routing rule's drop).",
            labels=["sink", "outcome"],
        )
        for (sink, outcome), count in self._statistics.counts().items():
            family.add_metric([sink, outcome], count)
        yield family
        drops = CounterMetricFamily(
            "kafkaguard_audit_spool_dropped_records",
            "Audit records the Kafka sink's full spool lost, by the principal who caused them and category: the "
            f"{TOP_PRINCIPALS} principals that lost the most by name, the rest together as {OTHERS}.",
            labels=["principal", "category"],
        )
        for (principal, category), count in self._statistics.spool_drops().items():
            drops.add_metric([principal, category], count)
        yield drops
        size = self._statistics.spool_bytes
        if size is not None:
            yield GaugeMetricFamily(
                "kafkaguard_audit_spool_bytes", "The audit Kafka sink's spool on disk, in bytes.", value=size
            )


class TlsCollector(Collector):
    """``kafkaguard_tls_certificate_expiry_seconds{listener}`` and ``kafkaguard_tls_reloads_total{listener,result}``
    from a ``TlsStatistics``, read at each scrape; ``clock`` is the wall clock (tests give their own)."""

    def __init__(self, statistics: TlsStatistics, clock: Callable[[], float] = time.time) -> None:
        self._statistics = statistics
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        expiry = GaugeMetricFamily(
            "kafkaguard_tls_certificate_expiry_seconds",
            "Seconds until the notAfter of the certificate a TLS listener serves (negative: expired); falls at the "
            "clock's pace and jumps up when a renewed certificate is reloaded (tls_reload_interval_seconds).",
            labels=["listener"],
        )
        now = self._clock()
        for listener, not_after in self._statistics.not_after().items():
            expiry.add_metric([listener], not_after - now)
        yield expiry
        reloads = CounterMetricFamily(
            "kafkaguard_tls_reloads",
            "Reloads of a TLS listener's changed certificate, key, CA or CRL files, by result (ok; refused: they did "
            "not load and the previous certificate is still served, the log says why).",
            labels=["listener", "result"],
        )
        for (listener, result), count in self._statistics.reloads().items():
            reloads.add_metric([listener, result.value], count)
        yield reloads


class UpstreamFailureCollector(Collector):
    """``kafkaguard_upstream_failures_total{reason}`` from an ``UpstreamFailures``, read at each scrape."""

    def __init__(self, failures: UpstreamFailures) -> None:
        self._failures = failures

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_upstream_failures",
            "The proxy's failed upstream connections, by reason: unreachable (dial refused or no route), timeout "
            "(upstream_timeout_seconds), tls (handshake failed), login (the proxy's own credential refused), closed "
            "(closed or reset in use), protocol (a frame the proxy cannot take). Each closed its client's connection.",
            labels=["reason"],
        )
        for reason, count in self._failures.counts().items():
            family.add_metric([reason.value], count)
        yield family


class BrokerRefusalCollector(Collector):
    """``kafkaguard_broker_refusals_total{api,error}`` from a ``BrokerRefusals``, read at each scrape."""

    def __init__(self, refusals: BrokerRefusals) -> None:
        self._refusals = refusals

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "kafkaguard_broker_refusals",
            "In upstream_authentication passthrough: resources kafkaguard allowed and the broker then refused with an "
            "authorization error (its own ACLs), by API and Kafka error name. One per refused resource of a request.",
            labels=["api", "error"],
        )
        for kind, count in self._refusals.counts().items():
            family.add_metric([kind.api, kind.error], count)
        yield family

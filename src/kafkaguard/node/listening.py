"""What ``kafkaguard serve`` and the proxy share as processes: listeners, connection limits, the background sync
with other processes, and clean shutdown. Each is a ``ListeningServer`` that says what answers its connections
(``dispatcher``): ``server.app.KafkaServer``, ``proxy.app.ProxyServer``.

Each accepted TCP connection is first admitted or refused (``admission``: per address, creation rate, per listener,
in all) before anything is read from it or a TLS handshake starts; a refusal closes it, and is counted and logged
rate-limited (``Services.refusals``).

**Behind a load balancer** (``proxy_protocol`` optional or required): a connection from one of ``trusted_proxies``
is admitted for the address its PROXY header carries, once that header is read (``node.proxy_header``; before any
Kafka byte or TLS handshake, within ``PROXY_HEADER_SECONDS``); that address is the client's for host ACLs, connection
limits and the audit. With ``required``, a connection from any other address is refused unread; with ``optional`` it
is served under its socket's address, and a PROXY header it sends is not believed (it fails as the bytes of no Kafka
request). An admitted connection waits as a bare file descriptor until it sends its first
bytes (``accept.Doorway``), and only then gets streams, a TLS handshake and a task. A SASL listener's client must
log in within ``sasl_login_timeout_seconds`` of its TCP accept, the wait and the TLS handshake included.

**Client certificates and the failure budget.** On a listener that verifies client certificates (``ssl_client_auth``
or ``sasl_ssl_client_auth`` requested or required) the TLS handshake is a login: it takes a failed login of the
client's address from ``Services.login_budget`` before it starts, gives it back when the certificate was accepted and
maps to a principal, keeps it when the handshake fails (no, unknown or revoked certificate) or no mapping rule
applies. An address with no failed login left is closed before its handshake (no CPU spent on it), counted and logged
as a ``login_failures`` refusal.

A server is started and stopped by its owner (tests start it on port 0 and read ``bound_listeners``);
``serve(settings, server_type)`` is what ``kafkaguard serve`` and ``kafkaguard proxy`` call: it serves until
SIGTERM/SIGINT, then drains (``drain``) and stops.

**Graceful drain** (``drain``, at most ``shutdown_grace_seconds``): the process turns not-ready first
(``Services.readiness``: the console's ``/healthz`` answers 503 "draining", so a balancer sends nothing new), then
every listener stops accepting (its listening sockets closed: new connections are refused by the kernel, and a
balancer's next connect goes to another node; connections accepted that had sent nothing are closed). Every open
connection then ends at its next request boundary (``protocol.connection``: what had arrived is answered, relayed
fetches and long polls included; an idle one is closed at once), so that Kafka clients reconnect through the
balancer. At the deadline, or at a second SIGTERM (``hurry``), the connections still open are closed wherever they
are. One line says how many ended at a request boundary and how many were forced; then ``stop`` flushes the audit
trail as on any stop.

Why this order: a balancer that still sends to a node whose listener is closed gets a refused connect, which it
retries elsewhere (HAProxy ``retries``/``option redispatch``), while /healthz lets one that checks health stop first;
a Kafka client's idle connection is closed rather than kept to the deadline, because only a closed connection makes
it look for another node, and closing it between requests loses nothing (its next request goes elsewhere).

Cost model: the drain touches each open connection once (an ``ioctl`` for its unread bytes), in batches that yield
the loop, and again every ``DRAIN_SWEEP_SECONDS`` for those still open; its waits are timers, not polls of the
connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from kafkaguard.audit.records.login_events import record_login_event
from kafkaguard.audit.records.refusals import RefusalReason
from kafkaguard.audit.trail.from_settings import audit_trail, reroute
from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import Listener, SecurityProtocol, Settings, record_served_settings
from kafkaguard.config.sections import ListenerSettings
from kafkaguard.errors import InvalidConfigError, KafkaguardError
from kafkaguard.following import follow_store
from kafkaguard.identity.failure_budget import Attempt, LoginThrottledError
from kafkaguard.model import java_host
from kafkaguard.node import live
from kafkaguard.node.accept import Doorway, open_streams
from kafkaguard.node.admission import Admission, AdmissionControl, ConnectionLimits, IpQuotaRates, Refusal
from kafkaguard.node.collector import Collector
from kafkaguard.node.descriptors import reserve_descriptors
from kafkaguard.node.listener_summary import listener_summary
from kafkaguard.node.proxy_header import ProxyHeaderError, read_proxy_header
from kafkaguard.node.rollout_watch import AclFileLoader, RolloutWatch
from kafkaguard.node.signals import run_until_signalled
from kafkaguard.node.tls_reload import ReloadingContext, watch
from kafkaguard.node.trusted import TrustedProxies
from kafkaguard.node.workers import in_worker
from kafkaguard.protocol.connection import Connection, Dispatcher
from kafkaguard.protocol.identity import Identity, certificate_super_user_warnings
from kafkaguard.protocol.repeated_lines import COLLAPSE
from kafkaguard.protocol.scope import BrokerInfo, ListenerContext
from kafkaguard.protocol.sessions import SessionRegistry
from kafkaguard.protocol.violations import ProtocolViolations, ViolationPolicy

log = logging.getLogger(__name__)


#: kafkaguard is the cluster's only broker and its controller.
NODE_ID = 1
#: A connection's read buffer limit (asyncio's StreamReader pauses the socket above twice this).
_STREAM_LIMIT = 64 * 1024
#: File descriptors reserved besides the connections' (listeners, store, logs, the proxy's per-broker ports).
_OTHER_DESCRIPTORS = 1024
#: How long a trusted proxy has to send its PROXY header: load balancers send it with the connection's first bytes.
PROXY_HEADER_SECONDS = 5.0
#: How often a drain looks again at the connections still open (one that waits for a request that is not coming
#: is closed then: ``Connection.drain``).
DRAIN_SWEEP_SECONDS = 0.25
#: Connections a drain touches before it lets the loop serve others.
_DRAIN_BATCH = 256


@dataclass(frozen=True)
class _Bound:
    listener: Listener
    doorway: Doorway
    port: int


class ListeningServer(ABC):
    #: Who records its settings in the data directory (``config.record_served_settings``).
    SERVED_BY: str

    #: Whether ``enforcement: permissive`` means anything here (the proxy's forwarded requests only).
    PERMISSIVE: bool = False

    def __init__(self, services: Services, *, shadow_loader: AclFileLoader | None = None) -> None:
        self.services = services
        sections = services.sections
        if services.rollout.permissive and not self.PERMISSIVE:
            raise InvalidConfigError(
                f"enforcement permissive is for kafkaguard proxy only; {self.SERVED_BY} answers requests itself, "
                "with nothing behind it to enforce: use shadow_acls to try a candidate ACL set"
            )
        #: The shadow ACL file and the permissive reminders (``node.rollout_watch``).
        self.rollout = RolloutWatch(services, shadow_loader)
        self.rollout.load()  # a bad shadow file stops the start before anything runs
        #: The audit trail (the file, the Kafka topic sink), None when neither is configured.
        self.audit = audit_trail(sections.audit, services.audit_trail)
        if self.audit is not None:
            # Management events made through any door of this process (Kafka wire, the console) go to the trail too.
            services.events.connect(self.audit.record_event)
        #: Logins per listener and mechanism, shared with a console in the same process (``Services.logins``).
        self.logins = services.logins
        self.cluster_id = services.topics.cluster_id()  # from memory: this may run on the event loop
        #: The logged-in sessions, by user: those whose credential is deleted or changed are closed.
        self.sessions = SessionRegistry(services.credentials)
        #: Who is refused for protocol violations: principals (their logins) and addresses (their connections).
        self.violations = ProtocolViolations(ViolationPolicy.from_settings(sections.limits))
        #: Connections open per address, per listener and in all, and each address's creation rate.
        self.admission = AdmissionControl(
            ConnectionLimits.from_settings(sections.limits),
            rate_for=IpQuotaRates(services.quotas),
            violations=self.violations,
        )
        self._bound: list[_Bound] = []
        self._connections: set[asyncio.Task[None]] = set()
        #: The connections being served (their tasks are in ``_connections``), for the drain.
        self._served: set[Connection] = set()
        #: Set from the drain's start: a connection that gets its streams from then on is drained at once.
        self._draining = False
        #: Set when the last connection has ended during a drain, or at ``hurry``: the drain looks again.
        self._drain_wake = asyncio.Event()
        self._hurried = False
        self._sync_task: asyncio.Task[None] | None = None
        #: The TLS contexts of the bound listeners and (the proxy's) of its upstream, their files watched.
        self.tls_contexts: list[ReloadingContext] = []
        self._tls_watch: asyncio.Task[None] | None = None
        self._reloading = asyncio.Lock()
        self._stopped = asyncio.Event()
        self.collector = Collector()
        #: How clients are identified (SASL mechanisms, certificate mapping), once for every connection.
        self.identity = Identity.from_services(services)
        #: The load balancers whose PROXY headers are believed (None: PROXY protocol off).
        listening = sections.listening
        self.proxies = (
            None
            if listening.proxy_protocol == "off"
            else TrustedProxies(listening.trusted_proxies, required=listening.proxy_protocol == "required")
        )

    # ----------------------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind every listener (port 0: any free port) and start the background tasks.

        :raises InvalidConfigError: a listener cannot be bound, TLS is configured wrongly, or the shadow ACL file
            is not a valid ACL file.
        """
        self.rollout.start()
        self.sessions.start()  # before the first connection: no login may miss a credential change
        # for `kafkaguard can` / `who-can --data-dir`: they decide as this server does
        record_served_settings(self.services.settings, self.SERVED_BY)
        await self.identity.start()  # before the first connection: the identity provider's keys
        sections = self.services.sections
        super_users = sections.authorization.super_users
        for warning in certificate_super_user_warnings(sections.listening, super_users, self.identity.ssl_mapper):
            log.warning("%s", warning)
        # a client connection and (the proxy's) its upstream connection each, plus the store's and the logs'
        reserve_descriptors(2 * self.services.sections.limits.max_connections + _OTHER_DESCRIPTORS)
        if self.audit is not None:
            try:
                self.audit.start()  # before any listener: a spool that cannot be written refuses the start
            except BaseException:
                self.audit = None
                await self.stop()
                raise
        for listener in self.services.sections.listening.listeners:
            await self.bind(listener)
        # The loaded ACL set and every open connection are long-lived: kept out of the cyclic GC's reach so that
        # collections do not walk them (the pauses they caused: docs/benchmarks.md, "Figures from the code").
        self.collector.start()
        self._sync_task = asyncio.create_task(follow_store(self.services), name="store-sync")
        interval = self.services.sections.listening.tls_reload_interval_seconds
        if self.tls_contexts and interval > 0:
            self._tls_watch = asyncio.create_task(watch(self.tls_contexts, interval), name="tls-reload")

    async def drain(self) -> None:
        """Not ready, then stop accepting, then end every connection at a request boundary, within
        ``shutdown_grace_seconds`` (see the module docstring); ``stop`` follows."""
        loop = asyncio.get_running_loop()
        grace = self.services.sections.listening.shutdown_grace_seconds
        began = loop.time()
        deadline = began + grace
        self._draining = True
        if self.services.readiness.drain():
            log.info("draining: /healthz answers 503 from now (shutdown_grace_seconds %g)", grace)
        listeners = ", ".join(str(listener) for listener in self.bound_listeners) or "none"
        for bound in self._bound:  # what the kernel had queued is accepted; what had sent nothing closed
            bound.doorway.close(serve_arrived=True)
        log.info("draining: stopped accepting on %s; %d connections open", listeners, len(self._connections))
        opened = len(self._connections)
        await self._drain_connections()
        while self._connections and not self._hurried:
            left = deadline - loop.time()
            if left <= 0:
                break
            self._drain_wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, DRAIN_SWEEP_SECONDS)):
                    await self._drain_wake.wait()
            await self._drain_connections()
        forced = len(self._connections)
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        why = "a second stop signal" if self._hurried else f"the deadline (shutdown_grace_seconds {grace:g})"
        log.info(
            "drained in %.1f s: %d connections closed at a request boundary, %d forced closed at %s",
            loop.time() - began,
            max(opened - forced, 0),
            forced,
            why,
        )

    def hurry(self) -> None:
        """End a drain under way at once: what is still open is closed (a second SIGTERM)."""
        self._hurried = True
        self._drain_wake.set()

    async def _drain_connections(self) -> None:
        """``Connection.drain`` on every connection served, a batch at a time."""
        for count, connection in enumerate(list(self._served), 1):
            connection.drain()
            if count % _DRAIN_BATCH == 0:
                await asyncio.sleep(0)

    def _connection_ended(self, task: asyncio.Task[None]) -> None:
        self._connections.discard(task)
        if self._draining and not self._connections:
            self._drain_wake.set()

    async def stop(self) -> None:
        """Stop accepting, close open connections wherever they are, flush the audit log (after ``drain``: only
        what it left)."""
        for bound in self._bound:
            bound.doorway.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        self.sessions.stop()
        if self._tls_watch is not None:
            self._tls_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tls_watch
            self._tls_watch = None
        if self._sync_task is not None:
            self._sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync_task
            self._sync_task = None
        await self.rollout.stop()
        if self.audit is not None:
            await self.audit.stop()
        await self.collector.stop()
        await self.identity.close()
        self.services.refusals.flush()
        self.services.refused.flush()
        self._bound.clear()
        self._stopped.set()

    async def bind(self, listener: Listener) -> Listener:
        """Listen on ``listener`` (port 0: any free port); returns it with the port bound.

        :raises InvalidConfigError: it cannot be bound, or TLS is configured wrongly (the server is stopped).
        """
        listening = self.services.sections.listening
        context = self._listener_tls(listener) if listener.protocol.uses_tls else None
        counted = str(self.counted_as(listener))  # the limits it counts against
        try:
            doorway = await Doorway.open(
                listener.host or None,
                listener.port,
                # a connection that sends nothing is closed when a client that sends would be
                wait_limit=listening.sasl_login_timeout_seconds
                if listener.protocol.uses_sasl
                else listening.idle_timeout_seconds,
                admit=functools.partial(self._admit, counted),
                hand_over=functools.partial(self._hand_over, listener, counted, context),
                gone=functools.partial(self._gone, listener, counted),
                reuse_port=in_worker(),  # its port is every worker's (node.workers)
            )
        except OSError as e:
            await self.stop()
            raise InvalidConfigError(f"cannot listen on {listener}: {e.strerror}") from e
        bound = _Bound(listener, doorway, doorway.port)
        self._bound.append(bound)
        line, warnings = listener_summary(listener, bound.port, self.services.sections)
        log.info("%s", line)
        for warning in warnings:
            log.warning("%s", warning)
        return Listener(listener.protocol, listener.host, bound.port)

    def _listener_tls(self, listener: Listener) -> ReloadingContext:
        """The reloading TLS context of a listener's protocol, shared by its listeners (one per protocol: SSL and
        SASL_SSL differ in client authentication).

        :raises InvalidConfigError: TLS is configured wrongly (the server is stopped).
        """
        name = f"{listener.protocol.value} listener"
        for known in self.tls_contexts:
            if known.name == name:
                return known
        listening = self.services.sections.listening
        tls = listening.tls
        paths = [] if tls is None else [p for p in (tls.certfile, tls.keyfile, tls.cafile, tls.crlfile) if p]
        context = ReloadingContext(
            name,
            functools.partial(tls_server_context, listening, listener.protocol),
            paths,
            certfile=None if tls is None else tls.certfile,
            statistics=self.services.tls,
            label=listener.protocol.value,
        )
        self.tls_contexts.append(context)
        return context

    async def reload(self, load: Callable[[], Settings]) -> None:
        """A SIGHUP: read the settings again (``load``: the config file, the start's flags and environment) and
        apply the live ones that changed (``node.live``); one reload at a time."""
        async with self._reloading:
            try:
                loaded = await asyncio.to_thread(load)
            except KafkaguardError as e:
                log.error("SIGHUP: the configuration does not load, nothing changed: %s", e)
                return
            self.apply_settings(loaded)

    def apply_settings(self, loaded: Settings) -> None:
        """Run with ``loaded``'s live settings where they differ (``node.live.LIVE_SETTINGS``); name the others."""
        applied, changed_live, needs_restart = live.plan(self.services.settings, loaded)
        if changed_live:
            self.services.replace_settings(applied)
            sections = self.services.sections
            self.admission.reconfigure(ConnectionLimits.from_settings(sections.limits))
            live.apply_budget(self.services)
            if self.audit is not None and sections.audit.kafka is not None:
                reroute(self.audit, sections.audit.kafka)
            live.apply_log_level(sections.logging.level)
        live.log_outcome(changed_live, needs_restart)

    def counted_as(self, listener: Listener) -> Listener:
        """The configured listener whose limits a connection on the bound ``listener`` counts against (the proxy
        counts its per-broker ports with their client listener)."""
        return listener

    @abstractmethod
    def dispatcher(self, listener: Listener, context: ListenerContext) -> Dispatcher:
        """What answers the logged-in requests of a connection that came in on the bound ``listener``."""

    def connection(
        self,
        listener: Listener,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        host: str | None = None,
    ) -> Connection:
        """The connection of a client that came in on the bound ``listener`` (``host``: its address, when it is
        not the socket's peer: a PROXY header's)."""
        client_listener = self.counted_as(listener)
        broker = self.broker_for(client_listener)
        context = ListenerContext(
            self.services, client_listener, broker, self.audit, self.sessions, self.identity, self.violations
        )
        return Connection(context, self.dispatcher(listener, context), reader, writer, host=host)

    @property
    def bound_listeners(self) -> list[Listener]:
        """The listeners as bound, with the real port (useful with port 0)."""
        return [Listener(b.listener.protocol, b.listener.host, b.port) for b in self._bound]

    def broker_for(self, listener: Listener) -> BrokerInfo:
        """This broker as advertised to a client that came in on ``listener``."""
        port = next((b.port for b in self._bound if b.listener == listener), listener.port)
        host = self.services.sections.listening.advertised_host or listener.host or "localhost"
        return BrokerInfo(NODE_ID, host, port, self.cluster_id)

    # ----------------------------------------------------------------------------------------------- internals

    def _admit(self, counted: str, peer: str) -> bool:
        """A TCP connection was accepted on ``listener``, nothing read from it yet: admit it, or refuse it (counted
        and logged rate-limited; the doorway closes it). A trusted proxy's connection is admitted for its client's
        address once the PROXY header says it (``_serve``)."""
        address = java_host(peer)
        proxies = self.proxies
        if proxies is not None:
            if proxies.trusts(address):
                return True
            if proxies.required:
                self.services.refusals.record(
                    counted,
                    RefusalReason.PROXY_PROTOCOL,
                    address,
                    "not one of trusted_proxies, and proxy_protocol is required",
                )
                return False
        decision = self.admission.admit(counted, address)
        if isinstance(decision, Refusal):
            self.services.refusals.record(counted, decision.reason, address, decision.detail)
            return False
        return True

    def _admitted_at_accept(self, address: str) -> bool:
        """Whether a connection from ``address`` was counted when it was accepted (else it is counted once its PROXY
        header is read)."""
        return self.proxies is None or not self.proxies.trusts(address)

    def _gone(self, listener: Listener, counted: str, peer: str, expired: bool) -> None:
        """An admitted connection ended before it sent a byte."""
        admission = Admission(counted, java_host(peer))
        if not self._admitted_at_accept(admission.address):
            return
        if expired and listener.protocol.uses_sasl:
            timeout = self.services.sections.listening.sasl_login_timeout_seconds
            detail = f"sent nothing within sasl_login_timeout_seconds ({timeout:g} s)"
            self.services.refusals.record(
                admission.listener, RefusalReason.SASL_LOGIN_TIMEOUT, admission.address, detail
            )
        self.admission.release(admission)

    def _hand_over(
        self,
        listener: Listener,
        counted: str,
        tls: ReloadingContext | None,
        sock: socket.socket,
        peer: str,
        accepted_at: float,
    ) -> None:
        """An admitted connection sent its first bytes: serve it in a task of its own, its TLS handshake with the
        listener's context as it is now (a reload changes it for the connections after this one)."""
        admission = Admission(counted, java_host(peer))
        context = None if tls is None else tls.current
        task = asyncio.get_running_loop().create_task(self._serve(listener, context, sock, admission, accepted_at))
        self._connections.add(task)
        task.add_done_callback(self._connection_ended)

    async def _serve(
        self,
        listener: Listener,
        tls: ssl.SSLContext | None,
        sock: socket.socket,
        admission: Admission,
        accepted_at: float,
    ) -> None:
        listening = self.services.sections.listening
        budget = self.services.login_budget
        login_deadline = accepted_at + listening.sasl_login_timeout_seconds
        writer: asyncio.StreamWriter | None = None
        attempt: Attempt | None = None  # the handshake's failed login, while it is undecided
        admitted = self._admitted_at_accept(admission.address)
        try:
            if not admitted:
                client = await self._read_proxy_header(sock, admission)
                if client is None:
                    return
                admission, admitted = client, True
            if tls is not None and tls.verify_mode != ssl.CERT_NONE:
                try:
                    attempt = budget.take("SSL", admission.address)
                except LoginThrottledError as e:
                    detail = f"TLS handshake refused unchecked: {e}; raise login_failures_per_address_* if legitimate"
                    self.services.refusals.record(
                        admission.listener, RefusalReason.LOGIN_FAILURES, admission.address, detail
                    )
                    return
            try:
                async with asyncio.timeout_at(self._loop_time_of(login_deadline) if tls is not None else None):
                    reader, writer = await open_streams(sock, tls, limit=_STREAM_LIMIT)
            except TimeoutError:
                self.services.refusals.record(
                    admission.listener,
                    RefusalReason.SASL_LOGIN_TIMEOUT,
                    admission.address,
                    "TLS handshake not finished within sasl_login_timeout_seconds "
                    f"({listening.sasl_login_timeout_seconds:g} s)",
                )
                return
            except ssl.SSLError as e:
                # Kafka counts a failed TLS handshake (no, unknown or revoked client certificate) as a failed login.
                if attempt is not None:
                    budget.failed(attempt)
                    attempt = None
                self.services.logins.record(str(listener), "SSL", succeeded=False)
                record_login_event(
                    self.audit,
                    succeeded=False,
                    mechanism="SSL",
                    listener=str(listener),
                    host=admission.address,
                    error=f"SSL handshake failed: {e.reason or e}",
                )
                log.info(
                    "Failed authentication with /%s (listener %s, SSL handshake failed): %s",
                    admission.address,
                    listener,
                    e.reason or e,
                    extra=COLLAPSE,
                )
                return
            except OSError as e:
                log.debug("TLS handshake with %s on %s failed: %s", admission.address, listener, e)
                return
            connection = self.connection(listener, reader, writer, host=admission.address)
            if attempt is not None:
                if connection.unidentified is None:
                    budget.succeeded(attempt)
                else:  # a certificate no mapping rule maps: no principal, a failed login
                    budget.failed(attempt)
                attempt = None
            connection.login_deadline = login_deadline  # from the TCP accept: the wait and the TLS handshake count
            self._served.add(connection)
            try:
                if self._draining:  # accepted before the listener closed: what it sent is answered, then it ends
                    asyncio.get_running_loop().call_soon(connection.drain)
                await connection.run()
            finally:
                self._served.discard(connection)
            if connection.violated:
                self._charge_violation(admission, connection.accountable_principal)
        except asyncio.CancelledError:
            pass  # stop() cancels open connections; the socket is closed below
        except Exception:
            # The last line of defence: a bug in a handler must close one connection, not the server.
            log.exception("unexpected error on a connection from %s", admission.address)
        finally:
            if attempt is not None:  # the handshake was not decided (timed out, the client went away, stop())
                budget.cancelled(attempt)
            if writer is None:  # never handed over (a failed handshake, or stop() during it)
                sock.close()
            else:  # the connection closes its stream itself; this only covers a connection that failed to start
                writer.close()
            if admitted:
                self.admission.release(admission)

    def _charge_violation(self, admission: Admission, principal: str | None) -> None:
        """A connection was closed for bytes no Kafka client sends: charge its principal or its address
        (``violations``), and say so once when that starts a refusal."""
        charge = self.violations.charge(admission.address, principal)
        if charge is not None and charge.refused_seconds is not None and not charge.already_refused:
            what = "logins of" if charge.principal else "connections from"
            log.info(
                "protocol violations: refusing %s %s for %g s (refusal %d in a row; the last from /%s on %s)",
                what,
                charge.offender,
                charge.refused_seconds,
                charge.strikes,
                admission.address,
                admission.listener,
            )

    async def _read_proxy_header(self, sock: socket.socket, via: Admission) -> Admission | None:
        """A trusted proxy's connection: the client's address from its PROXY header (the proxy's own for a LOCAL
        header, or — ``optional`` — none), admitted under the limits of that address; None when the header is
        missing, malformed or late, or the client's address is refused (each counted and logged)."""
        refusals = self.services.refusals
        try:
            async with asyncio.timeout(PROXY_HEADER_SECONDS):
                header = await read_proxy_header(sock)
        except TimeoutError:
            refusals.record(
                via.listener,
                RefusalReason.PROXY_PROTOCOL,
                via.address,
                f"no PROXY header within {PROXY_HEADER_SECONDS:g} s",
            )
            return None
        except ProxyHeaderError as e:
            refusals.record(via.listener, RefusalReason.PROXY_PROTOCOL, via.address, f"bad PROXY header: {e}")
            return None
        except OSError:
            return None  # the proxy closed the connection
        if header is None and self.proxies is not None and self.proxies.required:
            refusals.record(
                via.listener,
                RefusalReason.PROXY_PROTOCOL,
                via.address,
                "no PROXY header, and proxy_protocol is required",
            )
            return None
        source = None if header is None else header.source
        address = via.address if source is None else java_host(source[0])
        decision = self.admission.admit(via.listener, address)
        if isinstance(decision, Refusal):
            refusals.record(via.listener, decision.reason, address, decision.detail)
            return None
        return Admission(via.listener, address)

    @staticmethod
    def _loop_time_of(monotonic: float) -> float:
        return asyncio.get_running_loop().time() + (monotonic - time.monotonic())


def tls_server_context(listening: ListenerSettings, protocol: SecurityProtocol) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener: the server's certificate and key, and with
    ``ssl_client_auth`` (SSL) or ``sasl_ssl_client_auth`` (SASL_SSL) — Kafka's ssl.client.auth — the CAs that client
    certificates must chain to, and the revocation lists.

    :raises InvalidConfigError: a file is missing or unreadable, or the settings do not fit together.
    """
    tls = listening.tls
    if tls is None:
        raise InvalidConfigError("an SSL or SASL_SSL listener needs ssl_certfile and ssl_keyfile")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.certfile, tls.keyfile, password=tls.key_password.read())
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"cannot load the TLS certificate or key: {e}") from e
    client_auth = listening.ssl_client_auth if protocol is SecurityProtocol.SSL else listening.sasl_ssl_client_auth
    if client_auth == "none":
        return context
    # 'requested' asks for a certificate and verifies one that comes, 'required' fails the handshake without one:
    # Kafka's ssl.client.auth, and OpenSSL's CERT_OPTIONAL / CERT_REQUIRED.
    context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    try:
        context.load_verify_locations(cafile=tls.cafile)
        if tls.crlfile is not None:
            context.load_verify_locations(cafile=tls.crlfile)
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"cannot load ssl_cafile or ssl_crlfile: {e}") from e
    return context


async def serve(
    settings: Settings,
    server_type: Callable[[Services], ListeningServer],
    *,
    reload_settings: Callable[[], Settings] | None = None,
) -> None:
    """Build the services, serve until SIGTERM or SIGINT, then shut down cleanly (``server_type``: ``KafkaServer``
    for ``kafkaguard serve``, ``ProxyServer`` for ``kafkaguard proxy``). With ``reload_settings`` (how ``settings``
    were loaded), a SIGHUP applies the live settings again (``ListeningServer.reload``)."""
    services = await asyncio.to_thread(build_services, settings)
    server = server_type(services)
    reloads: set[asyncio.Task[None]] = set()

    def hangup() -> None:
        if reload_settings is not None:
            task = asyncio.get_running_loop().create_task(server.reload(reload_settings), name="sighup-reload")
            reloads.add(task)
            task.add_done_callback(reloads.discard)

    try:
        await run_until_signalled(server, on_hangup=hangup if reload_settings is not None else None)
    finally:
        services.close()

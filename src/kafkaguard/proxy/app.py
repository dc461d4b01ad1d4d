"""The proxy process: a ``ListeningServer`` (``node.listening``: listeners, limits, store sync and audit log,
as ``kafkaguard serve`` has them) whose connections are answered by ``dispatch.ProxyDispatcher``, with one listener
per upstream node, and the upstream discovered at start.

``ProxyServer(services)`` is started and stopped by its owner (tests); ``kafkaguard proxy`` runs it with
``node.listening.serve(settings, ProxyServer)`` until SIGTERM/SIGINT. Starting reads two things from the
upstream with the service credential (failing with a clear error when it cannot): its ApiVersions (to offer only what
both sides can do) and its brokers (to open their listeners). Each broker's ``auto.create.topics.enable`` (see
``handlers.metadata``) is read from that broker itself by ``broker_settings``: the first reads are awaited at start
(at most 2 s), and a broker that cannot be read is logged and retried, never taken as "false".
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections import Counter

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.config import Listener, Settings
from kafkaguard.errors import InvalidConfigError, KafkaguardError
from kafkaguard.identity.kerberos import Initiator, KerberosError
from kafkaguard.node.listening import ListeningServer
from kafkaguard.node.rollout_watch import AclFileLoader
from kafkaguard.protocol.api_versions import NO_FEATURES
from kafkaguard.protocol.build import build_request
from kafkaguard.protocol.codec import Versions, request_schema
from kafkaguard.protocol.scope import ListenerContext
from kafkaguard.proxy.broker_settings import DESCRIBE_CONFIGS_VERSION, AutoCreateWatcher, read_auto_create
from kafkaguard.proxy.dispatch import HANDLERS, ProxyDispatcher, ProxyRoute
from kafkaguard.proxy.nodes import NodeDirectory, UpstreamNode, check_listeners, node_port
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.upstream import Address, KerberosLogin, UpstreamConnection, UpstreamProtocol, UpstreamSecurity
from kafkaguard.proxy.upstream_tokens import AccessTokenSource
from kafkaguard.proxy.versions import FEATURES_COMPLETE_FROM, features_of, negotiate, negotiate_features
from kafkaguard.scram import ScramMechanism

log = logging.getLogger(__name__)


class ProxyServer(ListeningServer):
    SERVED_BY = "kafkaguard proxy"
    PERMISSIVE = True

    def __init__(self, services: Services, *, shadow_loader: AclFileLoader | None = None) -> None:
        super().__init__(services, shadow_loader=shadow_loader)
        settings = services.settings
        problem = check_listeners(settings.parsed_listeners)
        if problem is not None:
            raise InvalidConfigError(problem)
        #: Client quotas' byte rates, one meter for every connection of this proxy (Kafka's per-broker sensors).
        self.meter = QuotaMeter(services.quotas)
        if not settings.upstream_servers:
            raise InvalidConfigError("the proxy needs upstream: the upstream cluster's bootstrap servers, host:port")
        self.security = upstream_security(settings)
        host = settings.advertised_host or settings.parsed_listeners[0].host or "localhost"
        self.nodes = NodeDirectory((Address(h, p) for h, p in settings.upstream_servers), host)
        self.nodes.on_new_node(self._serve_node)
        self._dial = functools.partial(
            UpstreamConnection, security=self.security, timeout=settings.upstream_timeout_seconds
        )
        self.auto_create = AutoCreateWatcher(self.nodes, self.security, timeout=settings.upstream_timeout_seconds)
        self.nodes.on_node_address(self.auto_create.watch_node)
        self.versions: Versions = {}
        self.features = NO_FEATURES
        #: Node listeners: the bound listener → (the client listener it belongs to, the upstream node id).
        self._node_listeners: dict[Listener, tuple[Listener, int]] = {}
        #: Client connections accepted per upstream node (None: bootstrap connections), since start.
        self.connections_per_node: Counter[int | None] = Counter()

    async def start(self) -> None:
        """Discover the upstream, then bind the client listeners and a listener per upstream node.

        :raises InvalidConfigError: the upstream cannot be reached or refuses the service credential, or a
            listener cannot be bound.
        """
        try:
            await self._discover()
            await super().start()
            for node_id in self.nodes.node_ids:
                await self._serve_node(node_id)
        except BaseException:
            await self.auto_create.stop()  # the watches discovery started
            raise
        for address in self.nodes.bootstrap:
            self.auto_create.watch_bootstrap(address)
        await self.auto_create.first_reads()

    async def stop(self) -> None:
        await self.auto_create.stop()
        await super().stop()

    def counted_as(self, listener: Listener) -> Listener:
        """A per-broker port counts against the limits of the client listener it belongs to."""
        return self._node_listeners.get(listener, (listener, None))[0]

    def dispatcher(self, listener: Listener, context: ListenerContext) -> ProxyDispatcher:
        node_id = self._node_listeners.get(listener, (listener, None))[1]
        self.connections_per_node[node_id] += 1
        route = ProxyRoute(node_id=node_id, nodes=self.nodes, versions=self.versions, meter=self.meter, dial=self._dial,
                           features=self.features)  # fmt: skip
        return ProxyDispatcher(context, route)

    async def _serve_node(self, node_id: int) -> None:
        """Bind node ``node_id``'s port on every client listener (once; the server may not be started yet)."""
        if not self._bound:
            return  # start() binds every known node once the client listeners are up
        for listener in self.services.settings.parsed_listeners:
            node_listener = Listener(listener.protocol, listener.host, node_port(listener.port, node_id))
            if node_listener in self._node_listeners:
                continue
            self._node_listeners[node_listener] = (listener, node_id)
            await self.bind(node_listener)

    async def _discover(self) -> None:
        upstream = UpstreamConnection(
            self.nodes.bootstrap, self.security, timeout=self.services.settings.upstream_timeout_seconds
        )
        try:
            hello = build_request(request_schema(ApiKey.API_VERSIONS, 3), client_software_name="kafkaguard-proxy",
                                  client_software_version="1")  # fmt: skip
            versions = await upstream.call(ApiKey.API_VERSIONS, 3, hello)
            offered = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
            self.versions = negotiate(offered, HANDLERS)
            if offered.get(ApiKey.API_VERSIONS, (0, 3))[1] >= FEATURES_COMPLETE_FROM:  # v3 omits min-0 features
                hello = build_request(request_schema(ApiKey.API_VERSIONS, FEATURES_COMPLETE_FROM),
                                      client_software_name="kafkaguard-proxy", client_software_version="1")  # fmt: skip
                versions = await upstream.call(ApiKey.API_VERSIONS, FEATURES_COMPLETE_FROM, hello)
            self.features = negotiate_features(features_of(versions), self.versions)
            brokers_only = build_request(request_schema(ApiKey.METADATA, 12), topics=(),
                                         allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False)  # fmt: skip
            metadata = await upstream.call(ApiKey.METADATA, 12, brokers_only)
            # learn() starts a watch of each node's auto.create.topics.enable (read from that node itself)
            await self.nodes.learn(UpstreamNode(int(b.node_id), Address(b.host, int(b.port))) for b in metadata.brokers)
            low, high = offered.get(ApiKey.DESCRIBE_CONFIGS, (0, -1))
            if max(low, 1) > min(high, DESCRIBE_CONFIGS_VERSION):
                raise InvalidConfigError(f"it offers DescribeConfigs v{low}-v{high}: the proxy reads the brokers' "
                                         f"auto.create.topics.enable with v1-v{DESCRIBE_CONFIGS_VERSION}")  # fmt: skip
            self.auto_create.version = min(high, DESCRIBE_CONFIGS_VERSION)
            await self._identify_bootstrap(upstream)
        except Exception as e:
            raise InvalidConfigError(f"cannot use the upstream {self.services.settings.upstream}: {e}") from e
        finally:
            upstream.close()
        log.info("upstream %s: nodes %s, %d APIs offered, features %s", self.services.settings.upstream,
                 self.nodes.node_ids, len(self.versions),
                 {name: high for name, _low, high in self.features.finalized})  # fmt: skip

    async def _identify_bootstrap(self, upstream: UpstreamConnection) -> None:
        """Ask the bootstrap server that answered discovery which node it is and its auto.create.topics.enable (a
        failure is left to the bootstrap server's watch, started with the listeners)."""
        try:
            node_id, enabled = await read_auto_create(upstream, self.nodes.node_ids, self.auto_create.version)
        except KafkaguardError as e:
            log.debug("bootstrap server %s not identified at discovery: %s", upstream.address, e)
            return
        self.nodes.record_auto_create(node_id, enabled, address=upstream.address)


def upstream_security(settings: Settings) -> UpstreamSecurity:
    """The proxy's way into the upstream, from the settings.

    :raises InvalidConfigError: SCRAM without a user or password, an unreadable password or secret file, CA bundle,
        client certificate or key.
    """
    protocol = UpstreamProtocol(settings.upstream_security_protocol)
    oauthbearer = settings.upstream_sasl_mechanism == "OAUTHBEARER"
    kerberos = upstream_kerberos(settings) if protocol.uses_sasl else None
    password = settings.upstream_password.get_secret_value() if settings.upstream_password else ""
    if settings.upstream_password_file is not None:
        try:
            password = settings.upstream_password_file.read_text("utf-8").rstrip("\n")
        except OSError as e:
            raise InvalidConfigError(f"cannot read upstream_password_file: {e.strerror}") from None
    if protocol.uses_sasl and not oauthbearer and kerberos is None and (not settings.upstream_user or not password):
        raise InvalidConfigError(
            f"upstream_security_protocol {protocol.value} needs upstream_user and a password "
            "(KAFKAGUARD_UPSTREAM_PASSWORD or upstream_password_file)"
        )
    tls = upstream_tls(settings) if protocol.uses_tls else None
    tokens = None
    if protocol.uses_sasl and oauthbearer:
        tokens = AccessTokenSource(
            settings.upstream_sasl_oauthbearer_token_endpoint_url or "",
            settings.upstream_sasl_oauthbearer_client_id or "",
            settings.upstream_sasl_oauthbearer_secret or "",
            scope=settings.upstream_sasl_oauthbearer_scope,
        )
    return UpstreamSecurity(
        protocol=protocol,
        mechanism=ScramMechanism.SCRAM_SHA_512
        if oauthbearer or kerberos is not None
        else ScramMechanism.from_name(settings.upstream_sasl_mechanism),
        username=settings.upstream_user or "",
        password=password,
        tls=tls,
        tokens=tokens,
        kerberos=kerberos,
    )


def upstream_kerberos(settings: Settings) -> KerberosLogin | None:
    """The proxy's Kerberos login towards the upstream (``upstream_sasl_mechanism`` GSSAPI), or None.

    :raises InvalidConfigError: the keytab cannot be read.
    """
    keytab, principal = settings.upstream_sasl_kerberos_keytab, settings.upstream_sasl_kerberos_principal
    if settings.upstream_sasl_mechanism != "GSSAPI" or keytab is None or principal is None:
        return None
    try:
        initiator = Initiator(keytab, principal)
    except KerberosError as e:
        raise InvalidConfigError(f"upstream_sasl_kerberos_keytab: {e}") from None
    return KerberosLogin(initiator, settings.upstream_sasl_kerberos_service_name or "")


def upstream_tls(settings: Settings) -> ssl.SSLContext:
    """The TLS context towards the upstream: its CAs, and the proxy's client certificate when it has one.

    :raises InvalidConfigError: the CA bundle, certificate or key cannot be loaded (a wrong key password included).
    """
    try:
        tls = ssl.create_default_context(cafile=settings.upstream_ssl_cafile)
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"cannot load upstream_ssl_cafile: {e}") from None
    if settings.upstream_ssl_certfile is not None:
        try:
            tls.load_cert_chain(settings.upstream_ssl_certfile, settings.upstream_ssl_keyfile,
                                password=settings.upstream_ssl_key_password)  # fmt: skip
        except (OSError, ssl.SSLError) as e:
            raise InvalidConfigError(
                f"cannot load upstream_ssl_certfile {settings.upstream_ssl_certfile} with upstream_ssl_keyfile "
                f"{settings.upstream_ssl_keyfile}: {e}"
            ) from None
    return tls

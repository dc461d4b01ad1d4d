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
from kafkaguard.config import Listener
from kafkaguard.config.sections import (
    ProxySettings,
    Secret,
    UpstreamKerberos,
    UpstreamOAuthBearer,
    UpstreamScram,
    UpstreamTls,
)
from kafkaguard.errors import InvalidConfigError, KafkaguardError
from kafkaguard.identity.kerberos import Initiator, KerberosError
from kafkaguard.node.listening import ListeningServer
from kafkaguard.node.rollout_watch import AclFileLoader
from kafkaguard.protocol.api_versions import NO_FEATURES
from kafkaguard.protocol.build import build_request
from kafkaguard.protocol.codec import Versions, request_schema
from kafkaguard.protocol.scope import ListenerContext
from kafkaguard.proxy.broker_settings import (
    DESCRIBE_CONFIGS_VERSION,
    AutoCreateWatcher,
    SettingUnreadable,
    read_auto_create,
    read_broker_configs,
)
from kafkaguard.proxy.dispatch import FORWARDED, ProxyDispatcher, ProxyRoute
from kafkaguard.proxy.nodes import NodeDirectory, UpstreamNode, check_listeners, node_port
from kafkaguard.proxy.passthrough import (
    BROKER_SUB_CLAIM_KEY,
    passes_oauthbearer,
    passthrough_problem,
    sub_claim_disagreement,
    unsupported_by_broker,
)
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.upstream import (
    Address,
    KerberosLogin,
    OAuthBearerLogin,
    ScramLogin,
    UpstreamConnection,
    UpstreamLogin,
    UpstreamProtocol,
    UpstreamSecurity,
)
from kafkaguard.proxy.upstream_tokens import AccessTokenSource
from kafkaguard.proxy.versions import FEATURES_COMPLETE_FROM, features_of, negotiate, negotiate_features

log = logging.getLogger(__name__)


class ProxyServer(ListeningServer):
    SERVED_BY = "kafkaguard proxy"
    PERMISSIVE = True

    def __init__(self, services: Services, *, shadow_loader: AclFileLoader | None = None) -> None:
        super().__init__(services, shadow_loader=shadow_loader)
        listening, proxy = services.sections.listening, services.sections.proxy
        problem = check_listeners(listening.listeners) or passthrough_problem(services.sections)
        if problem is not None:
            raise InvalidConfigError(problem)
        #: Client quotas' byte rates, one meter for every connection of this proxy (Kafka's per-broker sensors).
        self.meter = QuotaMeter(services.quotas)
        if not proxy.servers:
            raise InvalidConfigError("the proxy needs upstream: the upstream cluster's bootstrap servers, host:port")
        self.security = upstream_security(proxy)
        host = listening.advertised_host or listening.listeners[0].host or "localhost"
        self.nodes = NodeDirectory((Address(h, p) for h, p in proxy.servers), host)
        self.nodes.on_new_node(self._serve_node)
        self._dial = functools.partial(UpstreamConnection, security=self.security, timeout=proxy.timeout_seconds)
        self.auto_create = AutoCreateWatcher(self.nodes, self.security, timeout=proxy.timeout_seconds)
        self.nodes.on_node_address(self.auto_create.watch_node)
        self.versions: Versions = {}
        self.features = NO_FEATURES
        #: Node listeners: the bound listener → (the client listener it belongs to, the upstream node id).
        self._node_listeners: dict[Listener, tuple[Listener, int]] = {}
        #: ``upstream_authentication: passthrough``: clients' logins are the brokers' (``passthrough``).
        self.passthrough = proxy.authentication == "passthrough"
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
        route = ProxyRoute(
            node_id=node_id,
            nodes=self.nodes,
            versions=self.versions,
            meter=self.meter,
            dial=self._dial,
            features=self.features,
            passthrough=self.passthrough,
        )
        return ProxyDispatcher(context, route)

    async def _serve_node(self, node_id: int) -> None:
        """Bind node ``node_id``'s port on every client listener (once; the server may not be started yet)."""
        if not self._bound:
            return  # start() binds every known node once the client listeners are up
        for listener in self.services.sections.listening.listeners:
            node_listener = Listener(listener.protocol, listener.host, node_port(listener.port, node_id))
            if node_listener in self._node_listeners:
                continue
            self._node_listeners[node_listener] = (listener, node_id)
            await self.bind(node_listener)

    async def _discover(self) -> None:
        upstream = UpstreamConnection(
            self.nodes.bootstrap, self.security, timeout=self.services.sections.proxy.timeout_seconds
        )
        try:
            hello = build_request(
                request_schema(ApiKey.API_VERSIONS, 3),
                client_software_name="kafkaguard-proxy",
                client_software_version="1",
            )
            versions = await upstream.call(ApiKey.API_VERSIONS, 3, hello)
            offered = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
            self.versions = negotiate(offered, FORWARDED)
            if offered.get(ApiKey.API_VERSIONS, (0, 3))[1] >= FEATURES_COMPLETE_FROM:  # v3 omits min-0 features
                hello = build_request(
                    request_schema(ApiKey.API_VERSIONS, FEATURES_COMPLETE_FROM),
                    client_software_name="kafkaguard-proxy",
                    client_software_version="1",
                )
                versions = await upstream.call(ApiKey.API_VERSIONS, FEATURES_COMPLETE_FROM, hello)
            self.features = negotiate_features(features_of(versions), self.versions)
            brokers_only = build_request(
                request_schema(ApiKey.METADATA, 12),
                topics=(),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            metadata = await upstream.call(ApiKey.METADATA, 12, brokers_only)
            # learn() starts a watch of each node's auto.create.topics.enable (read from that node itself)
            await self.nodes.learn(UpstreamNode(int(b.node_id), Address(b.host, int(b.port))) for b in metadata.brokers)
            low, high = offered.get(ApiKey.DESCRIBE_CONFIGS, (0, -1))
            if max(low, 1) > min(high, DESCRIBE_CONFIGS_VERSION):
                raise InvalidConfigError(
                    f"it offers DescribeConfigs v{low}-v{high}: the proxy reads the brokers' "
                    f"auto.create.topics.enable with v1-v{DESCRIBE_CONFIGS_VERSION}"
                )
            self.auto_create.version = min(high, DESCRIBE_CONFIGS_VERSION)
            await self._identify_bootstrap(upstream)
            if self.passthrough:
                problem = unsupported_by_broker(self.services.sections, upstream.offered_mechanisms)
                if problem is None and passes_oauthbearer(self.services.sections):
                    problem = await self._broker_sub_claim(upstream)
                if problem is not None:
                    raise InvalidConfigError(problem)
        except Exception as e:
            raise InvalidConfigError(f"cannot use the upstream {self.services.sections.proxy.upstream}: {e}") from e
        finally:
            upstream.close()
        log.info(
            "upstream %s: nodes %s, %d APIs offered, features %s",
            self.services.sections.proxy.upstream,
            self.nodes.node_ids,
            len(self.versions),
            {name: high for name, _low, high in self.features.finalized},
        )

    async def _broker_sub_claim(self, upstream: UpstreamConnection) -> str | None:
        """Why the broker behind ``upstream`` names OAUTHBEARER principals by another claim than kafkaguard, or None.

        :raises InvalidConfigError: the broker did not describe its settings (the service account lacks
            DESCRIBE_CONFIGS on the cluster?): the start cannot tell whether principals agree.
        """
        try:
            node_id, configs = await read_broker_configs(
                upstream, self.nodes.node_ids, (BROKER_SUB_CLAIM_KEY,), self.auto_create.version
            )
        except SettingUnreadable as e:
            raise InvalidConfigError(
                f"upstream_authentication passthrough of OAUTHBEARER: cannot read the broker's {BROKER_SUB_CLAIM_KEY} "
                f"(DescribeConfigs with the service account, which needs DESCRIBE_CONFIGS on the cluster): {e}"
            ) from None
        return sub_claim_disagreement(self.services.sections, configs, node_id)

    async def _identify_bootstrap(self, upstream: UpstreamConnection) -> None:
        """Ask the bootstrap server that answered discovery which node it is and its auto.create.topics.enable (a
        failure is left to the bootstrap server's watch, started with the listeners)."""
        try:
            node_id, enabled = await read_auto_create(upstream, self.nodes.node_ids, self.auto_create.version)
        except KafkaguardError as e:
            log.debug("bootstrap server %s not identified at discovery: %s", upstream.address, e)
            return
        self.nodes.record_auto_create(node_id, enabled, address=upstream.address)


def upstream_security(proxy: ProxySettings) -> UpstreamSecurity:
    """The proxy's way into the upstream, from its section of the settings.

    :raises InvalidConfigError: SCRAM without a user or password, an unreadable password or secret file, CA bundle,
        client certificate or key.
    """
    protocol = UpstreamProtocol(proxy.security_protocol)
    login: UpstreamLogin | None = None
    if isinstance(proxy.login, UpstreamScram):
        password = _service_password(proxy.login.password)
        if not proxy.login.user or not password:
            raise InvalidConfigError(
                f"upstream_security_protocol {protocol.value} needs upstream_user and a password "
                "(KAFKAGUARD_UPSTREAM_PASSWORD or upstream_password_file)"
            )
        login = ScramLogin(proxy.login.mechanism, proxy.login.user, password)
    tls = upstream_tls(proxy.tls) if proxy.tls is not None else None
    if isinstance(proxy.login, UpstreamOAuthBearer):
        oauth = proxy.login
        tokens = AccessTokenSource(
            oauth.token_endpoint_url, oauth.client_id, oauth.client_secret.read() or "", scope=oauth.scope
        )
        login = OAuthBearerLogin(tokens)
    if isinstance(proxy.login, UpstreamKerberos):
        login = upstream_kerberos(proxy.login)
    return UpstreamSecurity(protocol=protocol, login=login, tls=tls)


def upstream_kerberos(kerberos: UpstreamKerberos) -> KerberosLogin:
    """The proxy's Kerberos login towards the upstream (``upstream_sasl_mechanism`` GSSAPI).

    :raises InvalidConfigError: the keytab cannot be read.
    """
    try:
        initiator = Initiator(kerberos.keytab, kerberos.principal)
    except KerberosError as e:
        raise InvalidConfigError(f"upstream_sasl_kerberos_keytab: {e}") from None
    return KerberosLogin(initiator, kerberos.service_name)


def _service_password(secret: Secret) -> str:
    """The SCRAM service user's password: the file's first line when ``upstream_password_file`` is given, else
    ``upstream_password``, else empty (refused by the caller)."""
    if secret.file is not None:
        try:
            return secret.file.read_text("utf-8").rstrip("\n")
        except OSError as e:
            raise InvalidConfigError(f"cannot read upstream_password_file: {e.strerror}") from None
    return secret.value.get_secret_value() if secret.value is not None else ""


def upstream_tls(tls: UpstreamTls) -> ssl.SSLContext:
    """The TLS context towards the upstream: its CAs, and the proxy's client certificate when it has one.

    :raises InvalidConfigError: the CA bundle, certificate or key cannot be loaded (a wrong key password included).
    """
    try:
        context = ssl.create_default_context(cafile=tls.cafile)
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"cannot load upstream_ssl_cafile: {e}") from None
    if tls.certfile is not None:
        try:
            context.load_cert_chain(tls.certfile, tls.keyfile, password=tls.key_password.read())
        except (OSError, ssl.SSLError) as e:
            raise InvalidConfigError(
                f"cannot load upstream_ssl_certfile {tls.certfile} with upstream_ssl_keyfile {tls.keyfile}: {e}"
            ) from None
    return context

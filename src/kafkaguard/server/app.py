"""``kafkaguard serve``: a ``ListeningServer`` (``node.listening``) whose connections are answered by kafkaguard's
own handlers (``dispatch``), as the cluster's only broker and its controller."""

from __future__ import annotations

from kafkaguard.bootstrap import Services
from kafkaguard.config import Listener
from kafkaguard.errors import InvalidConfigError
from kafkaguard.node.listening import ListeningServer
from kafkaguard.node.rollout_watch import AclFileLoader
from kafkaguard.protocol.scope import ListenerContext
from kafkaguard.server.dispatch import ServerDispatcher


class KafkaServer(ListeningServer):
    SERVED_BY = "kafkaguard serve"

    def __init__(self, services: Services, *, shadow_loader: AclFileLoader | None = None) -> None:
        identity = services.sections.identity
        if "OAUTHBEARER" in identity.sasl_mechanisms and identity.oauthbearer is None:
            # the settings let a proxy that passes OAUTHBEARER through go without a JWKS; serve has no broker to ask
            raise InvalidConfigError(
                "sasl_mechanisms has OAUTHBEARER but sasl_oauthbearer_jwks_endpoint_url is not set: kafkaguard serve "
                "checks tokens itself (upstream_authentication passthrough is the proxy's), so it needs the identity "
                "provider's keys (https://…/jwks or file:/path)"
            )
        super().__init__(services, shadow_loader=shadow_loader)

    def dispatcher(self, listener: Listener, context: ListenerContext) -> ServerDispatcher:
        return ServerDispatcher(context)

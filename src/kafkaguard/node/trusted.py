"""The load balancers whose PROXY protocol headers a Kafka listener believes (``trusted_proxies``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


class TrustedProxies:
    """``trusted_proxies`` parsed once; ``required``: connections from anywhere else are refused.

    Cost: one address parse and a walk of the networks per accepted connection (a handful of networks)."""

    __slots__ = ("_networks", "required")

    def __init__(self, networks: Iterable[str], *, required: bool) -> None:
        self._networks = tuple(ipaddress.ip_network(network) for network in networks)
        self.required = required

    def trusts(self, address: str) -> bool:
        """Whether ``address`` (an IP address; anything else is not trusted) is one of the trusted proxies."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # a dual-stack socket's view of an IPv4 peer
        return any(ip in network for network in self._networks)

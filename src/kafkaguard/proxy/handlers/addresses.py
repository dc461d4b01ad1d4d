"""Broker addresses in upstream answers, replaced by the proxy's own (see ``nodes``), so clients never bypass it."""

from __future__ import annotations

from typing import Any

from kafkaguard.protocol.build import rebuild
from kafkaguard.proxy.nodes import MAX_NODE_ID, UpstreamNode
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.upstream import Address


async def proxied_brokers(scope: ProxyScope, brokers: Any, id_field: str = "node_id") -> tuple[Any, ...]:
    """``brokers`` (entities with ``host`` and ``port`` and a node id in ``id_field``) as the client must see them:
    the proxy's address for each node. The upstream addresses are learned first (new nodes get their listeners
    before the answer leaves); a node the proxy cannot serve is left out rather than shown with its real address."""
    directory = scope.nodes
    await directory.learn(UpstreamNode(int(getattr(b, id_field)), Address(b.host, int(b.port))) for b in brokers)
    proxied = []
    for broker in brokers:
        node_id = int(getattr(broker, id_field))
        if 0 <= node_id <= MAX_NODE_ID:
            host, port = directory.advertised(scope.listener, node_id)
            proxied.append(rebuild(broker, host=host, port=port))  # a broker of any API: untyped on purpose
    return tuple(proxied)


async def proxied_node(scope: ProxyScope, node_id: int, host: str, port: int) -> tuple[str, int]:
    """One broker named by id, host and port (FindCoordinator): the proxy's address for it. A node id of -1 (no
    coordinator, with an error) is answered as the upstream gave it."""
    if node_id < 0:
        return host, port
    await scope.nodes.learn([UpstreamNode(node_id, Address(host, port))])
    return scope.nodes.advertised(scope.listener, node_id)


async def rewrite_node_endpoints(scope: ProxyScope, endpoints: Any) -> tuple[Any, ...]:
    """KIP-951 leader discovery's ``node_endpoints`` (Produce v10+, Fetch v16+: ``NodeEndpoint`` {node_id, host, port,
    rack}) at the proxy's address for each node, exactly as Metadata's brokers (``proxied_brokers``): learned first, a
    node the proxy cannot serve left out (the client then finds its leader through Metadata, as when the upstream
    sends no endpoint), the rack kept. Kafka sends them with NOT_LEADER_OR_FOLLOWER, for the partitions' new leaders
    (``KafkaApis.handleProduceRequest`` / ``handleFetchRequest``, 3.9: ``getCurrentLeader`` → ``nodeEndpoints``); a
    client connects to them directly, so an upstream address here would let it bypass the proxy."""
    return await proxied_brokers(scope, endpoints)

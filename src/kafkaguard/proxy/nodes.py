"""Which upstream broker a client connection means, and how clients reach every upstream broker through the proxy.

Kafka clients bootstrap from any broker, then connect to each broker by the address Metadata advertises for its
node id. The proxy advertises itself for every node: on a client listener of port ``P``, upstream node ``N`` is
served on port ``P + 1 + N`` (node 1 of a listener on 9092 is at 9094). A connection to the listener's own port is a
bootstrap connection and goes to the first upstream bootstrap server that answers; a connection to ``P + 1 + N``
goes to node ``N``. So a client never learns an upstream address, and every request it makes passes the proxy.

Worked example: upstream nodes 1 at 10.0.0.5:9092 and 2 at 10.0.0.6:9092, one proxy listener
SASL_PLAINTEXT://0.0.0.0:19092 advertised as proxy.example: Metadata answers node 1 at proxy.example:19094 and node
2 at proxy.example:19095; a connection to 19095 is forwarded to 10.0.0.6:9092.

Node ids are learned from every upstream answer that names brokers (Metadata, DescribeCluster, FindCoordinator);
a new node gets its listeners before the answer that names it reaches the client. ``MAX_NODE_ID`` bounds the port
range a listener claims.

The directory also keeps each node's ``auto.create.topics.enable`` (read from that broker itself by
``broker_settings``): a broker applies its own setting to the Metadata requests it receives, so the Metadata
handler asks for the setting of the broker its upstream connection reached, by address (a node's advertised
address, or a bootstrap server's once it is known which node answers there).

And it holds the upstream's topic ids (``topic_ids.TopicIds``): one cluster, one map, shared by every connection.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from kafkaguard.config import Listener
from kafkaguard.proxy.topic_ids import TopicIds
from kafkaguard.proxy.upstream import Address

log = logging.getLogger(__name__)

#: Node ids above this are not served (their port would leave the listener's range); see ``check_listeners``.
MAX_NODE_ID = 999


@dataclass(frozen=True, slots=True)
class UpstreamNode:
    node_id: int
    address: Address


def node_port(listener_port: int, node_id: int) -> int:
    """The proxy port that serves upstream node ``node_id`` for a listener on ``listener_port``."""
    return listener_port + 1 + node_id


class NodeDirectory:
    """The upstream nodes the proxy knows, and the hook that opens their listeners. Used on the event loop only."""

    def __init__(self, bootstrap: Iterable[Address], advertised_host: str) -> None:
        self.bootstrap = tuple(bootstrap)
        self.advertised_host = advertised_host
        self._nodes: dict[int, Address] = {}
        self._node_at: dict[Address, int] = {}  # a node's advertised address, or a bootstrap server identified
        #: Each node's ``auto.create.topics.enable`` as read from it (absent: not read yet).
        self._auto_create: dict[int, bool] = {}
        self._on_new_node: Callable[[int], Awaitable[None]] | None = None
        self._on_address: Callable[[UpstreamNode], None] | None = None
        #: The upstream's topic ids and names, for the requests that name topics by id.
        self.topic_ids = TopicIds()

    def on_new_node(self, hook: Callable[[int], Awaitable[None]]) -> None:
        self._on_new_node = hook

    def on_node_address(self, hook: Callable[[UpstreamNode], None]) -> None:
        """``hook`` is told of every node learned at a new address (a new node, or one that moved)."""
        self._on_address = hook

    def node_at(self, address: Address) -> int | None:
        """The node at ``address`` (its advertised address, or a bootstrap server identified), if known."""
        return self._node_at.get(address)

    def auto_create_topics(self, address: Address) -> bool | None:
        """The ``auto.create.topics.enable`` of the broker at ``address``; None while unknown (not read yet, or the
        address is a bootstrap server not yet identified)."""
        node_id = self._node_at.get(address)
        return None if node_id is None else self._auto_create.get(node_id)

    def record_auto_create(self, node_id: int, enabled: bool, *, address: Address | None = None) -> None:
        """Node ``node_id`` said its ``auto.create.topics.enable`` is ``enabled`` (at ``address``: a bootstrap server,
        now known to be that node)."""
        if self._auto_create.get(node_id) != enabled:
            log.info("upstream node %d: auto.create.topics.enable=%s", node_id, str(enabled).lower())
        self._auto_create[node_id] = enabled
        if address is not None:
            self._node_at[address] = node_id

    def address_of(self, node_id: int) -> Address | None:
        return self._nodes.get(node_id)

    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    async def learn(self, nodes: Iterable[UpstreamNode]) -> None:
        """Record the upstream's brokers (an address may change: a broker moved); open listeners for new ones."""
        for node in nodes:
            if not 0 <= node.node_id <= MAX_NODE_ID:
                log.error("upstream node %d is outside 0..%d: the proxy cannot serve it", node.node_id, MAX_NODE_ID)
                continue
            known = self._nodes.get(node.node_id)
            if known == node.address:
                continue
            self._nodes[node.node_id] = node.address
            if known is not None and self._node_at.get(known) == node.node_id:
                del self._node_at[known]
            self._node_at[node.address] = node.node_id
            if self._on_address is not None:
                self._on_address(node)  # its settings are read (again) from the new address
            if known is None:
                log.info("upstream node %d at %s", node.node_id, node.address)
                if self._on_new_node is not None:
                    await self._on_new_node(node.node_id)
            else:
                log.info("upstream node %d moved from %s to %s", node.node_id, known, node.address)

    def advertised(self, listener: Listener, node_id: int) -> tuple[str, int]:
        """What the proxy tells a client of ``listener`` about node ``node_id``: (host, port)."""
        return self.advertised_host, node_port(listener.port, node_id)


def check_listeners(listeners: Iterable[Listener]) -> str | None:
    """Why these listeners' port ranges cannot all be served (overlap or past 65535), or None."""
    ranges = sorted((listener.port, node_port(listener.port, MAX_NODE_ID), str(listener)) for listener in listeners)
    for low, high, name in ranges:
        if low == 0:
            return f"listener {name}: the proxy needs fixed ports (port 0 is only for the server's tests)"
        if high > 65535:
            return f"listener {name}: nodes 0..{MAX_NODE_ID} need ports up to {high}, above 65535; choose a lower port"
    for (_, high, name), (low, _, other) in itertools.pairwise(ranges):
        if low <= high:
            return f"listeners {name} and {other}: each claims {MAX_NODE_ID + 2} ports (its own, then one per node)"
    return None

"""``proxy.handlers.addresses``: brokers in upstream answers are learned (a new node gets its listener before the
answer leaves) and answered at the proxy's address for their node; a node the proxy cannot serve is left out rather
than shown with its real address; FindCoordinator's "no coordinator" (-1) is answered as given."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.metadata.v12 import response as metadata_response
from kio.schema.metadata.v12.request import MetadataRequest

from kafkaguard.bootstrap import Services
from kafkaguard.protocol.connection import MAX_QUEUED_ANSWERS
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.proxy.handlers.addresses import proxied_brokers, proxied_node
from kafkaguard.proxy.nodes import MAX_NODE_ID, NodeDirectory
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.upstream import Address
from tests.proxy.memory_upstream import (
    LISTENER,
    PROXY_HOST,
    UPSTREAM,
    CollectingWriter,
    MemoryUpstream,
    client_request,
    entity,
    make_scope,
)


def broker(node_id: int, host: str) -> Any:
    return entity(metadata_response.MetadataResponseBroker, node_id=node_id, host=host, port=9092)


def in_scope(services: Services, nodes: NodeDirectory, use: Callable[[ProxyScope], Awaitable[Any]]) -> Any:
    """``use(scope)`` for a Metadata request's scope, on a loop of its own."""

    async def go() -> Any:
        outbox = Outbox(CollectingWriter(), limit=MAX_QUEUED_ANSWERS, close=lambda: None, peer="test")
        payload = client_request(entity(MetadataRequest, topics=None))
        return await use(make_scope(services, MemoryUpstream(), outbox, payload, principal="User:alice", nodes=nodes))

    return asyncio.run(go())


def test_brokers_are_learned_and_answered_at_the_proxys_address(services: Services):
    nodes = NodeDirectory([UPSTREAM], PROXY_HOST)
    opened: list[int] = []

    async def open_listener(node_id: int) -> None:
        opened.append(node_id)

    nodes.on_new_node(open_listener)
    brokers = [broker(1, "kafka-1.internal"), broker(2, "kafka-2.internal")]
    proxied = in_scope(services, nodes, lambda scope: proxied_brokers(scope, brokers))
    assert [(int(b.node_id), b.host, int(b.port)) for b in proxied] == [
        (1, PROXY_HOST, LISTENER.port + 2),
        (2, PROXY_HOST, LISTENER.port + 3),
    ]
    assert opened == [1, 2]
    assert nodes.address_of(2) == Address("kafka-2.internal", 9092)


def test_a_node_the_proxy_cannot_serve_is_left_out(services: Services):
    nodes = NodeDirectory([UPSTREAM], PROXY_HOST)
    brokers = [broker(1, "kafka-1.internal"), broker(MAX_NODE_ID + 1, "kafka-far.internal")]
    proxied = in_scope(services, nodes, lambda scope: proxied_brokers(scope, brokers))
    assert [int(b.node_id) for b in proxied] == [1]
    assert all(b.host == PROXY_HOST for b in proxied)
    assert nodes.node_ids == [1]


def test_no_coordinator_is_answered_as_the_upstream_gave_it(services: Services):
    nodes = NodeDirectory([UPSTREAM], PROXY_HOST)
    assert in_scope(services, nodes, lambda scope: proxied_node(scope, -1, "", -1)) == ("", -1)
    assert nodes.node_ids == []
    node = in_scope(services, nodes, lambda scope: proxied_node(scope, 4, "kafka-4.internal", 9092))
    assert node == (PROXY_HOST, LISTENER.port + 5)

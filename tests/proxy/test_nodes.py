"""``proxy.nodes``: each upstream node is served on its own proxy port; the directory learns nodes (a new one gets
its listener, one that moved is re-read at its new address, one out of range is not served) and keeps each broker's
``auto.create.topics.enable`` by address; ``check_listeners`` refuses port ranges that cannot all be served."""

from __future__ import annotations

import asyncio

from kafkaguard.config import Listener
from kafkaguard.proxy.nodes import MAX_NODE_ID, NodeDirectory, UpstreamNode, check_listeners, node_port
from kafkaguard.proxy.upstream import Address

BOOTSTRAP = Address("kafka-0.internal", 9092)
ONE, MOVED = Address("10.0.0.5", 9092), Address("10.0.0.9", 9092)


def directory() -> tuple[NodeDirectory, list[int], list[UpstreamNode]]:
    nodes = NodeDirectory([BOOTSTRAP], "proxy.example")
    opened: list[int] = []
    told: list[UpstreamNode] = []

    async def open_listener(node_id: int) -> None:
        opened.append(node_id)

    nodes.on_new_node(open_listener)
    nodes.on_node_address(told.append)
    return nodes, opened, told


def test_node_ports_follow_the_listeners_port():
    assert node_port(19092, 1) == 19094
    nodes = NodeDirectory([BOOTSTRAP], "proxy.example")
    assert nodes.advertised(Listener.parse("SASL_PLAINTEXT://0.0.0.0:19092"), 2) == ("proxy.example", 19095)


def test_a_new_node_gets_its_listener_once():
    nodes, opened, told = directory()
    asyncio.run(nodes.learn([UpstreamNode(1, ONE), UpstreamNode(1, ONE)]))
    asyncio.run(nodes.learn([UpstreamNode(1, ONE)]))
    assert opened == [1]
    assert told == [UpstreamNode(1, ONE)]
    assert (nodes.address_of(1), nodes.node_at(ONE)) == (ONE, 1)


def test_a_node_that_moved_is_known_at_its_new_address_only():
    nodes, opened, told = directory()
    asyncio.run(nodes.learn([UpstreamNode(1, ONE)]))
    asyncio.run(nodes.learn([UpstreamNode(1, MOVED)]))
    assert opened == [1]  # its listener stays
    assert told == [UpstreamNode(1, ONE), UpstreamNode(1, MOVED)]  # its settings are read again
    assert (nodes.address_of(1), nodes.node_at(MOVED), nodes.node_at(ONE)) == (MOVED, 1, None)


def test_a_node_out_of_range_is_not_served():
    nodes, opened, _told = directory()
    asyncio.run(nodes.learn([UpstreamNode(MAX_NODE_ID + 1, ONE), UpstreamNode(-1, MOVED)]))
    assert (opened, nodes.node_ids) == ([], [])


def test_auto_creation_is_known_by_the_address_of_the_broker_reached():
    nodes, _opened, _told = directory()
    assert nodes.auto_create_topics(BOOTSTRAP) is None  # not identified yet
    nodes.record_auto_create(3, False, address=BOOTSTRAP)  # the bootstrap server turned out to be node 3
    assert nodes.auto_create_topics(BOOTSTRAP) is False
    asyncio.run(nodes.learn([UpstreamNode(1, ONE)]))
    assert nodes.auto_create_topics(ONE) is None  # node 1's setting not read yet
    nodes.record_auto_create(1, True)
    assert nodes.auto_create_topics(ONE) is True


def test_check_listeners():
    def listeners(*ports: int) -> list[Listener]:
        return [Listener.parse(f"SASL_PLAINTEXT://0.0.0.0:{port}") for port in ports]

    assert check_listeners(listeners(19092, 29092)) is None
    assert "fixed ports" in (check_listeners(listeners(0)) or "")
    assert "above 65535" in (check_listeners(listeners(65000)) or "")
    assert "each claims" in (check_listeners(listeners(19092, 19500)) or "")

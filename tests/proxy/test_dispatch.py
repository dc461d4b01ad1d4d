"""``proxy.dispatch``: the ACL, SCRAM and client-quota APIs are answered from kafkaguard's own store and never reach
the upstream; every other API goes to its proxy handler over the connection's upstream connection, which a bootstrap
connection opens to the bootstrap servers and a node's connection to that node (the upstream here is in memory)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, RequestContext, ResourceType
from kafkaguard.protocol.codec import decode_request
from kafkaguard.protocol.connection import MAX_QUEUED_ANSWERS, Incoming
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.protocol.replies import Relayed
from kafkaguard.protocol.scope import BrokerInfo, ListenerContext
from kafkaguard.proxy.dispatch import ProxyDispatcher, ProxyRoute
from kafkaguard.proxy.nodes import NodeDirectory, UpstreamNode
from kafkaguard.proxy.quotas import QuotaMeter
from kafkaguard.proxy.upstream import Address
from kafkaguard.proxy.versions import CAPS, LOCAL
from tests.proxy.memory_upstream import (
    CLIENT_HOST,
    LISTENER,
    PROXY_HOST,
    UPSTREAM,
    CollectingWriter,
    MemoryUpstream,
    allow,
    client_request,
    entity,
)

NODE_2 = Address("kafka-2.internal", 9092)
TOPIC, LITERAL, READ, ALLOW = 2, 3, 3, 3  # Kafka's wire codes


@pytest.fixture
def dialled() -> Dialled:
    """The dispatcher's upstream connection is in memory; the addresses it was made for are recorded."""
    return Dialled(MemoryUpstream())


class Dialled:
    def __init__(self, upstream: MemoryUpstream) -> None:
        self.upstream = upstream
        self.made: list[tuple[Address, ...]] = []

    def __call__(self, addresses: Sequence[Address]) -> MemoryUpstream:
        self.made.append(tuple(addresses))
        return self.upstream


def dispatcher(services: Services, dial: Dialled, node_id: int | None = None) -> ProxyDispatcher:
    nodes = NodeDirectory([UPSTREAM], PROXY_HOST)
    asyncio.run(nodes.learn([UpstreamNode(2, NODE_2)]))
    route = ProxyRoute(node_id=node_id, nodes=nodes, versions=CAPS, meter=QuotaMeter(services.quotas), dial=dial)
    context = ListenerContext(services, LISTENER, BrokerInfo(0, PROXY_HOST, LISTENER.port, "proxy-cluster"))
    return ProxyDispatcher(context, route)


def dispatched(target: ProxyDispatcher, body: Any, principal: str) -> Any:
    payload = client_request(body)

    async def go() -> Any:
        outbox = Outbox(CollectingWriter(), limit=MAX_QUEUED_ANSWERS, close=lambda: None, peer=CLIENT_HOST)
        request = decode_request(payload, {**CAPS, **LOCAL})  # what a proxy connection offers at most
        return await target.dispatch(Incoming(request, payload, RequestContext(principal, CLIENT_HOST), outbox))

    return asyncio.run(go())


def acl_creation(principal: str) -> Any:
    return entity(AclCreation, resource_type=TOPIC, resource_name="feed-a", resource_pattern_type=LITERAL,
                  principal=principal, host="*", operation=READ, permission_type=ALLOW)  # fmt: skip


def test_create_acls_is_answered_from_the_store_and_never_forwarded(services: Services, dialled: Dialled):
    upstream, _made = dialled.upstream, dialled.made
    answer = dispatched(dispatcher(services, dialled), entity(CreateAclsRequest, creations=(acl_creation("User:bob"),)),
                        "User:admin")  # fmt: skip
    assert [result.error_code for result in answer.results] == [ErrorCode.none]
    assert [stored.binding.entry.principal for stored in services.acls.describe_acls()] == ["User:bob"]
    assert upstream.sent == []


def test_describe_acls_without_permission_is_refused_from_the_store(services: Services, dialled: Dialled):
    upstream, _made = dialled.upstream, dialled.made
    answer = dispatched(dispatcher(services, dialled), entity(DescribeAclsRequest, resource_type_filter=1,
                        pattern_type_filter=1, operation=1, permission_type=1), "User:alice")  # fmt: skip
    assert answer.error_code == ErrorCode.cluster_authorization_failed
    assert upstream.sent == []


def test_a_forwarded_api_goes_to_its_handler_over_the_upstream(services: Services, dialled: Dialled):
    upstream, made = dialled.upstream, dialled.made
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.READ)
    target = dispatcher(services, dialled)
    reply = dispatched(target, entity(HeartbeatRequest, group_id="feed-g"), "User:alice")
    assert isinstance(reply, Relayed)
    assert [sent.payload for sent in upstream.sent] == [client_request(entity(HeartbeatRequest, group_id="feed-g"))]
    assert made == [(UPSTREAM,)]  # a bootstrap connection: the bootstrap servers
    asyncio.run(target.close())
    assert upstream.closed


@pytest.mark.parametrize(("node_id", "addresses"), [(None, (UPSTREAM,)), (2, (NODE_2,)), (7, ())])
def test_a_connection_goes_to_the_node_it_means(
    services: Services, dialled: Dialled, node_id: int | None, addresses: tuple[Address, ...]
):
    _upstream, made = dialled.upstream, dialled.made
    dispatcher(services, dialled, node_id)
    assert made == [addresses]  # an unknown node: no address (the first request fails, the client reconnects)

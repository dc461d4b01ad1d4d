"""``proxy.handlers.coordinator`` (FindCoordinator) against an in-memory upstream: an allowed key goes up as the
client sent it and the coordinator is answered at the proxy's address for that node (the node learned); a denied key
is answered GROUP_AUTHORIZATION_FAILED with no node and never goes upstream; v4 batches send only the allowed keys;
an upstream that fails ends the request with ``UpstreamUnavailable``."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorV3
from kio.schema.find_coordinator.v4 import request as v4_request
from kio.schema.find_coordinator.v4 import response as v4_response

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.nodes import NodeDirectory
from kafkaguard.proxy.upstream import Address, UpstreamUnavailable
from tests.proxy.memory_upstream import (
    LISTENER,
    PROXY_HOST,
    UPSTREAM,
    MemoryUpstream,
    allow,
    answer_of,
    entity,
    handle,
    unavailable,
)

COORDINATOR = Address("kafka-3.internal", 9093)


@pytest.fixture(autouse=True)
def describer(services: Services) -> None:
    allow(services, "User:alice", ResourceType.GROUP, "feed-", AclOperation.DESCRIBE)


def coordinator(api_key: ApiKey, version: int, request: Any) -> Any:
    """Node 3 coordinates every key."""
    node = {"node_id": 3, "host": COORDINATOR.host, "port": COORDINATOR.port}
    if version < 4:
        return answer_of(api_key, version, **node)
    keys = tuple(entity(v4_response.Coordinator, key=key, **node) for key in request.coordinator_keys)
    return answer_of(api_key, version, coordinators=keys)


def test_an_allowed_key_goes_up_unchanged_and_the_coordinator_is_the_proxy(services: Services):
    upstream, nodes = MemoryUpstream(coordinator), NodeDirectory([UPSTREAM], PROXY_HOST)
    handled = handle(services, upstream, entity(FindCoordinatorV3, key="feed-g", key_type=0), nodes=nodes)
    assert [sent.payload for sent in upstream.sent] == [handled.payload]
    answer = handled.answer()
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (
        ErrorCode.none, 3, PROXY_HOST, LISTENER.port + 1 + 3,
    )  # fmt: skip
    assert nodes.address_of(3) == COORDINATOR  # learned before the answer left


def test_a_denied_key_is_refused_without_a_node_and_never_goes_upstream(services: Services):
    upstream = MemoryUpstream(coordinator)
    handled = handle(services, upstream, entity(FindCoordinatorV3, key="secret-g", key_type=0))
    assert upstream.sent == []
    answer = handled.answer()
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (
        ErrorCode.group_authorization_failed, -1, "", -1,
    )  # fmt: skip


def test_a_batch_sends_only_the_allowed_keys(services: Services):
    upstream = MemoryUpstream(coordinator)
    request = entity(v4_request.FindCoordinatorRequest, key_type=0, coordinator_keys=("feed-g", "secret-g"))
    handled = handle(services, upstream, request)
    assert upstream.bodies(ApiKey.FIND_COORDINATOR)[0].coordinator_keys == ("feed-g",)
    answered = {c.key: (c.error_code, int(c.node_id), c.host) for c in handled.answer().coordinators}
    assert answered == {
        "feed-g": (ErrorCode.none, 3, PROXY_HOST),
        "secret-g": (ErrorCode.group_authorization_failed, -1, ""),
    }


def test_an_upstream_failure_ends_the_request(services: Services):
    with pytest.raises(UpstreamUnavailable):
        handle(services, MemoryUpstream(unavailable), entity(FindCoordinatorV3, key="feed-g", key_type=0))

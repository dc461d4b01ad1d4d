"""FindCoordinator (10): DESCRIBE on the group or transactional id; the coordinator at the proxy's address.

As ``KafkaApis.handleFindCoordinatorRequest`` (Kafka 3.9): a group key needs DESCRIBE on the group (else
GROUP_AUTHORIZATION_FAILED), a transaction key DESCRIBE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a refused key gets no node (-1, "", -1) and the error's default text.
v4 batches keys: each is decided alone and only the allowed ones go upstream.
"""

from __future__ import annotations

from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse as FindCoordinatorResponseV4

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ItemError, KafkaErrorCode, ResourceType
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Reply
from kafkaguard.protocol.wire_errors import error_fields
from kafkaguard.proxy.broker_refusals import noted
from kafkaguard.proxy.builders import (
    Coordinator,
    coordinator,
    find_coordinator_response,
    rebuild_coordinator,
    rebuild_find_coordinator_request,
    rebuild_find_coordinator_response,
)
from kafkaguard.proxy.handlers.addresses import proxied_node
from kafkaguard.proxy.messages import FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse
from kafkaguard.proxy.refusals import GROUP_DENIED, TRANSACTIONAL_ID_DENIED
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.wire import UpstreamProtocolError

#: Kafka's CoordinatorType: 0 = group, 1 = transaction.
_KEY_TYPES = {0: ResourceType.GROUP, 1: ResourceType.TRANSACTIONAL_ID}
_DENIED = {ResourceType.GROUP: GROUP_DENIED, ResourceType.TRANSACTIONAL_ID: TRANSACTIONAL_ID_DENIED}
_INVALID = ItemError(KafkaErrorCode.INVALID_REQUEST)


async def find_coordinator(scope: ProxyScope, request: FindCoordinatorRequest) -> Reply:
    cls: type[FindCoordinatorResponse] = response_schema(ApiKey.FIND_COORDINATOR, scope.api_version)
    resource_type = _KEY_TYPES.get(int(getattr(request, "key_type", 0)))  # v0 asks for groups only
    batched = hasattr(request, "coordinator_keys")
    # v4+ batch their keys, v0-v3 name one: mypy narrows a union of versions by isinstance, not by hasattr
    keys: list[str] = list(request.coordinator_keys) if batched else [request.key]  # type: ignore[union-attr]
    if resource_type is None:  # Kafka: "Unknown coordinator type" (INVALID_REQUEST) for every key
        if batched:
            return find_coordinator_response(
                cls, throttle_time=NO_THROTTLE, coordinators=_coordinators(cls, keys, _INVALID)
            )
        return _single(cls, _INVALID)
    outcome = scope.authorize(REQUIREMENTS[ApiKey.FIND_COORDINATOR], {resource_type: keys})
    allowed = [key for key in keys if outcome.allows(resource_type, key)]
    denied = [key for key in keys if not outcome.allows(resource_type, key)]
    if not batched:
        if denied:
            return _single(cls, _DENIED[resource_type])
        single: FindCoordinatorResponse = (await scope.forward()).body(FIND_COORDINATOR)
        if isinstance(single, FindCoordinatorResponseV4):  # decoded at the request's version: v0-v3 answer one key
            raise UpstreamProtocolError(f"FindCoordinator v{scope.api_version} answered as v4")
        noted(scope, outcome, resource_type, [(keys[0], int(single.error_code))])  # passthrough: the broker's
        host, port = await proxied_node(scope, int(single.node_id), single.host, int(single.port))
        return rebuild_find_coordinator_response(single, host=host, port=port)
    refused = _coordinators(cls, denied, _DENIED[resource_type])
    if not allowed:
        return find_coordinator_response(cls, throttle_time=NO_THROTTLE, coordinators=refused)
    answer: FindCoordinatorResponse = (
        await scope.forward(rebuild_find_coordinator_request(request, coordinator_keys=tuple(allowed)))
    ).body(FIND_COORDINATOR)
    if not isinstance(answer, FindCoordinatorResponseV4):  # decoded at the request's version: v4 batches keys
        raise UpstreamProtocolError(f"FindCoordinator v{scope.api_version} answered as {type(answer).__name__}")
    noted(scope, outcome, resource_type, ((found.key, int(found.error_code)) for found in answer.coordinators))
    coordinators = []
    for found in answer.coordinators:
        host, port = await proxied_node(scope, int(found.node_id), found.host, int(found.port))
        coordinators.append(rebuild_coordinator(found, host=host, port=port))
    return rebuild_find_coordinator_response(answer, coordinators=tuple(coordinators) + refused)


def _single(cls: type[FindCoordinatorResponse], error: ItemError) -> FindCoordinatorResponse:
    return find_coordinator_response(
        cls, throttle_time=NO_THROTTLE, node_id=-1, host="", port=-1, **error_fields(error, default_text=True)
    )


def _coordinators(cls: type[FindCoordinatorResponse], keys: list[str], error: ItemError) -> tuple[Coordinator, ...]:
    return tuple(
        coordinator(cls, key=key, node_id=-1, host="", port=-1, **error_fields(error, default_text=True))
        for key in keys
    )

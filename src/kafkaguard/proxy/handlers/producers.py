"""InitProducerId (22): WRITE on the transactional id, or for an idempotent producer IDEMPOTENT_WRITE on the
cluster or WRITE on any topic.

As ``KafkaApis.handleInitProducerIdRequest`` (Kafka 3.9): a transactional producer needs WRITE on its
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent one needs IDEMPOTENT_WRITE on the
cluster or, since KIP-679, WRITE on at least one topic as ``authorizeByResourceType`` decides it (SEMANTICS.md §5),
else CLUSTER_AUTHORIZATION_FAILED. A refusal carries producer id and epoch -1.
"""

from __future__ import annotations

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey, Check, Requirement
from kafkaguard.authorizer.standard import authorize_by_resource_type_in
from kafkaguard.model import AclOperation, AuthorizationResult, ItemError, ResourceType
from kafkaguard.protocol.replies import Reply
from kafkaguard.proxy.messages import InitProducerIdRequest
from kafkaguard.proxy.refusals import CLUSTER_DENIED, TRANSACTIONAL_ID_DENIED, error_response
from kafkaguard.proxy.scope import ProxyScope

TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
#: An idempotent producer's cluster-level check (audited like every other check of the request).
IDEMPOTENT = Requirement(
    "InitProducerId(idempotent)", cluster=Check(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
)


async def init_producer_id(scope: ProxyScope, request: InitProducerIdRequest) -> Reply:
    transactional_id = request.transactional_id
    if transactional_id is not None:
        outcome = scope.authorize(REQUIREMENTS[ApiKey.INIT_PRODUCER_ID], {TRANSACTIONAL_ID: [transactional_id]})
        if not outcome.allows(TRANSACTIONAL_ID, transactional_id):
            return _refusal(scope, TRANSACTIONAL_ID_DENIED)
    elif not scope.authorize(IDEMPOTENT).request_allowed and not _writes_some_topic(scope):
        return _refusal(scope, CLUSTER_DENIED)
    return await scope.relay()


def _writes_some_topic(scope: ProxyScope) -> bool:
    result = authorize_by_resource_type_in(scope.snapshot, scope.context, AclOperation.WRITE, ResourceType.TOPIC)
    return result is AuthorizationResult.ALLOWED


def _refusal(scope: ProxyScope, error: ItemError) -> Reply:
    return error_response(scope, error, producer_id=-1, producer_epoch=-1)

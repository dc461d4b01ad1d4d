"""ApiVersions (18) and DescribeCluster (60): what this server offers and who it is."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey, authorized_operations
from kafkaguard.model import CLUSTER_NAME, AclOperation, ResourceType
from kafkaguard.server.build import NO_THROTTLE, build, nested
from kafkaguard.server.codec import SUPPORTED_VERSIONS, Versions, constant_response, response_schema
from kafkaguard.server.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kafkaguard.server.scope import RequestScope

#: Kafka's value for "authorized operations were not requested".
OPERATIONS_NOT_REQUESTED = -(2**31)


#: The answers made so far, by (version, error, the versions mapping's identity): every connection asks, and gets
#: the same answer (``constant_response``). A versions mapping is never changed once made (the server's, or what
#: the proxy negotiated); it is kept in the entry so that its id stays its own.
_ANSWERS: dict[tuple[int, ErrorCode, int], tuple[Versions, ApiVersionsResponse]] = {}
_ANSWERS_MAX = 64


def api_versions_response(
    api_version: int, error: ErrorCode = ErrorCode.none, versions: Versions = SUPPORTED_VERSIONS
) -> ApiVersionsResponse:
    """Our versions; also the v0 answer to an ApiVersions version we do not support (with UNSUPPORTED_VERSION),
    so that the client can retry with one we do."""
    key = (api_version, error, id(versions))
    made = _ANSWERS.get(key)
    if made is not None and made[0] is versions:
        return made[1]
    response = constant_response(_api_versions(api_version, error, versions))
    if len(_ANSWERS) >= _ANSWERS_MAX:
        _ANSWERS.clear()
    _ANSWERS[key] = (versions, response)
    return response


def _api_versions(api_version: int, error: ErrorCode, versions: Versions) -> ApiVersionsResponse:
    cls: type[ApiVersionsResponse] = response_schema(ApiKey.API_VERSIONS, api_version)
    version_cls = nested(cls, "ApiVersion")
    keys = tuple(
        build(version_cls, api_key=key.value, min_version=low, max_version=high)
        for key, (low, high) in sorted(versions.items())
    )
    return build(cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)


async def api_versions(scope: RequestScope, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response(scope.api_version)


def cluster_operations(scope: RequestScope) -> int:
    """Kafka fills the cluster's authorized operations only for a caller with DESCRIBE on the cluster; others get
    0 (SEMANTICS.md §13, Metadata and DescribeCluster)."""
    operations = authorized_operations(scope.snapshot, scope.context, ResourceType.CLUSTER, CLUSTER_NAME)
    return operations if operations & (1 << AclOperation.DESCRIBE.code) else 0


async def describe_cluster(scope: RequestScope, request: DescribeClusterRequest) -> DescribeClusterResponse:
    cls: type[DescribeClusterResponse] = response_schema(ApiKey.DESCRIBE_CLUSTER, scope.api_version)
    broker = scope.broker
    wanted = bool(getattr(request, "include_cluster_authorized_operations", False))
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=(
            build(nested(cls, "DescribeClusterBroker"), broker_id=broker.node_id, host=broker.host, port=broker.port),
        ),
        cluster_authorized_operations=cluster_operations(scope) if wanted else OPERATIONS_NOT_REQUESTED,
    )

"""DescribeCluster (60): who this server is (ApiVersions is answered by every connection: ``protocol.api_versions``)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkaguard.apis.operations import OPERATIONS_NOT_REQUESTED, cluster_operations
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.builders import describe_cluster_broker, describe_cluster_response
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from kafkaguard.protocol.scope import RequestScope


async def describe_cluster(scope: RequestScope, request: DescribeClusterRequest) -> DescribeClusterResponse:
    cls: type[DescribeClusterResponse] = response_schema(ApiKey.DESCRIBE_CLUSTER, scope.api_version)
    broker = scope.broker
    wanted = bool(getattr(request, "include_cluster_authorized_operations", False))
    return describe_cluster_response(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=(describe_cluster_broker(cls, broker_id=broker.node_id, host=broker.host, port=broker.port),),
        cluster_authorized_operations=cluster_operations(scope) if wanted else OPERATIONS_NOT_REQUESTED,
    )

"""Authorized-operations fields (KIP-430) as Kafka fills them, for the server's and the proxy's answers alike."""

from __future__ import annotations

from kafkaguard.authorizer.requests import authorized_operations
from kafkaguard.model import CLUSTER_NAME, AclOperation, ResourceType
from kafkaguard.protocol.scope import RequestScope

#: Kafka's value for "authorized operations were not requested".
OPERATIONS_NOT_REQUESTED = -(2**31)


def cluster_operations(scope: RequestScope) -> int:
    """Kafka fills the cluster's authorized operations only for a caller with DESCRIBE on the cluster; others get
    0 (SEMANTICS.md §13, Metadata and DescribeCluster)."""
    operations = authorized_operations(scope.snapshot, scope.context, ResourceType.CLUSTER, CLUSTER_NAME)
    return operations if operations & (1 << AclOperation.DESCRIBE.code) else 0

"""L0: Kafka's ACL model with Kafka's wire codes. Pure values; no I/O, no framework."""

from __future__ import annotations

from kafkaguard.model.action import Action, AuthorizationResult, RequestContext
from kafkaguard.model.binding import AclBinding, AclBindingFilter, AclId, StoredAcl, validate_new_binding
from kafkaguard.model.entry import WILDCARD_HOST, AccessControlEntry, AccessControlEntryFilter
from kafkaguard.model.enums import AclOperation, AclPermissionType, KafkaEnum, PatternType, ResourceType
from kafkaguard.model.host import java_host
from kafkaguard.model.item_error import ItemError, KafkaErrorCode
from kafkaguard.model.principal import (
    ANONYMOUS_PRINCIPAL,
    WILDCARD_PRINCIPAL,
    KafkaPrincipal,
    principal_error,
)
from kafkaguard.model.resource import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    ResourcePattern,
    ResourcePatternFilter,
)

__all__ = [
    "ANONYMOUS_PRINCIPAL",
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclId",
    "AclOperation",
    "AclPermissionType",
    "Action",
    "AuthorizationResult",
    "ItemError",
    "KafkaEnum",
    "KafkaErrorCode",
    "KafkaPrincipal",
    "PatternType",
    "RequestContext",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "StoredAcl",
    "java_host",
    "principal_error",
    "validate_new_binding",
]

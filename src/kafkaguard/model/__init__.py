"""Kafka's ACL model with Kafka's wire codes. Pure values; no I/O, no framework."""

from __future__ import annotations

from kafkaguard.model.action import Action, AuthorizationResult, RequestContext
from kafkaguard.model.actor import INTERNAL_ACTOR, Actor
from kafkaguard.model.binding import AclBinding, AclBindingFilter, AclId, StoredAcl, validate_new_binding
from kafkaguard.model.entry import WILDCARD_HOST, AccessControlEntry, AccessControlEntryFilter
from kafkaguard.model.enums import AclOperation, AclPermissionType, KafkaEnum, PatternType, ResourceType
from kafkaguard.model.host import (
    CidrBlock,
    cidr_error,
    client_key,
    host_matches,
    is_cidr,
    java_host,
    parse_address,
    parse_cidr,
)
from kafkaguard.model.item_error import ItemError, KafkaErrorCode
from kafkaguard.model.management import HistoryQuery, ManagementEvent
from kafkaguard.model.principal import (
    ANONYMOUS_PRINCIPAL,
    GROUP_TYPE,
    WILDCARD_PRINCIPAL,
    KafkaPrincipal,
    is_group,
    principal_error,
    principal_matches,
)
from kafkaguard.model.resource import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    ResourcePattern,
    ResourcePatternFilter,
)

__all__ = [
    "INTERNAL_ACTOR",
    "Actor",
    "HistoryQuery",
    "ManagementEvent",
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
    "CidrBlock",
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
    "cidr_error",
    "host_matches",
    "is_cidr",
    "client_key",
    "java_host",
    "parse_address",
    "parse_cidr",
    "GROUP_TYPE",
    "is_group",
    "principal_error",
    "principal_matches",
    "validate_new_binding",
]

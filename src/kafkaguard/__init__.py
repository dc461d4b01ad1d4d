"""kafkaguard: authorization and SCRAM credentials for Apache Kafka-compatible clusters.

The public API. Everything here imports with the standard library alone; the server, console, CLI and audit
pipeline live in subpackages that need their optional extras.
"""

from __future__ import annotations

from kafkaguard.authorizer import (
    AclCreateResult,
    AclDeleteResult,
    Decision,
    DefaultRule,
    MatchingAclRule,
    StandardAuthorizer,
    SuperUserRule,
)
from kafkaguard.errors import (
    AuthorizerNotReadyError,
    InvalidAclError,
    InvalidActionError,
    InvalidCodeError,
    InvalidConfigError,
    InvalidGroupError,
    InvalidNameError,
    KafkaguardError,
)
from kafkaguard.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StoredAcl,
    validate_new_binding,
)

__version__ = "0.1.0"

__all__ = [
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclCreateResult",
    "AclDeleteResult",
    "AclId",
    "AclOperation",
    "AclPermissionType",
    "Action",
    "AuthorizationResult",
    "AuthorizerNotReadyError",
    "Decision",
    "DefaultRule",
    "InvalidAclError",
    "InvalidActionError",
    "InvalidCodeError",
    "InvalidConfigError",
    "InvalidGroupError",
    "InvalidNameError",
    "KafkaguardError",
    "MatchingAclRule",
    "PatternType",
    "RequestContext",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "StandardAuthorizer",
    "StoredAcl",
    "SuperUserRule",
    "__version__",
    "validate_new_binding",
]

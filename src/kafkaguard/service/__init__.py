"""The use cases, and the single writer: changes go to the store (durable), then to the authorizer."""

from __future__ import annotations

from kafkaguard.service.acls import AclService, ImportResult, SyncResult
from kafkaguard.service.credentials import (
    CredentialService,
    ScramDeletion,
    ScramUpsertion,
    UserAlterationResult,
    UserDescription,
)
from kafkaguard.service.groups import GroupService
from kafkaguard.service.quotas import (
    QuotaAlteration,
    QuotaAlterationResult,
    QuotaDescription,
    QuotaFilterComponent,
    QuotaOp,
    QuotaService,
)
from kafkaguard.service.topics import (
    NewTopic,
    TopicCreateResult,
    TopicDeleteResult,
    TopicDescription,
    TopicService,
)

__all__ = [
    "AclService",
    "CredentialService",
    "GroupService",
    "ImportResult",
    "NewTopic",
    "QuotaAlteration",
    "QuotaAlterationResult",
    "QuotaDescription",
    "QuotaFilterComponent",
    "QuotaOp",
    "QuotaService",
    "ScramDeletion",
    "ScramUpsertion",
    "SyncResult",
    "TopicCreateResult",
    "TopicDeleteResult",
    "TopicDescription",
    "TopicService",
    "UserAlterationResult",
    "UserDescription",
]

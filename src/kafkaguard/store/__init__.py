"""L2: durable storage of ACLs, SCRAM credentials, topics and client quotas (ports, SQLite, in-memory twins)."""

from __future__ import annotations

from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
from kafkaguard.store.errors import SchemaVersionError, StoreError
from kafkaguard.store.memory import MemoryAclStore, MemoryCredentialStore, MemoryQuotaStore, MemoryTopicStore
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    AclStore,
    CredentialInfo,
    CredentialSnapshot,
    CredentialStore,
    CredentialWrite,
    QuotaChange,
    QuotaEntity,
    QuotaRecord,
    QuotaSnapshot,
    QuotaStore,
    QuotaWrite,
    Store,
    TopicCreation,
    TopicRecord,
    TopicSnapshot,
    TopicStore,
    UserAlteration,
)
from kafkaguard.store.sqlite import DATABASE_NAME, DEFAULT_DATA_DIR, DEFAULT_PATH, SqliteStore
from kafkaguard.store.uuids import METADATA_TOPIC_ID, ZERO_UUID, new_cluster_id, random_uuid, uuid_to_string

__all__ = [
    "DATABASE_NAME",
    "DEFAULT_CHANGE_LOG_LIMIT",
    "DEFAULT_DATA_DIR",
    "DEFAULT_PATH",
    "METADATA_TOPIC_ID",
    "ZERO_UUID",
    "AclCreation",
    "AclDeletion",
    "AclDelta",
    "AclSnapshot",
    "AclStore",
    "CredentialInfo",
    "CredentialSnapshot",
    "CredentialStore",
    "CredentialWrite",
    "MemoryAclStore",
    "MemoryCredentialStore",
    "MemoryQuotaStore",
    "MemoryTopicStore",
    "QuotaChange",
    "QuotaEntity",
    "QuotaRecord",
    "QuotaSnapshot",
    "QuotaStore",
    "QuotaWrite",
    "SchemaVersionError",
    "SqliteStore",
    "Store",
    "StoreError",
    "TopicCreation",
    "TopicRecord",
    "TopicSnapshot",
    "TopicStore",
    "UserAlteration",
    "new_cluster_id",
    "random_uuid",
    "uuid_to_string",
]

"""L2: durable storage of ACLs, SCRAM credentials, topics and client quotas (ports, SQLite, in-memory twins; the
PostgreSQL store is ``kafkaguard.store.postgres``, imported only where a store URL is configured: it needs psycopg)."""

from __future__ import annotations

from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
from kafkaguard.store.errors import SchemaVersionError, StoreError, StoreUnavailableError
from kafkaguard.store.memory import MemoryAclStore, MemoryCredentialStore, MemoryQuotaStore, MemoryTopicStore
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    AclStore,
    ChangeFeed,
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
from kafkaguard.store.url import StoreUrl, is_store_url
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
    "ChangeFeed",
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
    "StoreUnavailableError",
    "StoreUrl",
    "TopicCreation",
    "TopicRecord",
    "TopicSnapshot",
    "TopicStore",
    "UserAlteration",
    "is_store_url",
    "new_cluster_id",
    "random_uuid",
    "uuid_to_string",
]

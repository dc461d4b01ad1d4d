"""L2: durable storage of ACLs and SCRAM credentials (ports, the SQLite default, in-memory twins)."""

from __future__ import annotations

from kafkaguard.store.changes import DEFAULT_CHANGE_LOG_LIMIT
from kafkaguard.store.errors import SchemaVersionError, StoreError
from kafkaguard.store.memory import MemoryAclStore, MemoryCredentialStore
from kafkaguard.store.ports import (
    AclCreation,
    AclDeletion,
    AclDelta,
    AclSnapshot,
    AclStore,
    CredentialInfo,
    CredentialStore,
    UserAlteration,
)
from kafkaguard.store.sqlite import DATABASE_NAME, DEFAULT_DATA_DIR, DEFAULT_PATH, SqliteStore

__all__ = [
    "DATABASE_NAME",
    "DEFAULT_CHANGE_LOG_LIMIT",
    "DEFAULT_DATA_DIR",
    "DEFAULT_PATH",
    "AclCreation",
    "AclDeletion",
    "AclDelta",
    "AclSnapshot",
    "AclStore",
    "CredentialInfo",
    "CredentialStore",
    "MemoryAclStore",
    "MemoryCredentialStore",
    "SchemaVersionError",
    "SqliteStore",
    "StoreError",
    "UserAlteration",
]

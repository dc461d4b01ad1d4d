"""The SQLite schema and its forward migrations.

``schema_version`` holds one row, the number of migrations applied. A migration is a tuple of statements run in
the same transaction as the version update, so a database is always at exactly one version. Migrations are only
ever appended: a released one is never edited.
"""

from __future__ import annotations

import sqlite3

from kafkaguard.store.errors import SchemaVersionError

#: Version 1: ACLs (each distinct binding once, under a stable id), their change log, counters, credentials.
_V1 = (
    """CREATE TABLE acls (
        id TEXT PRIMARY KEY NOT NULL,
        resource_type INTEGER NOT NULL,
        resource_name TEXT NOT NULL,
        pattern_type INTEGER NOT NULL,
        principal TEXT NOT NULL,
        host TEXT NOT NULL,
        operation INTEGER NOT NULL,
        permission_type INTEGER NOT NULL
    )""",
    # Name first: the most selective column for filters, and usable when the filter's resource type is ANY.
    """CREATE UNIQUE INDEX acls_binding ON acls
        (resource_name, resource_type, pattern_type, principal, host, operation, permission_type)""",
    "CREATE INDEX acls_principal ON acls (principal)",
    # One row per change; seq is the ACL version the change produced. The binding is copied so that a follower
    # can apply an addition without reading the acls table (where the row may be gone again).
    """CREATE TABLE acl_changes (
        seq INTEGER PRIMARY KEY NOT NULL,
        acl_id TEXT NOT NULL,
        added INTEGER NOT NULL CHECK (added IN (0, 1)),
        resource_type INTEGER NOT NULL,
        resource_name TEXT NOT NULL,
        pattern_type INTEGER NOT NULL,
        principal TEXT NOT NULL,
        host TEXT NOT NULL,
        operation INTEGER NOT NULL,
        permission_type INTEGER NOT NULL
    )""",
    # acl_version: the seq of the last change; acl_log_floor: changes with seq <= floor have been dropped.
    "CREATE TABLE counters (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT INTO counters (name, value) VALUES ('acl_version', 0), ('acl_log_floor', 0)",
    """CREATE TABLE scram_credentials (
        user TEXT NOT NULL,
        mechanism INTEGER NOT NULL,
        salt BLOB NOT NULL,
        stored_key BLOB NOT NULL,
        server_key BLOB NOT NULL,
        iterations INTEGER NOT NULL,
        PRIMARY KEY (user, mechanism)
    ) WITHOUT ROWID""",
)

#: Version 2: the topic catalog, and the cluster's identity (its one row is written on first use, see
#: ``SqliteStore.cluster_id``, because the id is random and a migration is fixed text).
_V2 = (
    # topic_id: a Kafka Uuid, 16 bytes, never the all-zero "no id". collision_key: the name with '.' as '_'
    # (Kafka's Topic.unifyCollisionChars); unique, so two colliding names can never both be stored.
    # configs: a JSON object of the explicitly set topic configs, string to string.
    """CREATE TABLE topics (
        name TEXT PRIMARY KEY NOT NULL,
        topic_id BLOB NOT NULL UNIQUE CHECK (length(topic_id) = 16 AND topic_id <> zeroblob(16)),
        collision_key TEXT NOT NULL UNIQUE,
        num_partitions INTEGER NOT NULL CHECK (num_partitions > 0),
        replication_factor INTEGER NOT NULL CHECK (replication_factor > 0),
        configs TEXT NOT NULL CHECK (json_valid(configs)),
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )""",
    "CREATE TABLE cluster (id INTEGER PRIMARY KEY CHECK (id = 1), cluster_id TEXT NOT NULL)",
)

#: Version 3: the credential version, bumped by every row inserted into, updated in or deleted from
#: ``scram_credentials``. Triggers keep it, so no writer of the table can change a credential without the processes
#: that hold the credentials in memory noticing with one cheap read (``credential_version``).
_V3 = (
    "INSERT INTO counters (name, value) VALUES ('credential_version', 0)",
    """CREATE TRIGGER scram_credentials_version_insert AFTER INSERT ON scram_credentials
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'credential_version'; END""",
    """CREATE TRIGGER scram_credentials_version_update AFTER UPDATE ON scram_credentials
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'credential_version'; END""",
    """CREATE TRIGGER scram_credentials_version_delete AFTER DELETE ON scram_credentials
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'credential_version'; END""",
)

#: Version 4: the topic version, bumped by every row inserted into, updated in or deleted from ``topics``. Triggers
#: keep it, so no writer of the table (a later statement, an operator's sqlite3 shell) can change the catalog
#: without the processes that hold it in memory noticing (``topic_version``).
_V4 = (
    "INSERT INTO counters (name, value) VALUES ('topic_version', 0)",
    """CREATE TRIGGER topics_version_insert AFTER INSERT ON topics
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'topic_version'; END""",
    """CREATE TRIGGER topics_version_update AFTER UPDATE ON topics
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'topic_version'; END""",
    """CREATE TRIGGER topics_version_delete AFTER DELETE ON topics
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'topic_version'; END""",
)

#: Version 5: client quotas (KIP-546). One row per (entity, key): ``entity`` is the JSON array of the entity's
#: ``[type, name]`` pairs sorted by type (a null name is the default entity), ``value`` the quota as Python's
#: ``repr`` of the double (text, because a REAL column cannot hold the NaN that Kafka accepts). The quota version
#: is bumped by triggers, like the credential and topic versions.
_V5 = (
    """CREATE TABLE client_quotas (
        entity TEXT NOT NULL CHECK (json_valid(entity)),
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (entity, key)
    ) WITHOUT ROWID""",
    "INSERT INTO counters (name, value) VALUES ('quota_version', 0)",
    """CREATE TRIGGER client_quotas_version_insert AFTER INSERT ON client_quotas
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'quota_version'; END""",
    """CREATE TRIGGER client_quotas_version_update AFTER UPDATE ON client_quotas
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'quota_version'; END""",
    """CREATE TRIGGER client_quotas_version_delete AFTER DELETE ON client_quotas
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'quota_version'; END""",
)

#: Version 6: principal groups (kafkaguard's, beyond Kafka). One row per (group, member principal); the group is
#: the name after ``Group:``. The membership version is bumped by triggers, like the quota version.
_V6 = (
    """CREATE TABLE principal_groups (
        group_name TEXT NOT NULL,
        principal TEXT NOT NULL,
        PRIMARY KEY (group_name, principal)
    ) WITHOUT ROWID""",
    "INSERT INTO counters (name, value) VALUES ('membership_version', 0)",
    """CREATE TRIGGER principal_groups_version_insert AFTER INSERT ON principal_groups
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'membership_version'; END""",
    """CREATE TRIGGER principal_groups_version_update AFTER UPDATE ON principal_groups
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'membership_version'; END""",
    """CREATE TRIGGER principal_groups_version_delete AFTER DELETE ON principal_groups
        BEGIN UPDATE counters SET value = value + 1 WHERE name = 'membership_version'; END""",
)

#: Version 7: the management history (``store.sql.history``): one row per item of every management change, written
#: in the change's transaction; never trimmed by kafkaguard (see ``store.ports``). ``occurred_at`` is fixed-width
#: UTC text (``model.management.event_time``), so text order is time order; ``data`` the event's JSON data.
_V7 = (
    """CREATE TABLE management_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        occurred_at TEXT NOT NULL,
        action TEXT NOT NULL,
        actor_principal TEXT NOT NULL,
        actor_address TEXT,
        actor_interface TEXT NOT NULL,
        request_id TEXT,
        principal TEXT,
        resource_type TEXT,
        resource_name TEXT,
        subject TEXT NOT NULL,
        result TEXT NOT NULL,
        data TEXT NOT NULL CHECK (json_valid(data))
    )""",
    "CREATE INDEX management_events_principal ON management_events (principal, seq)",
    "CREATE INDEX management_events_actor ON management_events (actor_principal, seq)",
    "CREATE INDEX management_events_resource ON management_events (resource_name, seq)",
    "CREATE INDEX management_events_time ON management_events (occurred_at)",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7)


def migrate(connection: sqlite3.Connection, migrations: tuple[tuple[str, ...], ...] = MIGRATIONS) -> int:
    """Bring the database to the latest schema in one transaction; returns the version it is at.

    Safe when several processes open a new database at once: the write lock is taken before the version is read.

    :raises SchemaVersionError: the database is at a version newer than ``migrations`` knows.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        row = connection.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        current = int(row[0]) if row is not None else 0
        if current > len(migrations):
            raise SchemaVersionError(
                f"the database is at schema version {current}, but this kafkaguard knows only up to "
                f"{len(migrations)}: upgrade kafkaguard"
            )
        for statements in migrations[current:]:
            for statement in statements:
                connection.execute(statement)
        connection.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = ?",
            (len(migrations), len(migrations)),
        )
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return len(migrations)

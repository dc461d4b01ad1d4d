"""The PostgreSQL schema and its forward migrations, the counterpart of ``store.schema`` (SQLite): the same tables
and columns (so that one set of statements, ``store.sql``, serves both), in PostgreSQL's types.

``schema_version`` holds one row, the number of migrations applied. A migration is a tuple of statements run in
the same transaction as the version update, so a database is always at exactly one version; migrations are only
ever appended. Several nodes may start at once on a new database: ``migrate`` holds a transaction-level advisory
lock, so one of them migrates and the others find it done.

Versions: each counter row of ``counters`` (``acl_version``, ``credential_version``, ``topic_version``,
``quota_version``, ``membership_version``) is locked (``SELECT … FOR UPDATE``) by every write to its tables before
it reads anything, so the writers of one kind are serialized and their versions commit in order: a reader never sees
version n+1 without n. Triggers move the credential, topic, quota and membership versions for every row written or
deleted, as the SQLite triggers do, and every update of a counter sends ``NOTIFY kafkaguard_changes`` with the
counter's name, which PostgreSQL delivers at commit, to every node listening (``listener``).
"""

from __future__ import annotations

import psycopg

from kafkaguard.store.errors import SchemaVersionError

#: The channel every change is announced on (payload: the counter's name).
CHANNEL = "kafkaguard_changes"
#: The advisory lock key ``migrate`` holds (any constant; "kgmigrat" in ASCII).
_MIGRATION_LOCK = 0x6B676D6967726174

_V1 = (
    """CREATE TABLE acls (
        id TEXT PRIMARY KEY,
        resource_type SMALLINT NOT NULL,
        resource_name TEXT NOT NULL,
        pattern_type SMALLINT NOT NULL,
        principal TEXT NOT NULL,
        host TEXT NOT NULL,
        operation SMALLINT NOT NULL,
        permission_type SMALLINT NOT NULL
    )""",
    """CREATE UNIQUE INDEX acls_binding ON acls
        (resource_name, resource_type, pattern_type, principal, host, operation, permission_type)""",
    "CREATE INDEX acls_principal ON acls (principal)",
    # seq is the ACL version the change produced; the binding is copied so a follower can apply an addition
    # without reading the acls table.
    """CREATE TABLE acl_changes (
        seq BIGINT PRIMARY KEY,
        added BOOLEAN NOT NULL,
        acl_id TEXT NOT NULL,
        resource_type SMALLINT NOT NULL,
        resource_name TEXT NOT NULL,
        pattern_type SMALLINT NOT NULL,
        principal TEXT NOT NULL,
        host TEXT NOT NULL,
        operation SMALLINT NOT NULL,
        permission_type SMALLINT NOT NULL
    )""",
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    """INSERT INTO counters (name, value) VALUES ('acl_version', 0), ('acl_log_floor', 0), ('credential_version', 0),
        ('topic_version', 0), ('quota_version', 0)""",
    """CREATE TABLE scram_credentials (
        "user" TEXT NOT NULL,
        mechanism SMALLINT NOT NULL,
        salt BYTEA NOT NULL,
        stored_key BYTEA NOT NULL,
        server_key BYTEA NOT NULL,
        iterations INTEGER NOT NULL,
        PRIMARY KEY ("user", mechanism)
    )""",
    # topic_id: a Kafka Uuid, never the all-zero "no id"; collision_key: the name with '.' as '_' (unique, so two
    # colliding names can never both be stored); configs: a JSON object of the explicitly set configs.
    """CREATE TABLE topics (
        name TEXT PRIMARY KEY,
        topic_id UUID NOT NULL UNIQUE CHECK (topic_id <> '00000000-0000-0000-0000-000000000000'),
        collision_key TEXT NOT NULL UNIQUE,
        num_partitions INTEGER NOT NULL CHECK (num_partitions > 0),
        replication_factor INTEGER NOT NULL CHECK (replication_factor > 0),
        configs JSONB NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )""",
    "CREATE TABLE cluster (id INTEGER PRIMARY KEY CHECK (id = 1), cluster_id TEXT NOT NULL)",
    # Secrets every node must share, made by the first node that needs one: the server secret that derives decoy
    # SCRAM salts (a node behind a load balancer must answer an unknown user as every other node does).
    "CREATE TABLE secrets (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
    # entity: the JSON array of [type, name] pairs sorted by type; value: Python's repr of the double (text, as in
    # SQLite, so every double including NaN and -0.0 comes back as it went in).
    """CREATE TABLE client_quotas (
        entity TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (entity, key)
    )""",
    """CREATE FUNCTION kafkaguard_bump() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE counters SET value = value + 1 WHERE name = TG_ARGV[0];
            RETURN NULL;
        END $$""",
    *(
        f"CREATE TRIGGER {table}_version AFTER INSERT OR UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION kafkaguard_bump('{name}')"
        for table, name in (
            ("scram_credentials", "credential_version"),
            ("topics", "topic_version"),
            ("client_quotas", "quota_version"),
        )
    ),
    f"""CREATE FUNCTION kafkaguard_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', NEW.name);
            RETURN NULL;
        END $$""",
    "CREATE TRIGGER counters_notify AFTER UPDATE ON counters FOR EACH ROW EXECUTE FUNCTION kafkaguard_notify()",
)

#: Version 2: principal groups (kafkaguard's, beyond Kafka), as SQLite's version 6: one row per (group,
#: member principal), the membership version moved by the same bump trigger as the other kinds.
_V2 = (
    """CREATE TABLE principal_groups (
        group_name TEXT NOT NULL,
        principal TEXT NOT NULL,
        PRIMARY KEY (group_name, principal)
    )""",
    "INSERT INTO counters (name, value) VALUES ('membership_version', 0)",
    "CREATE TRIGGER principal_groups_version AFTER INSERT OR UPDATE OR DELETE ON principal_groups "
    "FOR EACH ROW EXECUTE FUNCTION kafkaguard_bump('membership_version')",
)

#: Version 3: the management history, as SQLite's version 7 (``seq`` an identity column; ``data`` JSONB). Its writes
#: lock no counter and move none: the history is read on demand, never followed.
_V3 = (
    """CREATE TABLE management_events (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
        data JSONB NOT NULL
    )""",
    "CREATE INDEX management_events_principal ON management_events (principal, seq)",
    "CREATE INDEX management_events_actor ON management_events (actor_principal, seq)",
    "CREATE INDEX management_events_resource ON management_events (resource_name, seq)",
    "CREATE INDEX management_events_time ON management_events (occurred_at)",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3)


def migrate(conn: psycopg.Connection[tuple[object, ...]], migrations: tuple[tuple[str, ...], ...] = MIGRATIONS) -> int:
    """Bring the database to the latest schema in one transaction; returns the version it is at.

    :raises SchemaVersionError: the database is at a version newer than ``migrations`` knows.
    :raises psycopg.Error: the database refused (the caller turns it into a ``StoreError``).
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        current = int(str(row[0])) if row is not None else 0
        if current > len(migrations):
            raise SchemaVersionError(
                f"the database is at schema version {current}, but this kafkaguard knows only up to "
                f"{len(migrations)}: upgrade kafkaguard"
            )
        for statements in migrations[current:]:
            for statement in statements:
                conn.execute(statement.encode())
        conn.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET version = %s",
            (len(migrations), len(migrations)),
        )
    return len(migrations)

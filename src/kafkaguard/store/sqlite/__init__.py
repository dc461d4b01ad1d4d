"""The embedded durable store: one SQLite file (stdlib ``sqlite3``) holding ACLs, SCRAM credentials, topics, client
quotas and principal groups.

Durability: WAL journal with ``synchronous=FULL``, so a call that returned has its transaction fsync'ed; every
write is one ``BEGIN IMMEDIATE`` … ``COMMIT``. Several processes may open the same file; the busy timeout makes
writers queue for the lock instead of failing.

Every process sees every change: each ACL change is logged under the next ACL version in the same transaction
as the change itself. ``acl_version()`` first asks ``PRAGMA data_version``, which changes only when another
connection has committed, so an idle poll costs one pragma; ``changes_since`` then returns the net delta. Every
row written to or deleted from the SCRAM credentials bumps the credential version (triggers, in the same
transaction); ``credential_version()`` is as cheap as ``acl_version()``.

Every topic created, changed or deleted bumps the topic version (triggers, in the same transaction);
``topic_version()`` is as cheap as ``acl_version()``. Client quotas are versioned the same way (``quota_version()``).

The database holds every user's StoredKey and ServerKey: it is created with mode 0600 (SQLite gives its -wal and
-shm files the database's mode), and a database, -wal or -shm file found wider is set to 0600 on open
(``store.files``).

The table sets and their statements are ``store.sql``'s, shared with the PostgreSQL store; this package holds only
what is SQLite's own: ``connection`` (opening, WAL, file modes, transactions, counters polled through ``PRAGMA
data_version``, and the SQLite ``DIALECT``), the schema (``store.schema``), and ``SqliteStore`` (``store``), the
shared ``SqlStore`` on that connection. Nothing outside the stores knows SQL.
"""

from __future__ import annotations

from kafkaguard.store.sqlite.connection import DATABASE_NAME, DEFAULT_DATA_DIR, DEFAULT_PATH
from kafkaguard.store.sqlite.store import SqliteStore

__all__ = ["DATABASE_NAME", "DEFAULT_DATA_DIR", "DEFAULT_PATH", "SqliteStore"]

"""The shared durable store: one PostgreSQL database (psycopg 3, a ``psycopg_pool`` pool) that every kafkaguard node
(servers, proxies, consoles, on any number of hosts) opens at once. Needs the ``postgresql`` extra; nothing else
in kafkaguard imports this package unless a store URL is configured.

What it promises, beyond the ports:

- **Versions in order.** Every change takes the next version of its kind in the transaction that makes it; the
  writers of one kind take turns on their counter row (``schema``), so a node never sees version n+1 without n,
  and ``changes_since`` gives each ACL change to a follower exactly once.
- **Propagation.** Each commit notifies (``NOTIFY``, delivered at commit) every node's listening connection;
  ``wait_for_change`` returns at once, and the node polls. A notification missed while a node was disconnected
  costs nothing: the poll compares versions.
- **Faults.** A lost server makes reads and writes raise ``StoreUnavailableError`` (retriable) and ``healthy()``
  False; the pool and the listener reconnect by themselves. A commit is durable when the call returns (PostgreSQL
  defaults: ``fsync=on``, ``synchronous_commit=on``).
- **No password in sight.** The URL carries none (refused if it does); the password is handed in separately and
  never shown by a repr, a log line or an error message.

The table sets and their statements are ``store.sql``'s, shared with the SQLite store; this package holds only what
is PostgreSQL's own (the URL is ``store.url``): ``schema`` (with the counters' triggers that send ``NOTIFY``),
``connection`` (the pool, transactions, errors, and the PostgreSQL ``DIALECT``), ``listener`` (``LISTEN``), and
``PostgresStore`` (``store``), the shared ``SqlStore`` on that pool plus the change feed and the shared server
secret.
"""

from __future__ import annotations

from kafkaguard.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]

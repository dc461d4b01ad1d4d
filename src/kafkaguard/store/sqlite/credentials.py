"""The ``scram_credentials`` table: ``CredentialStore`` on the shared connection.

Every row written to or deleted from the SCRAM credentials bumps the credential version (triggers, in the same
transaction); ``credential_version()`` is as cheap as ``acl_version()``: one ``PRAGMA data_version`` while no
other connection has committed.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence

from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.credential_rows import credential_infos, credential_pairs
from kafkaguard.store.ports import CredentialInfo, CredentialSnapshot, CredentialWrite, UserAlteration
from kafkaguard.store.sqlite.connection import MAX_PARAMS, Database, Row, counter


class CredentialTables:
    """``CredentialStore`` on the ``scram_credentials`` table: salt, StoredKey, ServerKey and iterations per user
    and mechanism, never a password."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT salt, stored_key, server_key, iterations FROM scram_credentials "
                "WHERE user = ? AND mechanism = ?",
                (user, mechanism.code),
            ).fetchone()
        if row is None:
            return None
        return ScramCredential(mechanism, bytes(row[0]), bytes(row[1]), bytes(row[2]), int(row[3]))

    def load_credentials(self) -> CredentialSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "credential_version")
            rows = conn.execute(
                "SELECT user, mechanism, salt, stored_key, server_key, iterations FROM scram_credentials"
            ).fetchall()
        return CredentialSnapshot(credential_pairs(rows), version)

    def credential_version(self) -> int:
        return self._db.polled_counter("credential_version")

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        sql = "SELECT user, mechanism, iterations FROM scram_credentials"
        with self._db.read() as conn:
            if users is None:
                batches: list[list[Row]] = [conn.execute(sql + " ORDER BY user, mechanism").fetchall()]
            else:
                names = sorted(set(users))
                batches = [
                    conn.execute(
                        f"{sql} WHERE user IN ({','.join('?' * len(chunk))}) ORDER BY user, mechanism", chunk
                    ).fetchall()
                    for chunk in (names[i : i + MAX_PARAMS] for i in range(0, len(names), MAX_PARAMS))
                ]
        # The chunks are of sorted names, each ordered by user: together, in user order.
        return credential_infos(itertools.chain.from_iterable(batches))

    def alter_credentials(self, alterations: Sequence[UserAlteration]) -> CredentialWrite:
        missing: dict[str, ScramMechanism] = {}
        with self._db.write() as conn:
            base = counter(conn, "credential_version")
            for alteration in alterations:
                user = alteration.user
                absent = [
                    m
                    for m in alteration.deletions
                    if conn.execute(
                        "SELECT 1 FROM scram_credentials WHERE user = ? AND mechanism = ?", (user, m.code)
                    ).fetchone()
                    is None
                ]
                if absent:
                    missing[user] = absent[0]
                    continue
                conn.executemany(
                    "DELETE FROM scram_credentials WHERE user = ? AND mechanism = ?",
                    [(user, m.code) for m in alteration.deletions],
                )
                conn.executemany(
                    "INSERT INTO scram_credentials (user, mechanism, salt, stored_key, server_key, iterations) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user, mechanism) DO UPDATE SET salt = excluded.salt, "
                    "stored_key = excluded.stored_key, server_key = excluded.server_key, "
                    "iterations = excluded.iterations",
                    [
                        (user, c.mechanism.code, c.salt, c.stored_key, c.server_key, c.iterations)
                        for c in alteration.upsertions
                    ],
                )
            # The schema's triggers have counted every row written or deleted.
            version = counter(conn, "credential_version")
            self._db.remember_counter("credential_version", version)
        return CredentialWrite(missing, base, version)

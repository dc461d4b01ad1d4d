"""The ``scram_credentials`` table on PostgreSQL: ``CredentialStore``, the twin of ``store.sqlite.credentials``.

Every row written or deleted bumps the credential version (a trigger, in the same transaction); every write
first locks the version's counter row, so ``base_version`` is the version just before it, whatever other nodes do.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.credential_rows import credential_infos, credential_pairs
from kafkaguard.store.ports import CredentialInfo, CredentialSnapshot, CredentialWrite, UserAlteration
from kafkaguard.store.postgres.connection import Database, counter, lock_counter, read_counter

_UPSERT = (
    'INSERT INTO scram_credentials ("user", mechanism, salt, stored_key, server_key, iterations) '
    'VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT ("user", mechanism) DO UPDATE SET salt = excluded.salt, '
    "stored_key = excluded.stored_key, server_key = excluded.server_key, iterations = excluded.iterations"
)


class CredentialTables:
    """``CredentialStore`` on ``scram_credentials``: salt, StoredKey, ServerKey and iterations, never a password."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._db.read() as conn:
            row = conn.execute(
                'SELECT salt, stored_key, server_key, iterations FROM scram_credentials WHERE "user" = %s '
                "AND mechanism = %s",
                (user, mechanism.code),
            ).fetchone()
        if row is None:
            return None
        return ScramCredential(mechanism, bytes(row[0]), bytes(row[1]), bytes(row[2]), int(row[3]))

    def load_credentials(self) -> CredentialSnapshot:
        with self._db.read() as conn:
            version = counter(conn, "credential_version")
            rows = conn.execute(
                'SELECT "user", mechanism, salt, stored_key, server_key, iterations FROM scram_credentials'
            ).fetchall()
        return CredentialSnapshot(credential_pairs(rows), version)

    def credential_version(self) -> int:
        return read_counter(self._db, "credential_version")

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        with self._db.read() as conn:
            if users is None:
                rows = conn.execute(
                    'SELECT "user", mechanism, iterations FROM scram_credentials ORDER BY "user", mechanism'
                ).fetchall()
            else:
                rows = conn.execute(
                    'SELECT "user", mechanism, iterations FROM scram_credentials WHERE "user" = ANY(%s) '
                    'ORDER BY "user", mechanism',
                    (sorted(set(users)),),
                ).fetchall()
        return credential_infos(rows)

    def alter_credentials(self, alterations: Sequence[UserAlteration]) -> CredentialWrite:
        missing: dict[str, ScramMechanism] = {}
        with self._db.write() as conn:
            base = lock_counter(conn, "credential_version")
            for alteration in alterations:
                user = alteration.user
                stored = {
                    int(row[0])
                    for row in conn.execute(
                        'SELECT mechanism FROM scram_credentials WHERE "user" = %s', (user,)
                    ).fetchall()
                }
                absent = [m for m in alteration.deletions if m.code not in stored]
                if absent:
                    missing[user] = absent[0]
                    continue
                cur = conn.cursor()
                if alteration.deletions:
                    cur.executemany(
                        'DELETE FROM scram_credentials WHERE "user" = %s AND mechanism = %s',
                        [(user, m.code) for m in alteration.deletions],
                    )
                if alteration.upsertions:
                    cur.executemany(
                        _UPSERT,
                        [
                            (user, c.mechanism.code, c.salt, c.stored_key, c.server_key, c.iterations)
                            for c in alteration.upsertions
                        ],
                    )
            # The schema's trigger has counted every row written or deleted.
            version = counter(conn, "credential_version")
        return CredentialWrite(missing, base, version)

"""The ``scram_credentials`` table: ``CredentialStore`` on either SQL database.

A row is ``(user, mechanism code, salt, stored_key, server_key, iterations)``; a mechanism code this kafkaguard does
not know (written by a newer one) is skipped, never guessed. Every row written or deleted bumps the credential
version (the schema's triggers, in the same transaction); every write first locks the version's counter, so
``base_version`` is the version just before it, whatever other writers do. ``credential_version()`` is the
database's cheap poll, as cheap as ``acl_version()``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.ports import CredentialInfo, CredentialSnapshot, CredentialWrite, History, UserAlteration
from kafkaguard.store.sql.history import written
from kafkaguard.store.sql.transaction import Database

_MECHANISMS = {m.code: m for m in ScramMechanism}

_UPSERT = (
    'INSERT INTO scram_credentials ("user", mechanism, salt, stored_key, server_key, iterations) '
    'VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT ("user", mechanism) DO UPDATE SET salt = excluded.salt, '
    "stored_key = excluded.stored_key, server_key = excluded.server_key, iterations = excluded.iterations"
)


class CredentialTables:
    """``CredentialStore`` on the ``scram_credentials`` table: salt, StoredKey, ServerKey and iterations per user
    and mechanism, never a password."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._db.read() as tx:
            row = tx.one(
                'SELECT salt, stored_key, server_key, iterations FROM scram_credentials WHERE "user" = ? '
                "AND mechanism = ?",
                (user, mechanism.code),
            )
        if row is None:
            return None
        return ScramCredential(mechanism, bytes(row[0]), bytes(row[1]), bytes(row[2]), int(row[3]))

    def load_credentials(self) -> CredentialSnapshot:
        with self._db.read() as tx:
            version = tx.counter("credential_version")
            rows = tx.all('SELECT "user", mechanism, salt, stored_key, server_key, iterations FROM scram_credentials')
        return CredentialSnapshot(_credential_pairs(rows), version)

    def credential_version(self) -> int:
        return self._db.polled_counter("credential_version")

    def credential_infos(self, users: Collection[str] | None = None) -> dict[str, tuple[CredentialInfo, ...]]:
        select = 'SELECT "user", mechanism, iterations FROM scram_credentials'
        order = ' ORDER BY "user", mechanism'
        with self._db.read() as tx:
            if users is None:
                rows = tx.all(select + order)
            else:
                # Batches of sorted names, each ordered by user: together, in user order.
                rows = tx.all_of(select, '"user"', sorted(set(users)), then=order)
        return _credential_infos(rows)

    def alter_credentials(
        self, alterations: Sequence[UserAlteration], *, history: History[CredentialWrite] | None = None
    ) -> CredentialWrite:
        missing: dict[str, ScramMechanism] = {}
        with self._db.write() as tx:
            base = tx.lock_counter("credential_version")
            for alteration in alterations:
                user = alteration.user
                stored = {
                    int(row[0]) for row in tx.all('SELECT mechanism FROM scram_credentials WHERE "user" = ?', (user,))
                }
                absent = [m for m in alteration.deletions if m.code not in stored]
                if absent:
                    missing[user] = absent[0]
                    continue
                tx.run_many(
                    'DELETE FROM scram_credentials WHERE "user" = ? AND mechanism = ?',
                    [(user, m.code) for m in alteration.deletions],
                )
                tx.run_many(
                    _UPSERT,
                    [
                        (user, c.mechanism.code, c.salt, c.stored_key, c.server_key, c.iterations)
                        for c in alteration.upsertions
                    ],
                )
            # The schema's triggers have counted every row written or deleted.
            version = tx.counter("credential_version")
            self._db.remember_counter("credential_version", version)
            return written(tx, history, CredentialWrite(missing, base, version))


def _credential_pairs(rows: Iterable[tuple[Any, ...]]) -> tuple[tuple[str, ScramCredential], ...]:
    """(user, credential) for each full row of a mechanism this kafkaguard knows."""
    return tuple(
        (user, ScramCredential(_MECHANISMS[code], bytes(salt), bytes(stored_key), bytes(server_key), int(iterations)))
        for user, code, salt, stored_key, server_key, iterations in rows
        if code in _MECHANISMS
    )


def _credential_infos(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[CredentialInfo, ...]]:
    """Per user, its ``(user, mechanism code, iterations)`` rows as infos, in row order (known mechanisms only)."""
    found: dict[str, list[CredentialInfo]] = {}
    for user, code, iterations in rows:
        mechanism = _MECHANISMS.get(code)
        if mechanism is not None:
            found.setdefault(user, []).append(CredentialInfo(mechanism, int(iterations)))
    return {user: tuple(infos) for user, infos in found.items()}

"""SCRAM credentials as table rows, shared by the SQL stores (SQLite, PostgreSQL): the columns are the same in both.

A row is ``(user, mechanism code, salt, stored_key, server_key, iterations)``; a mechanism code this kafkaguard
does not know (written by a newer one) is skipped, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store.ports import CredentialInfo

_MECHANISMS = {m.code: m for m in ScramMechanism}


def credential_pairs(rows: Iterable[tuple[Any, ...]]) -> tuple[tuple[str, ScramCredential], ...]:
    """(user, credential) for each full row of a mechanism this kafkaguard knows."""
    return tuple(
        (user, ScramCredential(_MECHANISMS[code], bytes(salt), bytes(stored_key), bytes(server_key), int(iterations)))
        for user, code, salt, stored_key, server_key, iterations in rows
        if code in _MECHANISMS
    )


def credential_infos(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[CredentialInfo, ...]]:
    """Per user, its ``(user, mechanism code, iterations)`` rows as infos, in row order (known mechanisms only)."""
    found: dict[str, list[CredentialInfo]] = {}
    for user, code, iterations in rows:
        mechanism = _MECHANISMS.get(code)
        if mechanism is not None:
            found.setdefault(user, []).append(CredentialInfo(mechanism, int(iterations)))
    return {user: tuple(infos) for user, infos in found.items()}

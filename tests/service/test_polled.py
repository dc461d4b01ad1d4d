"""``service.polled.Polled``: the services that follow one version counter of the store poll it alike — after
another process's change one reload, then nothing until the version moves again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kafkaguard import StandardAuthorizer
from kafkaguard.scram import ScramMechanism
from kafkaguard.service.credentials import CredentialService
from kafkaguard.service.groups import GroupService
from kafkaguard.service.polled import Polled
from kafkaguard.service.quotas import QuotaService
from kafkaguard.store import SqliteStore
from tests.actors import ACTOR
from tests.service.test_quotas import alteration


def _credentials(store: SqliteStore) -> tuple[Polled, Callable[[], object]]:
    service = CredentialService(store)
    return service, lambda: service.upsert_password("alice", ScramMechanism.SCRAM_SHA_256, "pa55word", actor=ACTOR)


def _groups(store: SqliteStore) -> tuple[Polled, Callable[[], object]]:
    service = GroupService(store, StandardAuthorizer())
    return service, lambda: service.add_members("ops", ["User:alice"], actor=ACTOR)


def _quotas(store: SqliteStore) -> tuple[Polled, Callable[[], object]]:
    service = QuotaService(store)
    return service, lambda: service.alter([alteration([("user", "bob")], ("consumer_byte_rate", 7.0))], actor=ACTOR)


@pytest.mark.parametrize("kind", [_credentials, _groups, _quotas])
def test_a_poll_reloads_once_after_another_process_changed_the_kind(tmp_path: Path, kind) -> None:
    path = tmp_path / "kafkaguard.db"
    with SqliteStore(path) as mine, SqliteStore(path) as theirs:
        reader, _ = kind(mine)
        _, change = kind(theirs)
        assert reader.poll() is False  # nothing changed since it loaded
        before = reader.version
        change()
        assert reader.poll() is True
        assert reader.version > before
        assert reader.poll() is False

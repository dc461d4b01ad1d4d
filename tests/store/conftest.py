"""Every store contract test runs against both implementations: the SQLite store on a real file, and its twin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.store import MemoryAclStore, MemoryCredentialStore, MemoryQuotaStore, SqliteStore
from kafkaguard.store.ports import AclStore, CredentialStore, QuotaStore


@pytest.fixture(params=["sqlite", "memory"])
def acl_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AclStore]:
    store: AclStore = SqliteStore(tmp_path / "kafkaguard.db") if request.param == "sqlite" else MemoryAclStore()
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "memory"])
def credential_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CredentialStore]:
    store: CredentialStore = (
        SqliteStore(tmp_path / "kafkaguard.db") if request.param == "sqlite" else MemoryCredentialStore()
    )
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "memory"])
def quota_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QuotaStore]:
    store: QuotaStore = SqliteStore(tmp_path / "kafkaguard.db") if request.param == "sqlite" else MemoryQuotaStore()
    yield store
    store.close()

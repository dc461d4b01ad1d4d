"""Every store contract test runs against every implementation: the SQLite store on a real file, the PostgreSQL
store on a fresh database of a real server (``tests.postgres``), and the in-memory twin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.store import MemoryAclStore, MemoryCredentialStore, MemoryGroupStore, MemoryQuotaStore, SqliteStore
from kafkaguard.store.ports import AclStore, CredentialStore, GroupStore, QuotaStore, Store
from tests.postgres import PASSWORD, postgres_server, postgres_url

__all__ = ["postgres_server", "postgres_url"]

#: The implementations each contract test runs on.
STORES = ["sqlite", "postgresql", "memory"]


def open_durable(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A new, empty durable store of ``kind`` (``sqlite`` or ``postgresql``)."""
    if kind == "sqlite":
        return SqliteStore(tmp_path / "kafkaguard.db")
    from kafkaguard.store.postgres import PostgresStore

    url: str = request.getfixturevalue("postgres_url")
    return PostgresStore(url, password=PASSWORD)


@pytest.fixture(params=STORES)
def acl_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AclStore]:
    store: AclStore = MemoryAclStore() if request.param == "memory" else open_durable(request.param, request, tmp_path)
    yield store
    store.close()


@pytest.fixture(params=STORES)
def credential_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CredentialStore]:
    store: CredentialStore = (
        MemoryCredentialStore() if request.param == "memory" else open_durable(request.param, request, tmp_path)
    )
    yield store
    store.close()


@pytest.fixture(params=STORES)
def quota_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QuotaStore]:
    store: QuotaStore = (
        MemoryQuotaStore() if request.param == "memory" else open_durable(request.param, request, tmp_path)
    )
    yield store
    store.close()


@pytest.fixture(params=STORES)
def group_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GroupStore]:
    store: GroupStore = (
        MemoryGroupStore() if request.param == "memory" else open_durable(request.param, request, tmp_path)
    )
    yield store
    store.close()

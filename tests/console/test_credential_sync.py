"""The console alone (``kafkaguard console``, ``sync_store=True``) follows another process's SCRAM credential changes
within the sync interval: its logins read the credentials' in-memory snapshot, which only a poll refreshes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import load_settings
from kafkaguard.console import ConsoleServer, HttpListener, create_app
from kafkaguard.scram import ScramMechanism
from kafkaguard.service import CredentialService
from kafkaguard.store import SqliteStore
from tests.actors import ACTOR

pytestmark = pytest.mark.integration

TIMEOUT = 15.0
SYNC_INTERVAL = 0.2


@pytest.fixture
def alone(tmp_path: Path) -> Iterator[tuple[Services, str]]:
    settings = load_settings(
        None,
        data_dir=tmp_path,
        http_listener="127.0.0.1:0",
        super_users="User:admin",
        auth_failure_delay_ms=1,
        console_login_failure_seconds=0.01,
        sync_interval_seconds=SYNC_INTERVAL,
    )
    services = build_services(settings)
    for mechanism in ScramMechanism:
        assert services.credentials.upsert_password("admin", mechanism, "old-password", actor=ACTOR).succeeded
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    console = ConsoleServer(create_app(services, sync_store=True), HttpListener.parse("127.0.0.1:0"))
    asyncio.run_coroutine_threadsafe(console.start(), loop).result(TIMEOUT)
    try:
        yield services, console.url
    finally:
        asyncio.run_coroutine_threadsafe(console.stop(), loop).result(TIMEOUT)
        asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result(TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT)
        loop.close()
        services.close()


def status(url: str, password: str) -> int:
    with httpx.Client(base_url=url, auth=httpx.BasicAuth("admin", password), timeout=TIMEOUT) as client:
        return client.get("/api/users").status_code


def test_a_password_changed_by_another_process_takes_effect_within_the_sync_interval(
    alone: tuple[Services, str],
) -> None:
    services, url = alone
    assert status(url, "old-password") == 200  # now also in the console's login cache
    with SqliteStore(services.settings.database_path) as other_process_store:
        other = CredentialService(other_process_store)
        for mechanism in ScramMechanism:
            assert other.upsert_password("admin", mechanism, "new-password", actor=ACTOR).succeeded
    changed = time.monotonic()
    while status(url, "new-password") != 200 or status(url, "old-password") != 401:
        assert time.monotonic() - changed < SYNC_INTERVAL + 2.0, "the console still uses the old credentials"
        time.sleep(0.05)

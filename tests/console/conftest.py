"""A real console over HTTP: uvicorn on a free loopback port, a real SQLite store, in a background event loop.

``start_console`` builds the services on a data directory and runs the console (and, with ``with_kafka``, the
Kafka server too, exactly as ``kafkaguard serve --http-listener`` composes them: ``ServerWithConsole``) on one
event loop in a background thread. Users, all SCRAM (4096 iterations):

* ``admin`` — a super user, both mechanisms;
* ``reader`` — ALLOW DESCRIBE on the cluster (may read ACLs and users), SCRAM-SHA-256 only;
* ``nobody`` — no ACL at all (authenticates, is never authorized).

Errors logged under ``kafkaguard`` or ``uvicorn`` are collected; the fixtures fail a module that logged any.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from kafkaguard.bootstrap import Services, build_services
from kafkaguard.cli.console import ServerWithConsole
from kafkaguard.config import load_settings
from kafkaguard.console import ConsoleServer, HttpListener, create_app
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.node.listening import ListeningServer
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
READER, READER_PASSWORD = "reader", "reader-secret"
NOBODY, NOBODY_PASSWORD = "nobody", "nobody-secret"
TIMEOUT = 15.0


class _ErrorCollector(logging.Handler):
    def __init__(self, errors: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.errors = errors

    def emit(self, record: logging.LogRecord) -> None:
        self.errors.append(self.format(record))


@dataclass
class ConsoleHandle:
    services: Services
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    url: str
    console: ConsoleServer
    both: ServerWithConsole | None = None
    errors: list[str] = field(default_factory=list)
    _collector: logging.Handler | None = None

    def client(self, user: str | None = ADMIN, password: str | None = None, **kwargs: Any) -> httpx.Client:
        auth = None
        if user is not None:
            auth = httpx.BasicAuth(user, password if password is not None else PASSWORDS[user])
        return httpx.Client(base_url=self.url, auth=auth, timeout=TIMEOUT, **kwargs)

    @property
    def kafka_bootstrap(self) -> str:
        assert self.both is not None
        listener = self.both.server.bound_listeners[0]
        return f"{listener.host}:{listener.port}"

    def add_user(
        self, name: str, password: str, mechanisms: tuple[ScramMechanism, ...] = tuple(ScramMechanism)
    ) -> None:
        for mechanism in mechanisms:
            result = self.services.credentials.upsert_password(name, mechanism, password, 4096, actor=ACTOR)
            assert result.succeeded, result

    def stop(self) -> None:
        async def shutdown() -> None:
            if self.both is not None:
                await self.both.stop()
            else:
                await self.console.stop()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(TIMEOUT)
            asyncio.run_coroutine_threadsafe(self.loop.shutdown_default_executor(), self.loop).result(TIMEOUT)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(TIMEOUT)
            if not self.thread.is_alive():
                self.loop.close()
            self.services.close()
            for name in ("kafkaguard", "uvicorn"):
                if self._collector is not None:
                    logging.getLogger(name).removeHandler(self._collector)


PASSWORDS = {ADMIN: ADMIN_PASSWORD, READER: READER_PASSWORD, NOBODY: NOBODY_PASSWORD}


def cluster_acl(principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
        AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
    )


def start_console(
    data_dir: Path,
    *,
    with_kafka: bool = False,
    server_type: Callable[[Services], ListeningServer] | None = None,
    **overrides: Any,
) -> ConsoleHandle:
    """``server_type``: with ``with_kafka``, the Kafka server to run (``KafkaServer`` by default; ``kafkaguard serve``
    gives it the shadow ACL loader)."""
    options: dict[str, Any] = {
        "data_dir": data_dir,
        "listeners": ["SASL_PLAINTEXT://127.0.0.1:0"],
        "http_listener": "127.0.0.1:0",
        "super_users": f"User:{ADMIN}",
        "auth_failure_delay_ms": 1,
        "console_login_failure_seconds": 0.01,  # refused logins answered fast; test_failure_timing sets its own
        # Wrong passwords from 127.0.0.1 all along; test_login_throttle sets the budget it tests.
        "login_failures_per_address_burst": 1_000_000,
        "login_failures_per_user_burst": 1_000_000,
        "sync_interval_seconds": 0.2,
    }
    options.update(overrides)
    services = build_services(load_settings(None, **options))
    errors: list[str] = []
    collector = _ErrorCollector(errors)
    for name in ("kafkaguard", "uvicorn"):
        logging.getLogger(name).addHandler(collector)
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda _loop, context: errors.append(str(context.get("message"))))
    thread = threading.Thread(target=loop.run_forever, name="kafkaguard-test-console", daemon=True)
    thread.start()

    async def make() -> tuple[ConsoleServer, ServerWithConsole | None]:
        if with_kafka:
            both = ServerWithConsole(services, server_type)
            await both.start()
            return both.console, both
        console = ConsoleServer(create_app(services), HttpListener.parse(services.settings.http_listener or ""))
        await console.start()
        return console, None

    try:
        console, both = asyncio.run_coroutine_threadsafe(make(), loop).result(TIMEOUT)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT)
        loop.close()
        services.close()
        raise
    handle = ConsoleHandle(services, loop, thread, console.url, console, both, errors, collector)
    handle.add_user(ADMIN, ADMIN_PASSWORD)
    handle.add_user(READER, READER_PASSWORD, (ScramMechanism.SCRAM_SHA_256,))
    handle.add_user(NOBODY, NOBODY_PASSWORD)
    services.acls.create_acls([cluster_acl(f"User:{READER}", AclOperation.DESCRIBE)], actor=ACTOR)
    return handle


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    """One console per test module (tests use unique resource names, so they do not see each other's ACLs)."""
    handle = start_console(tmp_path_factory.mktemp("console"))
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the console logged errors: {handle.errors}"


@pytest.fixture
def admin(console: ConsoleHandle) -> Iterator[httpx.Client]:
    with console.client(ADMIN) as client:
        yield client

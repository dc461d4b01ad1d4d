"""A real kafkaguard server for the end-to-end and fuzz tests.

``start_server`` builds the services on a data directory (real SQLite), runs ``KafkaServer`` on its own event loop
in a background thread with three loopback listeners on free ports (SASL_PLAINTEXT, PLAINTEXT, SASL_SSL with a
self-signed certificate made once per session with the ``openssl`` command) and the audit log on (every decision).
``User:admin`` is a super user with a credential for both SCRAM mechanisms. The ``server`` fixture keeps one such
server per test module; tests that need other settings start their own.

Errors the server logs (a handler bug surfaces as ``log.exception`` in the accept loop) and exceptions that reach
the event loop's exception handler are collected in ``ServerHandle.errors``; the fixtures fail a test module
whose server logged any.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kafkaguard.audit.records.cloudevents import unwrap
from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import SecurityProtocol, load_settings
from kafkaguard.node.listening import ListeningServer
from kafkaguard.scram import ScramMechanism
from kafkaguard.server.app import KafkaServer
from tests.actors import ACTOR

T = TypeVar("T")

ADMIN = "admin"
ADMIN_PASSWORD = "admin-secret"  # noqa: S105 - a test password
#: Failed logins are answered after this delay in the shared servers (Kafka's 100 ms is proven by its own test).
FAST_FAILURE_DELAY_MS = 5
START_TIMEOUT = 15.0


@dataclass(frozen=True)
class TlsFiles:
    certfile: Path
    keyfile: Path


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A self-signed certificate for localhost and 127.0.0.1 (it is its own CA: clients trust this file)."""
    openssl = shutil.which("openssl") or "/usr/bin/openssl"
    directory = tmp_path_factory.mktemp("tls")
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-keyout",
            str(keyfile),
            "-out",
            str(certfile),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return TlsFiles(certfile, keyfile)


class _ErrorCollector(logging.Handler):
    def __init__(self, errors: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.errors = errors

    def emit(self, record: logging.LogRecord) -> None:
        self.errors.append(self.format(record))


@dataclass
class ServerHandle:
    """A running server: its addresses, its data and audit files, and a way to run coroutines on its loop."""

    services: Services
    server: ListeningServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    data_dir: Path
    audit_path: Path
    tls: TlsFiles
    ports: dict[SecurityProtocol, int]
    errors: list[str] = field(default_factory=list)
    _collector: logging.Handler | None = None

    HOST = "127.0.0.1"

    def address(self, protocol: SecurityProtocol) -> tuple[str, int]:
        return self.HOST, self.ports[protocol]

    def bootstrap(self, protocol: SecurityProtocol) -> str:
        return f"{self.HOST}:{self.ports[protocol]}"

    @property
    def sasl(self) -> tuple[str, int]:
        return self.address(SecurityProtocol.SASL_PLAINTEXT)

    @property
    def plaintext(self) -> tuple[str, int]:
        return self.address(SecurityProtocol.PLAINTEXT)

    @property
    def sasl_ssl(self) -> tuple[str, int]:
        return self.address(SecurityProtocol.SASL_SSL)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = START_TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def audit_records(self) -> list[dict[str, Any]]:
        """The authorization record of every audit line written so far (the buffer is flushed first)."""
        return [data for category, data in self.audit_events() if category == "authorization"]

    def audit_events(self) -> list[tuple[str, dict[str, Any]]]:
        """(category, data) of every envelope in the audit file so far (the buffer is flushed first)."""
        return [found for found in map(unwrap, self.audit_envelopes()) if found is not None]

    def audit_envelopes(self, *, end_windows: bool = False) -> list[dict[str, Any]]:
        """Every line of the audit file so far, decoded (the buffer is flushed first; with ``end_windows`` the
        failed logins of open windows too)."""
        audit = self.server.audit
        assert audit is not None
        self.run(audit.flush(end_windows=end_windows))
        if not self.audit_path.exists():
            return []
        return [json.loads(line) for line in self.audit_path.read_text("utf-8").splitlines() if line.strip()]

    def add_user(self, name: str, password: str, iterations: int = 4096) -> None:
        """A SCRAM user for both mechanisms, written straight into the store."""
        for mechanism in ScramMechanism:
            result = self.services.credentials.upsert_password(name, mechanism, password, iterations, actor=ACTOR)
            assert result.succeeded, result

    def stop(self) -> None:
        try:
            if self.loop.is_running():
                self.run(self.server.stop())
                self.run(self.loop.shutdown_default_executor())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(START_TIMEOUT)
            if not self.thread.is_alive():
                self.loop.close()
            self.services.close()
            if self._collector is not None:
                logging.getLogger("kafkaguard").removeHandler(self._collector)


def served_settings(data_dir: Path, tls: TlsFiles) -> dict[str, Any]:
    """The settings ``start_server`` runs with unless overridden: what every suite's server shares (and what
    ``tests.kafka.proxy.processes`` gives a proxy process, so both behave alike)."""
    return {
        "data_dir": data_dir,
        "listeners": [
            "SASL_PLAINTEXT://127.0.0.1:0",
            "PLAINTEXT://127.0.0.1:0",
            "SASL_SSL://127.0.0.1:0",
        ],
        "super_users": f"User:{ADMIN}",
        "auto_create_topics": True,
        "audit_log": data_dir / "audit" / "audit.log",
        "audit_mode": "all",
        "ssl_certfile": tls.certfile,
        "ssl_keyfile": tls.keyfile,
        "auth_failure_delay_ms": FAST_FAILURE_DELAY_MS,
        "sync_interval_seconds": 0.2,
        # The fuzz and hostile suites open a new connection per example, hundreds a second from 127.0.0.1; the
        # production default (100 a second) is proven by tests/server/test_connection_limits.py, which sets its own.
        "max_connection_creation_rate_per_ip": 100_000.0,
        # Likewise, those suites break the protocol on purpose from 127.0.0.1 example after example; the penalty is
        # proven by tests/server/test_violation_penalty.py, test_bounded_work.py and test_protocol_violations.py.
        "protocol_violation_penalty_seconds": 0.0,
        # And they fail logins on purpose from 127.0.0.1 (confluent-kafka retrying each); the failure budget's
        # defaults are proven against real processes by tests/server/test_login_budgets.py.
        "login_failures_per_address_burst": 1_000_000,
        "login_failures_per_user_burst": 1_000_000,
    }


def start_server(
    data_dir: Path,
    tls: TlsFiles,
    *,
    create_admin: bool = True,
    server_type: Callable[[Services], ListeningServer] = KafkaServer,
    **overrides: Any,
) -> ServerHandle:
    """Start a server on free loopback ports; ``overrides`` are settings (``auth_failure_delay_ms=100``...).
    ``server_type`` ``ProxyServer`` starts the proxy instead (its listeners need fixed ports)."""
    options = served_settings(data_dir, tls)
    options.update(overrides)
    audit_path = data_dir / "audit" / "audit.log"  # served_settings' audit log
    services = build_services(load_settings(None, **options))
    loop = asyncio.new_event_loop()
    errors: list[str] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(str(context.get("message"))))
    thread = threading.Thread(target=loop.run_forever, name="kafkaguard-test-server", daemon=True)
    thread.start()

    async def make() -> ListeningServer:
        server = server_type(services)
        await server.start()
        return server

    try:
        server = asyncio.run_coroutine_threadsafe(make(), loop).result(START_TIMEOUT)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT)
        loop.close()
        services.close()
        raise
    ports: dict[SecurityProtocol, int] = {}
    for listener in server.bound_listeners:  # the first of each protocol: the proxy binds node ports after them
        ports.setdefault(listener.protocol, listener.port)
    handle = ServerHandle(services, server, loop, thread, data_dir, audit_path, tls, ports, errors)
    collector = _ErrorCollector(errors)
    logging.getLogger("kafkaguard").addHandler(collector)
    handle._collector = collector
    if create_admin:
        handle.add_user(ADMIN, ADMIN_PASSWORD)
    return handle


@contextmanager
def sasl_server(directory: Path, **overrides: Any) -> Iterator[ServerHandle]:
    """A running server with one SASL_PLAINTEXT listener and no audit log (User:admin a super user with both
    mechanisms); stopped afterwards, and it must not have logged an error."""
    handle = start_server(
        directory,
        TlsFiles(directory / "unused.pem", directory / "unused.key"),
        **{"listeners": ["SASL_PLAINTEXT://127.0.0.1:0"], "ssl_certfile": None, "ssl_keyfile": None,
           "audit_log": None, **overrides},
    )  # fmt: skip
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[ServerHandle]:
    """One server per test module (fast failure delay, auto-creation on, audit log of every decision)."""
    handle = start_server(tmp_path_factory.mktemp("kafkaguard"), tls_files)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the server logged errors: {handle.errors}"

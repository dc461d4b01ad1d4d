"""``kafkaguard proxy`` in front of the real Kafka broker of ``tests/kafka/conftest.py``.

The proxy runs in-process on its own event loop (``tests.serving.start_server`` with ``ProxyServer``), logs
in to the broker as its super user ``admin`` (so the broker's own ACLs never restrict it), and enforces kafkaguard's
ACLs on its clients. Its listener needs a fixed port with the node ports above it free (``free_port_range``).
The equivalence suites also run it as ``kafkaguard proxy --workers 2`` (``session_mode_proxy``, ``processes``).
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from kafkaguard.bootstrap import Services
from kafkaguard.config import SecurityProtocol
from kafkaguard.node.listening import ListeningServer
from kafkaguard.protocol.outbox import Outbox
from kafkaguard.protocol.passthrough import RelayedAnswer
from kafkaguard.proxy.app import ProxyServer
from kafkaguard.proxy.upstream import UpstreamConnection
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker, KafkaCluster
from tests.kafka.proxy.processes import WorkersProxy
from tests.ports import free_port_block
from tests.serving import ServerHandle, TlsFiles, served_settings, start_server


def free_port_range(count: int = 8) -> int:
    """A port P with P … P+count-1 free on 127.0.0.1 right now (the proxy serves node N at P+1+N)."""
    return free_port_block(count)


def proxy_settings(kafka: KafkaBroker | KafkaCluster, port: int) -> dict[str, Any]:
    """The proxy's settings above ``tests.serving``'s: one SASL_PLAINTEXT listener on ``port``, no TLS, and the
    broker's super user as its service account."""
    return {
        "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"],
        "ssl_certfile": None,
        "ssl_keyfile": None,
        "upstream": kafka.bootstrap,
        "upstream_security_protocol": "SASL_PLAINTEXT",
        "upstream_user": ADMIN,
        "upstream_password": ADMIN_PASSWORD,
    }


def unused_tls(directory: Path) -> TlsFiles:
    return TlsFiles(directory / "unused.pem", directory / "unused.key")


def start_proxy(
    directory: Path,
    kafka: KafkaBroker | KafkaCluster,
    server_type: Callable[[Services], ListeningServer] = ProxyServer,
    **overrides: Any,
) -> ServerHandle:
    options = {**proxy_settings(kafka, free_port_range()), **overrides}
    return start_server(directory, unused_tls(directory), server_type=server_type, **options)


def start_workers_proxy(directory: Path, kafka: KafkaBroker, workers: int) -> WorkersProxy:
    """``start_proxy``'s proxy, but as ``kafkaguard proxy --workers N`` (its data in ``directory / "data"``)."""
    data_dir = directory / "data"
    settings = {**served_settings(data_dir, unused_tls(directory)), **proxy_settings(kafka, port := free_port_range())}
    return WorkersProxy.start(directory, settings, port=port, workers=workers)


@contextlib.contextmanager
def running_proxy(directory: Path, kafka: KafkaBroker | KafkaCluster, **overrides: Any) -> Iterator[ServerHandle]:
    """``start_proxy``, stopped afterwards; the errors the proxy logged meanwhile fail the test (a module fixture's
    body: ``with running_proxy(...) as handle: yield handle``)."""
    handle = start_proxy(directory, kafka, **overrides)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


@contextlib.contextmanager
def running_broker(kafka_dist: Path, workdir: Path, **options: Any) -> Iterator[KafkaBroker]:
    """A ``KafkaBroker`` of a test module's own (``options``: its extra properties, PLAIN users …), stopped
    afterwards."""
    broker = KafkaBroker(kafka_dist, workdir, **options)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def renewals(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The mechanism of every re-authentication relayed upstream while the test runs (a first token on a connection
    already logged in: KIP-368's renewal, passed through to the broker)."""
    seen: list[str] = []
    real = UpstreamConnection.relay_login

    async def spy(self: UpstreamConnection, mechanism: str, token: bytes, *, first: bool) -> RelayedAnswer:
        if first and self.connected:
            seen.append(mechanism)
        return await real(self, mechanism, token, first=first)

    monkeypatch.setattr(UpstreamConnection, "relay_login", spy)
    return seen


def start_cluster_proxy(directory: Path, cluster: KafkaCluster) -> ServerHandle:
    """A proxy in front of the open two-broker cluster (``kafka_cluster``: PLAINTEXT, no login upstream)."""
    return start_proxy(directory, cluster, upstream=cluster.bootstrap, upstream_security_protocol="PLAINTEXT",
                       upstream_user=None, upstream_password=None)  # fmt: skip


@pytest.fixture(scope="module")
def proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """A proxy in front of ``kafka``: SASL_PLAINTEXT, kafkaguard's ``User:admin`` a super user, every decision
    audited. The test module's errors logged by the proxy fail it."""
    handle = start_proxy(tmp_path_factory.mktemp("proxy"), kafka)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


#: How the proxy reaches the broker for its clients (``upstream_authentication``): as its one service account, or
#: each client as itself, its login passed through to the broker; and the first as a node of two processes
#: (``--workers 2``, its own subprocess), each client connection served by either.
PROXY_MODES = ("service-account", "passthrough", "workers-2")
#: The modes whose proxy runs in this process: the only ones a test can reach into (a spy on ``UpstreamConnection``,
#: ``handle.server``); such a test's module restricts ``session_mode_proxy`` to them (``in_process_modes_only``).
IN_PROCESS_MODES = ("service-account", "passthrough")


class ProxyHandle(Protocol):
    """What the equivalence suites use of a running proxy: ``ServerHandle`` (in process) or ``WorkersProxy``."""

    @property
    def ports(self) -> dict[SecurityProtocol, int]: ...

    @property
    def errors(self) -> list[str]:
        """Every error logged so far, in order (a test compares the length before and after)."""
        ...

    def bootstrap(self, protocol: SecurityProtocol) -> str: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ModeProxy:
    """A proxy in front of ``kafka`` in one of ``PROXY_MODES``."""

    mode: str
    handle: ProxyHandle
    #: Seconds a write through one of the proxy's processes may take to reach the others (``WorkersProxy.lag``); 0
    #: for one process, whose every write is its own.
    lag: float = 0.0

    @property
    def passthrough(self) -> bool:
        return self.mode == "passthrough"


#: A module mark: its tests run on the in-process proxies only (``IN_PROCESS_MODES``).
in_process_modes_only = pytest.mark.parametrize("session_mode_proxy", IN_PROCESS_MODES, indirect=True)


@pytest.fixture(scope="session", params=PROXY_MODES)
def session_mode_proxy(
    request: pytest.FixtureRequest, kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ModeProxy]:
    """The ``proxy`` fixture's proxy, once per mode of ``PROXY_MODES`` and session (the equivalence suites run in
    each). In passthrough the clients' SCRAM logins go to ``kafka`` (kafkaguard's admin is the broker's, same
    name and password), and every request of theirs reaches it as the client itself. ``workers-2`` is the
    service-account proxy as ``kafkaguard proxy --workers 2``, with the same settings."""
    mode: str = request.param
    directory = tmp_path_factory.mktemp(f"proxy-{mode}")
    if mode == "workers-2":
        workers = start_workers_proxy(directory, kafka, 2)
        try:
            yield ModeProxy(mode, workers, lag=workers.lag)
        finally:
            workers.stop()
        return
    overrides: dict[str, Any] = {"upstream_authentication": "passthrough"} if mode == "passthrough" else {}
    handle = start_proxy(directory, kafka, **overrides)
    try:
        yield ModeProxy(mode, handle)
    finally:
        handle.stop()


@pytest.fixture
def mode_proxy(session_mode_proxy: ModeProxy) -> Iterator[ModeProxy]:
    """``session_mode_proxy`` for one test, which fails if the proxy logged an error meanwhile. Checked per test, not
    at the session's end: a handle's error collector hears the whole process (``tests.serving``), so a session-long
    one also collected the errors later modules provoke on purpose (a broken shadow ACL file, a listener bug)."""
    before = len(session_mode_proxy.handle.errors)
    yield session_mode_proxy
    errors = session_mode_proxy.handle.errors[before:]
    assert errors == [], f"the {session_mode_proxy.mode} proxy logged errors: {errors}"


# ---------------------------------------------------------------------- what an in-process proxy sends, both ways


@pytest.fixture
def upstream_requests(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every payload any proxy connection sends upstream while the test runs."""
    sent: list[bytes] = []
    real = UpstreamConnection.send  # every request the proxy sends upstream goes through it

    async def spy(self: UpstreamConnection, payload: bytes) -> None:
        sent.append(payload)
        await real(self, payload)

    monkeypatch.setattr(UpstreamConnection, "send", spy)
    return sent


def api_versions_of(payloads: Iterable[bytes]) -> list[tuple[int, int]]:
    """(API key, version) of each request payload."""
    return [struct.unpack_from(">hh", payload) for payload in payloads]


class _Recording:
    """Stands for a client socket's writer (``Outbox``'s, the one writer of every client socket): keeps what is
    written."""

    def __init__(self, writer: Any, sink: bytearray) -> None:
        self._writer, self._sink = writer, sink

    def write(self, data: bytes) -> None:
        self._sink += data
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()


@pytest.fixture
def to_clients(monkeypatch: pytest.MonkeyPatch) -> bytearray:
    """Every byte the proxy writes to any client connection opened while the test runs."""
    sink = bytearray()
    real = Outbox.__init__

    def recording(self: Outbox, writer: Any, **kwargs: Any) -> None:
        real(self, _Recording(writer, sink), **kwargs)

    monkeypatch.setattr(Outbox, "__init__", recording)
    return sink

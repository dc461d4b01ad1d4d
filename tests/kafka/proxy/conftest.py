"""``kafkaguard proxy`` in front of the real Kafka broker of ``tests/kafka/conftest.py``.

The proxy runs in-process on its own event loop (``tests.server.conftest.start_server`` with ``ProxyServer``), logs
in to the broker as its super user ``admin`` (so the broker's own ACLs never restrict it), and enforces kafkaguard's
ACLs on its clients. Its listener needs a fixed port with the node ports above it free (``free_port_range``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkaguard.bootstrap import Services
from kafkaguard.protocol.listening import ListeningServer
from kafkaguard.proxy.app import ProxyServer
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.server.conftest import ServerHandle, TlsFiles, start_server


def free_port_range(count: int = 8) -> int:
    """A port P with P … P+count-1 free on 127.0.0.1 right now (the proxy serves node N at P+1+N)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base: int = probe.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as check:
                    check.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free range of ports on 127.0.0.1")


def start_proxy(
    directory: Path,
    kafka: KafkaBroker,
    server_type: Callable[[Services], ListeningServer] = ProxyServer,
    **overrides: Any,
) -> ServerHandle:
    port = free_port_range()
    options: dict[str, Any] = {
        "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"],
        "ssl_certfile": None,
        "ssl_keyfile": None,
        "upstream": kafka.bootstrap,
        "upstream_security_protocol": "SASL_PLAINTEXT",
        "upstream_user": ADMIN,
        "upstream_password": ADMIN_PASSWORD,
        **overrides,
    }
    return start_server(
        directory, TlsFiles(directory / "unused.pem", directory / "unused.key"), server_type=server_type, **options
    )


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

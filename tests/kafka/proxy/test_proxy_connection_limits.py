"""Issue 24, finding 3 and the pre-login part of finding 4, on ``kafkaguard proxy`` in front of the real broker: the
limits are the server's (the proxy's listeners are ``KafkaServer``'s), counted across the client listener and its
per-broker ports together.

Before: the only cap was global (here 40), so one address holding 40 idle connections on the bootstrap and broker
ports refused every other login on every port until the idle timeout; a 512 KiB ApiVersions frame before login was
read whole. Each test below failed then.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from kafkaguard.audit.records.refusals import RefusalReason
from kafkaguard.config import Listener
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import start_proxy
from tests.kafka.proxy.test_proxy_clients import sasl
from tests.server.test_connection_limits import api_versions, open_idle, still_open, wait_for
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire, metadata

LOGIN_TIMEOUT = 1.5


@pytest.fixture(scope="module")
def limited(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    handle = start_proxy(
        tmp_path_factory.mktemp("proxy-limits"),
        kafka,
        audit_log=None,
        max_connections=40,
        max_connections_per_ip=10,
        sasl_login_timeout_seconds=LOGIN_TIMEOUT,
        max_connection_creation_rate_per_ip=100.0,  # the production default (the test servers raise it)
    )
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


def ports(proxy: ServerHandle) -> tuple[tuple[str, int], tuple[str, int], Listener]:
    """The bootstrap address, the broker's port, and the client listener as configured."""
    bootstrap, broker = proxy.server.bound_listeners[:2]
    return ("127.0.0.1", bootstrap.port), ("127.0.0.1", broker.port), bootstrap


def test_one_address_over_its_cap_locks_nobody_out_of_any_port(limited: ServerHandle):
    bootstrap, broker, listener = ports(limited)
    attacker = open_idle(bootstrap, 25, source="127.0.0.3") + open_idle(broker, 25, source="127.0.0.3")
    time.sleep(1.0)  # as in the finding, the proxy has taken them all before anyone else comes
    try:
        for address in (bootstrap, broker):  # another address logs in on every port, and is served from upstream
            with Wire(address, source="127.0.0.4") as client:
                client.login(ADMIN, ADMIN_PASSWORD)
                assert metadata(client, None).brokers
        # Ten for the address, the bootstrap and the broker port together; the rest refused at once.
        assert wait_for(lambda: sum(still_open(s) for s in attacker) == 10, within=5)
        assert limited.server.admission.open_from("127.0.0.3") <= 10
        refusals = limited.services.refusals
        assert refusals.total(RefusalReason.MAX_CONNECTIONS_PER_IP, listener=str(listener)) == 40
        # None of the ten logs in: all are closed at the login deadline; a logged-in client stays.
        with Wire(broker, source="127.0.0.4") as client:
            client.login(ADMIN, ADMIN_PASSWORD)
            started = time.monotonic()
            assert wait_for(lambda: not any(still_open(s) for s in attacker), within=LOGIN_TIMEOUT + 4)
            assert time.monotonic() - started < LOGIN_TIMEOUT + 4
            assert client.request(api_versions()).error_code == 0
        assert refusals.total(RefusalReason.SASL_LOGIN_TIMEOUT, listener=str(listener)) >= 10
    finally:
        for sock in attacker:
            sock.close()


def test_a_512_kib_pre_login_frame_is_refused_on_the_broker_port_and_logged_once(
    limited: ServerHandle, caplog: pytest.LogCaptureFixture
):
    _bootstrap, broker, listener = ports(limited)
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.records.refusals"):
        for _ in range(8):
            with socket.create_connection(broker, timeout=5, source_address=("127.0.0.5", 0)) as sock:
                sock.sendall(struct.pack(">ihhi", 512 * 1024, 18, 3, 1))  # 10 of 512 KiB: the rest never comes
                sock.settimeout(2)
                assert sock.recv(1) == b""  # closed without waiting for it
    assert limited.services.refusals.total(RefusalReason.PRE_LOGIN_FRAME_SIZE) == 8  # no other test sends such frames
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkaguard.audit.records.refusals"]
    assert len([line for line in lines if "/127.0.0.5 " in line]) == 1, lines
    assert f"on {listener} [pre_login_frame_size]" in lines[0]


def test_real_clients_log_in_within_the_pre_login_limits(limited: ServerHandle, kafka: KafkaBroker):
    bootstrap, _broker, _listener = ports(limited)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        admin = AdminClient(
            sasl(f"{bootstrap[0]}:{bootstrap[1]}", ADMIN, ADMIN_PASSWORD, **{"sasl.mechanism": mechanism})
        )
        assert admin.list_topics(timeout=30).brokers

"""KIP-368 with Kafka's own Java client (kafka-clients 3.9 from the broker's jars): against ``kafkaguard serve`` and
``kafkaguard proxy`` in front of the real broker, with ``connections_max_reauth_ms`` 2000, Java's AdminClient asks
DescribeCluster every 250 ms for 3.5 session lifetimes: every call is answered, its connections re-authenticate
(SaslHandshake + SaslAuthenticate on the same connection) and none expires or reconnects.

Before this change the Java client was never told a lifetime (``session_lifetime_ms`` 0) and never re-authenticated,
so the re-authentications these tests count did not happen: they failed on that code.
"""

from __future__ import annotations

import logging
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.config import SecurityProtocol
from tests.kafka.broker import KafkaBroker, java
from tests.kafka.proxy.conftest import start_proxy
from tests.serving import ServerHandle, sasl_server

pytestmark = pytest.mark.integration

LIFETIME_MS = 2000
PASSWORD = "java-reauth-secret"  # noqa: S105 - a test password
PROBE = Path(__file__).with_name("ReauthProbe.java")


@pytest.fixture(scope="module", params=["serve", "proxy"])
def kafkaguard(
    request: pytest.FixtureRequest, kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerHandle]:
    directory = tmp_path_factory.mktemp("java-reauth")
    if request.param == "serve":
        with sasl_server(directory, connections_max_reauth_ms=LIFETIME_MS) as handle:
            yield handle
        return
    handle = start_proxy(directory, kafka, connections_max_reauth_ms=LIFETIME_MS)
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


def test_java_clients_reauthenticate_and_keep_working(
    kafkaguard: ServerHandle, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkaguard.protocol")
    user = f"java-{uuid.uuid4().hex[:8]}"
    kafkaguard.add_user(user, PASSWORD)
    bootstrap = kafkaguard.bootstrap(SecurityProtocol.SASL_PLAINTEXT)
    duration_ms = int(3.5 * LIFETIME_MS)
    log4j = f"-Dlog4j2.configurationFile={kafka.workdir / 'tools-log4j2.properties'}"
    done = subprocess.run(
        [java(), log4j, "-cp", kafka.classpath, str(PROBE), bootstrap, user, PASSWORD, str(duration_ms), "250"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    calls = int(done.stdout.split()[-1])
    assert calls >= 10
    messages = [r.getMessage() for r in caplog.records]
    reauthenticated = [m for m in messages if m.startswith("Successfully re-authenticated") and f"'{user}'" in m]
    logins = [m for m in messages if m.startswith("Successfully authenticated") and f"'{user}'" in m]
    expired = [m for m in messages if f"(User:{user}) closed: session expired" in m]
    assert len(reauthenticated) >= 2, messages
    assert expired == []
    assert len(logins) <= 2  # its bootstrap connection and its broker connection: it never had to reconnect

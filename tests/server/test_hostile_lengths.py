"""Hostile lengths against a real ``kafkaguard serve`` process, on every listener type, before and after login.

For every API key and version the server advertises, frames whose first length field is hostile (2^31-1, 2^32-2,
1.5e9, -2, a count with no bytes after it, truncated bodies; see ``tests.server.hostile``) are sent on fresh
connections. Each must be answered or closed within a few seconds; the process must stay alive, a logged-in
watchdog connection must keep being answered after every frame, and the process's RSS must stay bounded.
Before the fix, the first Metadata v12 frame killed the process (kio's native reader aborts on an allocation
sized by the wire).

A hypothesis property sends random bytes after a valid header of every supported API and version, logged in and
not, with the same liveness checks.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from kafkaguard.config import SecurityProtocol
from kafkaguard.server.versions import SERVER_VERSIONS
from tests.server.hostile import hostile_bodies
from tests.server.test_cli_serve import free_port, wait_until_listening
from tests.serving import TlsFiles
from tests.wire import Wire, frame

pytestmark = pytest.mark.integration

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")
PASSWORD = "hostile-admin-secret"  # noqa: S105 - a test user's password
#: RSS the server may gain over the whole module; an allocation sized by a hostile count would be gigabytes.
RSS_GROWTH_LIMIT = 64 * 1024 * 1024
API_VERSIONS = [(int(key), v) for key, (low, high) in sorted(SERVER_VERSIONS.items()) for v in range(low, high + 1)]
SASL_APIS = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate: the only bodies decoded before login


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    ports: dict[SecurityProtocol, int]
    tls: ssl.SSLContext

    def connect(self, protocol: SecurityProtocol, *, login: bool) -> Wire:
        wire = Wire(("127.0.0.1", self.ports[protocol]), tls=self.tls if protocol.uses_tls else None)
        if login and protocol.uses_sasl:
            wire.login("admin", PASSWORD)
        return wire

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def assert_alive(self, watchdog: Wire) -> None:
        assert self.process.poll() is None, f"kafkaguard serve died with exit code {self.process.returncode}"
        response = watchdog.request(ApiVersionsRequest(client_software_name="watchdog", client_software_version="1"))
        assert response.error_code.value == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("hostile") / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    # One fresh connection per hostile frame, hundreds a second from 127.0.0.1: above the default creation rate per
    # address (tests/server/test_connection_limits.py proves that limit).
    env["KAFKAGUARD_MAX_CONNECTION_CREATION_RATE_PER_IP"] = "100000"
    # Each of them breaks the protocol on purpose: no penalty (tests/server/test_violation_penalty.py proves it).
    env["KAFKAGUARD_PROTOCOL_VIOLATION_PENALTY_SECONDS"] = "0"
    subprocess.run(
        [str(KAFKAGUARD), "users", "add", "admin", "--password", PASSWORD, "--data-dir", str(data_dir)],
        check=True,
        capture_output=True,
        timeout=60,
        env=env,
    )
    ports = {protocol: free_port() for protocol in SecurityProtocol}
    listeners = [arg for p, port in ports.items() for arg in ("--listener", f"{p.value}://127.0.0.1:{port}")]
    process = subprocess.Popen(
        [
            str(KAFKAGUARD),
            "serve",
            "--data-dir",
            str(data_dir),
            *listeners,
            "--super-users",
            "User:admin",
            "--ssl-certfile",
            str(tls_files.certfile),
            "--ssl-keyfile",
            str(tls_files.keyfile),
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        for port in ports.values():
            wait_until_listening(process, port)
        tls = ssl.create_default_context(cafile=str(tls_files.certfile))
        yield Served(process, ports, tls)
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=20)
        assert b"Traceback" not in err, err.decode(errors="replace")[-3000:]


def header(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    """Request header v1 (or v2 with an empty tagged-field section for flexible versions)."""
    schema = load_request_schema(api_key, version)
    client_id = b"hostile"
    head = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + correlation_id.to_bytes(4, "big")
    head += len(client_id).to_bytes(2, "big") + client_id
    return head + (b"\x00" if schema.__flexible__ else b"")


def answered_or_closed(wire: Wire) -> str:
    """'closed' or 'answered'; fails on a hang."""
    try:
        payload = wire.recv_frame()
    except TimeoutError as e:
        raise AssertionError("the server neither answered nor closed the connection") from e
    except (ConnectionResetError, ssl.SSLError):
        return "closed"
    return "closed" if payload is None else "answered"


CASES = [
    (SecurityProtocol.SASL_PLAINTEXT, False),
    (SecurityProtocol.SASL_PLAINTEXT, True),
    (SecurityProtocol.SASL_SSL, False),
    (SecurityProtocol.SASL_SSL, True),
    (SecurityProtocol.PLAINTEXT, True),  # ANONYMOUS: every body is decoded at once
]


@pytest.mark.parametrize(("protocol", "login"), CASES, ids=[f"{p.value}-{'in' if i else 'out'}" for p, i in CASES])
def test_hostile_first_lengths_close_the_connection_and_nothing_else(
    served: Served, protocol: SecurityProtocol, login: bool
):
    watchdog = served.connect(SecurityProtocol.SASL_PLAINTEXT, login=True)
    served.assert_alive(watchdog)
    rss_before = served.rss()
    sent = 0
    for api_key, version in API_VERSIONS:
        for label, body in hostile_bodies(load_request_schema(api_key, version)):
            with served.connect(protocol, login=login) as wire:
                wire.send_raw(frame(header(api_key, version) + body))
                outcome = answered_or_closed(wire)
            sent += 1
            # Hostile lengths are refused by closing; an empty body may be a valid request of an API without fields.
            if label != "empty body":
                assert outcome == "closed", f"API {api_key} v{version} {label}: {outcome}"
            served.assert_alive(watchdog)
    assert sent > 5 * len(API_VERSIONS)
    assert served.rss() - rss_before < RSS_GROWTH_LIMIT
    watchdog.close()


def test_before_login_only_sasl_bodies_are_read(served: Served):
    """Anything but ApiVersions and SASL closes the connection before login, even a well-formed request."""
    for api_key, version in API_VERSIONS:
        if api_key in SASL_APIS:
            continue
        with served.connect(SecurityProtocol.SASL_PLAINTEXT, login=False) as wire:
            wire.send_raw(frame(header(api_key, version) + b"\xff" * 64))
            assert answered_or_closed(wire) == "closed", f"API {api_key} v{version} was read before login"


RANDOM = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@RANDOM
@given(
    api=st.sampled_from(API_VERSIONS),
    body=st.binary(max_size=64),
    login=st.booleans(),
)
def test_random_bytes_after_a_valid_header(served: Served, api: tuple[int, int], body: bytes, login: bool):
    protocol = SecurityProtocol.PLAINTEXT if login else SecurityProtocol.SASL_PLAINTEXT
    with served.connect(protocol, login=login) as wire:
        wire.send_raw(frame(header(*api) + body))
        answered_or_closed(wire)
    with served.connect(SecurityProtocol.SASL_PLAINTEXT, login=True) as watchdog:
        served.assert_alive(watchdog)

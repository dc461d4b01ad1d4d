"""Connection limits: idle connections are closed, and connections beyond max_connections are refused while the
ones already open keep working."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.server.conftest import TlsFiles, start_server
from tests.wire import Wire

pytestmark = pytest.mark.integration


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="limits-test", client_software_version="1")


def wait_closed(wire: Wire, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if wire.closed():
            return True
        time.sleep(0.05)
    return False


def test_an_idle_connection_is_closed(tmp_path: Path, tls_files: TlsFiles):
    server = start_server(tmp_path / "data", tls_files, idle_timeout_seconds=0.5)
    try:
        with Wire(server.plaintext) as idle, Wire(server.plaintext) as busy:
            assert idle.request(api_versions()).error_code == 0
            for _ in range(12):  # keep one connection busy past the idle timeout of the other
                assert busy.request(api_versions()).error_code == 0
                time.sleep(0.1)
            assert wait_closed(idle, within=3.0)
            assert busy.request(api_versions()).error_code == 0  # still open: it was never idle that long
    finally:
        server.stop()


def test_connections_beyond_the_limit_are_refused(tmp_path: Path, tls_files: TlsFiles):
    server = start_server(tmp_path / "data", tls_files, max_connections=2)
    try:
        with Wire(server.plaintext) as first, Wire(server.plaintext) as second:
            assert first.request(api_versions()).error_code == 0
            assert second.request(api_versions()).error_code == 0
            with Wire(server.plaintext) as third:
                assert wait_closed(third, within=3.0)
            assert first.request(api_versions()).error_code == 0  # the open ones are unaffected
        with Wire(server.plaintext) as again:  # a slot is free again once they close
            deadline = time.monotonic() + 3.0
            while True:
                try:
                    assert again.request(api_versions()).error_code == 0
                    break
                except (ConnectionError, OSError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
    finally:
        server.stop()

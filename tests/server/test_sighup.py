"""SIGHUP (issue 39): a real ``kafkaguard serve`` process re-reads its config file and applies the live settings (a
connection limit, the log level), and names a changed setting it cannot apply ("… needs a restart: listeners")."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration

TIMEOUT = 20.0


@dataclass
class Serve:
    process: subprocess.Popen[bytes]
    port: int
    config: Path
    settings: dict[str, Any]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def reload(self, **changes: Any) -> None:
        """Rewrite the config file with ``changes``, send SIGHUP, wait for the reload's log line."""
        self.settings.update(changes)
        self.config.write_text(json.dumps(self.settings))
        before = self.log_text().count("SIGHUP:")
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + TIMEOUT
        while self.log_text().count("SIGHUP:") == before:
            assert self.process.poll() is None, f"kafkaguard serve exited on SIGHUP: {self.log_text()[-2000:]}"
            assert time.monotonic() < deadline, "no SIGHUP line in the log"
            time.sleep(0.05)  # polling the log, bounded by the deadline


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    port = free_port()
    settings: dict[str, Any] = {
        "listeners": [f"PLAINTEXT://127.0.0.1:{port}"],
        "data_dir": str(tmp_path / "data"),
        "max_connections_per_ip": 100,
        "log_level": "INFO",
    }
    config = tmp_path / "kafkaguard.yaml"
    config.write_text(json.dumps(settings))
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(KAFKAGUARD), "serve", "--config", str(config)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
    try:
        wait_until_listening(process, port)
        yield Serve(process, port, config, settings, log)
    finally:
        process.terminate()
        process.wait(20)
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]


def answered(port: int) -> bool:
    """One ApiVersions on a new connection: answered (True), or the connection closed unanswered (False)."""
    try:
        with Wire(("127.0.0.1", port), timeout=10) as wire:
            hello = ApiVersionsRequest(client_software_name="sighup-test", client_software_version="1")
            return bool(wire.request(hello).error_code == 0)
    except (ConnectionError, OSError, EOFError, AssertionError):  # Wire asserts on a close instead of an answer
        return False


def test_sighup_applies_a_connection_limit_and_the_log_level(serve: Serve) -> None:
    held = [socket.create_connection(("127.0.0.1", serve.port), timeout=10) for _ in range(2)]
    try:
        assert answered(serve.port)  # a third connection: within 100 per address
        assert "connection from" not in serve.log_text()  # its close is logged at DEBUG only

        serve.reload(max_connections_per_ip=2, log_level="DEBUG")
        assert re.search(r"INFO .*SIGHUP: applied log_level, max_connections_per_ip$", serve.log_text(), re.M)
        assert "needs a restart" not in serve.log_text()
        assert not answered(serve.port)  # the third is refused now
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + TIMEOUT
    while not answered(serve.port):  # with those two closed there is room again, once the server sees them close
        assert time.monotonic() < deadline, "still refused after the held connections closed"
        time.sleep(0.05)  # polling, bounded by the deadline
    while not re.search(r"DEBUG .*connection from 127\.0\.0\.1 .* closed", serve.log_text()):
        assert time.monotonic() < deadline, "no DEBUG line after the SIGHUP set log_level DEBUG"
        time.sleep(0.05)  # polling the log, bounded by the deadline
    assert "max_connections_per_ip" in serve.log_text()  # the refusal names the limit


def test_a_changed_listener_needs_a_restart_and_keeps_its_port(serve: Serve) -> None:
    new_port = free_port()
    serve.reload(listeners=[f"PLAINTEXT://127.0.0.1:{new_port}"], max_connections_per_ip=50)
    text = serve.log_text()
    assert re.search(r"WARNING .*SIGHUP: changed settings not applied, each needs a restart: listeners$", text, re.M)
    assert re.search(r"SIGHUP: applied max_connections_per_ip$", text, re.M)
    assert answered(serve.port)  # still listening where it started


def test_a_config_file_that_does_not_load_changes_nothing(serve: Serve) -> None:
    serve.reload(max_connections_per_ip=-3)
    assert re.search(r"ERROR .*SIGHUP: the configuration does not load, nothing changed: .*max_connections_per_ip",
                     serve.log_text())  # fmt: skip
    assert serve.process.poll() is None
    assert answered(serve.port)


def test_sighup_applies_a_new_shutdown_grace_which_the_next_drain_uses(serve: Serve) -> None:
    serve.reload(shutdown_grace_seconds=7.5)
    assert re.search(r"SIGHUP: applied shutdown_grace_seconds$", serve.log_text(), re.M)
    serve.process.send_signal(signal.SIGTERM)
    assert serve.process.wait(TIMEOUT) == 0
    assert "draining: /healthz answers 503 from now (shutdown_grace_seconds 7.5)" in serve.log_text()

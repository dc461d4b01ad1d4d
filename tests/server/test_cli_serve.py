"""The real command line: ``kafkaguard users add`` writes the first admin, ``kafkaguard serve`` serves it to a real
client, and SIGTERM stops it promptly with exit code 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.wire import Wire

pytestmark = pytest.mark.integration

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_listening(process: subprocess.Popen[bytes], port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"kafkaguard serve exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)  # polling for the listener, bounded by the deadline
    raise AssertionError("kafkaguard serve did not listen in time")


def test_users_add_then_serve_then_sigterm(tmp_path: Path):
    data_dir = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    added = subprocess.run(
        [str(KAFKAGUARD), "users", "add", "admin", "--password", "cli-secret", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    assert "SCRAM-SHA-256" in added.stdout

    port = free_port()
    process = subprocess.Popen(
        [
            str(KAFKAGUARD),
            "serve",
            "--data-dir",
            str(data_dir),
            "--listener",
            f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "--super-users",
            "User:admin",
            "--audit-log",
            str(tmp_path / "audit.log"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        wait_until_listening(process, port)
        admin = AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "admin",
                "sasl.password": "cli-secret",
            }
        )
        cluster = admin.list_topics(timeout=10)
        assert cluster.controller_id == 1
        # An open, idle connection at shutdown does not hold the server up.
        with Wire(("127.0.0.1", port)) as idle:
            idle.login("admin", "cli-secret")
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _out, err = process.communicate(timeout=10)
            assert idle.closed()
        assert process.returncode == 0, err
        assert time.monotonic() - started < 5
        assert b"Traceback" not in err
        assert b"ERROR" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

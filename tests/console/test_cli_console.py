"""``kafkaguard console`` and ``kafkaguard serve --http-listener`` as real processes: they serve, the standalone
console follows another process's changes to the store, and SIGTERM ends them cleanly (exit 0)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kafkaguard.bootstrap import build_services
from kafkaguard.config import load_settings
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.actors import ACTOR

pytestmark = pytest.mark.integration
KAFKAGUARD = str(Path(sys.executable).parent / "kafkaguard")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not become healthy")


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    return err


def start(*args: str, data_dir: Path) -> subprocess.Popen[str]:
    env = os.environ | {"KAFKAGUARD_ADMIN_USER": "admin", "KAFKAGUARD_ADMIN_PASSWORD": "admin-pw"}
    return subprocess.Popen(
        [KAFKAGUARD, *args, "--data-dir", str(data_dir), "--super-users", "User:admin"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kafkaguard_console_alone_follows_the_store(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    process = start("console", "--http-listener", url.removeprefix("http://"), data_dir=tmp_path)
    try:
        wait_healthy(url, process)
        # Another process (this one) writes to the same store; the console picks it up by polling.
        services = build_services(load_settings(None, data_dir=tmp_path))
        try:
            binding = AclBinding(
                ResourcePattern(ResourceType.TOPIC, "from-elsewhere", PatternType.LITERAL),
                AccessControlEntry("User:eve", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
            services.acls.create_acls([binding], actor=ACTOR)
        finally:
            services.close()
        deadline = time.monotonic() + 5
        while True:
            acls = httpx.get(f"{url}/api/acls", auth=("admin", "admin-pw"), timeout=5).json()["acls"]
            if acls or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert [a["resource_name"] for a in acls] == ["from-elsewhere"]
        assert httpx.get(f"{url}/healthz", timeout=5).json()["acls"] == 1
    finally:
        if process.poll() is None:
            err = stop(process)
            assert "ERROR" not in err and "Traceback" not in err


def test_kafkaguard_serve_with_an_http_listener_runs_both(tmp_path: Path) -> None:
    port, kafka_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    process = start(
        "serve", "--listener", f"SASL_PLAINTEXT://127.0.0.1:{kafka_port}", "--http-listener", f"127.0.0.1:{port}",
        data_dir=tmp_path,
    )  # fmt: skip
    try:
        wait_healthy(url, process)
        assert httpx.get(f"{url}/api/users", auth=("admin", "admin-pw"), timeout=5).status_code == 200
        with socket.create_connection(("127.0.0.1", kafka_port), timeout=5):
            pass  # the Kafka listener is up in the same process
    finally:
        if process.poll() is None:
            err = stop(process)
            assert "ERROR" not in err and "Traceback" not in err


def test_a_bad_http_listener_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [KAFKAGUARD, "console", "--data-dir", str(tmp_path), "--http-listener", "nonsense"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "http_listener 'nonsense' is not host:port" in result.stderr

"""``scripts/run-proxy`` stopped by its PID stops what it started: the proxy and the throw-away broker.

It used to run the proxy in the foreground, and bash runs no trap while a foreground child runs: ``kill`` of the
script's PID ended the script only, leaving the proxy serving and the broker running (issue 40's newcomer frictions).
The script runs from a temporary directory that stands for the checkout (``.venv`` and ``../shared`` linked, its
``data`` there), so the repository is left as it was. It listens on 127.0.0.1:19092, as the README says.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kafka.proxy.test_readme_walkthrough import free
from tests.server.test_cli_serve import wait_until_listening

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_killing_run_proxy_by_its_pid_stops_the_proxy_and_the_broker(tmp_path: Path):
    if not free(19092):
        pytest.fail("scripts/run-proxy listens on 127.0.0.1:19092, which is taken on this machine")
    checkout = tmp_path / "checkout"
    for part in ("scripts", "config"):
        shutil.copytree(ROOT / part, checkout / part)
    for file in ("pyproject.toml", "requirements.lock"):
        shutil.copy(ROOT / file, checkout / file)
    venv = Path(sys.executable).parent.parent
    stamp = venv / ".kafkaguard-setup"
    want = hashlib.sha256((ROOT / "requirements.lock").read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    if not stamp.exists() or stamp.read_text().strip() != want.hexdigest():
        # the copy's scripts/setup would reinstall kafkaguard into the shared venv from the copy (a temporary
        # directory), leaving the venv pointing there after the test
        pytest.fail("the venv is not set up for this checkout's lock file: run scripts/setup first")
    (checkout / ".venv").symlink_to(venv)
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    env |= {"TMPDIR": str(tmp_path), "KAFKAGUARD_ADMIN_PASSWORD": "change-me"}
    script = subprocess.Popen(["bash", "scripts/run-proxy", "--log-level", "WARNING"], cwd=checkout, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    started: list[int] = []
    try:
        wait_until_listening(script, 19092, timeout=180)
        (broker_pid_file,) = tmp_path.glob("kafkaguard-broker.*/broker.pid")
        broker = int(broker_pid_file.read_text())
        (proxy,) = children(script.pid)
        started += [broker, proxy]
        assert alive(broker) and alive(proxy)
        script.send_signal(signal.SIGTERM)  # the script's PID only, as `kill PID` does
        _, errors = script.communicate(timeout=60)
        assert wait_gone(proxy, 30), "the proxy still runs after its script was killed"
        assert wait_gone(broker, 30), "the broker still runs after its script was killed"
        assert script.returncode == 0, errors.decode()
        assert free(19092)
        assert not list(tmp_path.glob("kafkaguard-broker.*")), "the broker's directory was left behind"
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
        for pid in started:  # what a failing run left behind must not hold port 19092 for the next test
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

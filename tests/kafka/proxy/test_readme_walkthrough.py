"""The manual's "first produce and consume through the proxy" (docs/getting-started/proxy.md), run as it stands:
its shell block in bash and its Python block in this checkout's Python, against ``kafkaguard proxy`` started as
``scripts/run-proxy`` starts it (``config/kafkaguard.yaml``, the listener on 127.0.0.1:19092,
``KAFKAGUARD_ADMIN_PASSWORD=change-me``) in front of the real test broker. Both run in a temporary directory that
stands for the checkout: ``.venv`` links to this one's, and ``data`` is the proxy's data directory there, so the
repository is left as it was.

The walk-through names port 19092 (and the proxy serves the broker's node 1 on 19094): the test needs them free.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.server.test_cli_serve import wait_until_listening

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "getting-started" / "proxy.md"
PORTS = (19092, 19094)


def block(marker: str, language: str) -> str:
    """The fenced ``language`` block right after ``<!-- tested: marker -->`` in the page."""
    found = re.search(rf"<!-- tested: {marker} -->\n```{language}\n(.*?)\n```", PAGE.read_text(), re.S)
    assert found is not None, f"{PAGE.name} has no {language} block after <!-- tested: {marker} -->"
    return found.group(1)


def free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_readme_walkthrough_runs_as_written(kafka: KafkaBroker, tmp_path: Path):
    busy = [port for port in PORTS if not free(port)]
    if busy:
        pytest.fail(f"the walk-through uses 127.0.0.1 ports {PORTS}; {busy} are taken on this machine")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}  # another shell
    served = env | {"KAFKAGUARD_ADMIN_PASSWORD": "change-me", "KAFKAGUARD_UPSTREAM_PASSWORD": ADMIN_PASSWORD}
    proxy = subprocess.Popen(
        [str(tmp_path / ".venv" / "bin" / "kafkaguard"), "proxy", "--config", str(ROOT / "config" / "kafkaguard.yaml"),
         "--listener", "SASL_PLAINTEXT://127.0.0.1:19092", "--upstream", kafka.bootstrap,
         "--upstream-security-protocol", "SASL_PLAINTEXT", "--upstream-user", ADMIN, "--log-level", "WARNING"],
        cwd=tmp_path, env=served, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        for port in PORTS:
            wait_until_listening(proxy, port)
        shell = subprocess.run(["bash", "-euo", "pipefail", "-c", block("proxy-walkthrough-shell", "bash")],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert shell.returncode == 0, shell.stderr
        python = subprocess.run([str(tmp_path / ".venv" / "bin" / "python"), "-c",
                                 block("proxy-walkthrough-python", "python")],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
        assert python.returncode == 0, python.stderr
        assert python.stdout.strip() == "b'order 1'"
        kafkaguard = str(tmp_path / ".venv" / "bin" / "kafkaguard")
        export = subprocess.run([kafkaguard, "export", "--bootstrap-server", "127.0.0.1:19092", "--command-config",
                                 "admin.properties", "--format", "json", "-o", "acls.json"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert export.returncode == 0, export.stderr
    finally:
        proxy.terminate()
        _, errors = proxy.communicate(timeout=30)
    assert proxy.returncode == 0, errors.decode()
    # what the walk-through wrote went where the page says: alice in the proxy's store, the ACLs too
    assert (tmp_path / "data" / "kafkaguard.db").is_file()
    assert (tmp_path / "admin.properties").is_file()
    # The shipped config's audit mode (usage) recorded the session's allowed traffic: `audit usage` on its log finds
    # alice's ACLs used (with `audit_mode: denied` it reported every ACL UNUSED, issue 27).
    usage = subprocess.run([str(tmp_path / ".venv" / "bin" / "kafkaguard"), "audit", "usage", "--log", "data/audit.log",
                            "--acls", "acls.json", "--out", "usage", "--master", "local[1]"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert usage.returncode == 0, usage.stderr + usage.stdout
    status = {
        (row["operation"], row["resource_type"], row["resource_name"]): (row["status"], row["decisive_requests"])
        for row in pq.read_table(str(tmp_path / "usage" / "acl_usage")).to_pylist()
        if row["principal"] == "User:alice"
    }
    for used in (("WRITE", "TOPIC", "first-orders"), ("READ", "TOPIC", "first-orders"), ("READ", "GROUP", "billing")):
        assert status[used][0] == "USED" and status[used][1] >= 1, (used, status)
    assert status[("CREATE", "TOPIC", "first-orders")][0] == "UNUSED"  # the admin created the topic

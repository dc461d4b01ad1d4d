"""Issue 40: the first session's Python snippet (docs/examples/first_session.py, the README's ``A first session``)
runs against a real server, and with the server down it ends with an error within its timeout instead of hanging
forever printing "Connection refused"."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serving import ADMIN_PASSWORD, sasl_server

pytestmark = pytest.mark.integration

SNIPPET = Path(__file__).parents[2] / "docs" / "examples" / "first_session.py"


def _run(script: Path, bootstrap: str, password: str, limit: float) -> subprocess.CompletedProcess[str]:
    text = SNIPPET.read_text().replace("127.0.0.1:9092", bootstrap).replace('"change-me"', repr(password))
    script.write_text(text)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=limit, check=False)


def test_the_snippet_runs_against_a_real_server(tmp_path: Path) -> None:
    with sasl_server(tmp_path / "server") as server:
        host, port = server.sasl
        done = _run(tmp_path / "snippet.py", f"{host}:{port}", ADMIN_PASSWORD, 120)
    assert done.returncode == 0, done.stderr
    assert "User:alice" in done.stdout and "orders." in done.stdout


def test_with_the_server_down_the_snippet_ends_within_its_timeout(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The snippet's own timeout is 10 s per call; a hang would run into the 90 s here.
    try:
        done = _run(tmp_path / "snippet.py", f"127.0.0.1:{port}", "x", 90)
    except subprocess.TimeoutExpired:
        pytest.fail("the snippet hangs when the server is down: no timeout on .result()")
    assert done.returncode != 0
    assert "TimeoutError" in done.stderr  # the snippet's own timeout, not librdkafka's 60 s default

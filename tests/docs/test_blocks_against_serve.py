"""The README's tour and the manual's examples that talk to a server, run as they stand against ``kafkaguard serve``
started as ``scripts/run`` starts it (``config/kafkaguard.yaml``, ``KAFKAGUARD_ADMIN_PASSWORD=change-me``), in a
temporary directory that stands for the checkout (``.venv`` links to this one's; ``data`` is the server's data
directory there), so the repository is left as it was. The one change to the text: the server listens on a free
port, which replaces ``127.0.0.1:9092`` (scripts/run's) in each block.

And the first session's snippet against a server that is down ends with a timeout error instead of waiting forever
(issue 40: it printed "Connection refused" for ever).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, marked_block
from tests.server.test_cli_serve import free_port, wait_until_listening

pytestmark = pytest.mark.integration

SCRIPTS_RUN_ADDRESS = "127.0.0.1:9092"


@dataclass
class Checkout:
    directory: Path
    port: int
    env: dict[str, str]

    def text(self, name: str) -> str:
        block = marked_block(name)
        assert SCRIPTS_RUN_ADDRESS in block.text or "127.0.0.1:" not in block.text, block.where()
        return block.text.replace(SCRIPTS_RUN_ADDRESS, f"127.0.0.1:{self.port}")

    def bash(self, *names: str) -> subprocess.CompletedProcess[str]:
        script = "\n".join(self.text(name) for name in names)
        return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.directory, env=self.env,
                              capture_output=True, text=True, timeout=180)  # fmt: skip

    def python(self, name: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
        text = self.text(name)
        if port is not None:
            text = text.replace(f"127.0.0.1:{self.port}", f"127.0.0.1:{port}")
        return subprocess.run([str(self.directory / ".venv" / "bin" / "python"), "-c", text], cwd=self.directory,
                              env=self.env, capture_output=True, text=True, timeout=180)  # fmt: skip


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checkout]:
    directory = tmp_path_factory.mktemp("checkout")
    venv = Path(sys.executable).parent.parent
    (directory / ".venv").symlink_to(venv)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}  # another shell
    env["PATH"] = f"{directory / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # `source .venv/bin/activate`
    port = free_port()
    server = subprocess.Popen(
        [str(directory / ".venv" / "bin" / "kafkaguard"), "serve", "--config", str(ROOT / "config" / "kafkaguard.yaml"),
         "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--log-level", "WARNING"],
        cwd=directory, env=env | {"KAFKAGUARD_ADMIN_PASSWORD": "change-me"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until_listening(server, port)
        yield Checkout(directory, port, env)
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=30)
    assert server.returncode == 0, errors.decode()


def test_the_readme_tour_runs_as_written(checkout: Checkout) -> None:
    tour = checkout.bash("readme-tour")
    assert tour.returncode == 0, tour.stderr
    assert "User:alice" in tour.stdout and "orders" in tour.stdout
    assert (checkout.directory / "acls.yaml").is_file()
    assert (checkout.directory / "data" / "kafkaguard.db").is_file()  # where scripts/run keeps its store


def test_the_first_session_snippet_runs_as_written(checkout: Checkout) -> None:
    session = checkout.python("first-session-python")
    assert session.returncode == 0, session.stderr
    assert "User:alice" in session.stdout and "orders." in session.stdout


def test_the_first_session_snippet_ends_when_the_server_is_down(checkout: Checkout) -> None:
    down = checkout.python("first-session-python", port=free_port())
    assert down.returncode != 0
    assert "TimeoutError" in down.stderr, down.stderr[-2000:]


def test_the_cli_examples_run_as_written(checkout: Checkout) -> None:
    cli = checkout.bash("acls-cli-properties", "acls-cli-session", "access-groups")
    assert cli.returncode == 0, cli.stderr
    assert "SCRAM credential configs for user-principal 'alice'" in cli.stdout
    assert "ALLOWED" in cli.stdout  # check: alice may READ orders
    exported = (checkout.directory / "acls.yaml").read_text()
    assert "User:bob" in exported and "billing" in exported

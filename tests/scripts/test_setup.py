"""``scripts/setup``: ``--runtime`` (what ``scripts/run`` uses) installs nothing only the tests need — a first run
of the server installed a browser (issue 40) — while the plain form, the test command's, still installs it.

The script runs for real, with ``apt-get`` and ``id`` shimmed on PATH (recording what would be installed, as root)
and Chromium looked for at a path that does not exist; the venv step finds its stamp current and does nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def installs(tmp_path: Path, *args: str) -> str:
    shims = tmp_path / "bin"
    shims.mkdir(exist_ok=True)
    calls = tmp_path / "apt-get.calls"
    (shims / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (shims / "id").write_text("#!/bin/sh\necho 0\n")
    for shim in shims.iterdir():
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "CHROMIUM": str(tmp_path / "no-chromium")}
    run = subprocess.run(["bash", "scripts/setup", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return calls.read_text() if calls.exists() else ""


def test_the_runtime_setup_installs_no_browser(tmp_path: Path):
    assert "chromium" not in installs(tmp_path, "--runtime")


def test_the_test_setup_still_installs_the_browser(tmp_path: Path):
    assert "install -y -qq chromium" in installs(tmp_path)


def test_scripts_run_sets_up_for_running_only():
    assert "scripts/setup --runtime\n" in (ROOT / "scripts" / "run").read_text()


def test_an_unknown_option_is_refused_with_the_usage():
    run = subprocess.run(["bash", "scripts/setup", "--fast"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert run.returncode == 2 and "usage: scripts/setup [--runtime]" in run.stderr


@pytest.fixture(autouse=True)
def _venv_is_set_up() -> None:
    assert (ROOT / ".venv" / ".kafkaguard-setup").exists(), "run scripts/setup first: these runs must not build a venv"

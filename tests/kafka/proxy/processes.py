"""``kafkaguard proxy`` as a process of its own, for the suites that need the real command: its path, a clean
environment, and ``WorkersProxy``, a ``--workers N`` node that stands for an in-process proxy's handle.

``WorkersProxy.start`` gives the process the settings of the in-process proxy (``tests.serving.served_settings``
with the proxy's own on top, written to a config file), ``User:admin`` with both SCRAM mechanisms, and waits until
every worker has said it listens on the broker's port. It offers what the equivalence suites use of a
``ServerHandle``: ``ports``, ``bootstrap``, ``errors`` (the log's ERROR lines and tracebacks so far) and ``stop``.

The workers share the store (SQLite under the data directory); none is told of another's writes: each follows the
store every ``sync_interval_seconds`` (``kafkaguard.following``), so a write through one worker reaches the others
within ``WorkersProxy.lag`` (``tests.kafka.proxy.test_equivalence.provision`` waits that out).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkaguard.bootstrap import build_services
from kafkaguard.config import SecurityProtocol, load_settings
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.serving import ADMIN, ADMIN_PASSWORD

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")
TIMEOUT = 90.0
#: ``WorkersProxy.lag`` beyond the follow interval.
LAG_MARGIN_SECONDS = 1.0

#: A log line of level ERROR or CRITICAL (``cli.options.run_service``'s format: the time, then the level).
_ERROR_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (ERROR|CRITICAL) ")


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without any ``KAFKAGUARD_*`` setting (a developer's would change the test)."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    return {**clean, **extra}


def wait_for(log: Path, pattern: str, process: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> re.Match[str]:
    """The first match of ``pattern`` (multiline) in ``log``, once it is there; fails if ``process`` exits first."""
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, log.read_text(errors="replace"), re.M)) is None:
        assert process.poll() is None, f"the proxy exited: {log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"no {pattern!r}: {log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.05)  # polling the log, bounded by the deadline
    return found


def _add_admin(data_dir: Path) -> None:
    """``User:admin`` with both SCRAM mechanisms, written into the store as ``tests.serving`` does (what ``kafkaguard
    users add`` does, without starting another interpreter: its imports take seconds of a loaded CI machine)."""
    services = build_services(load_settings(None, data_dir=data_dir))
    try:
        for mechanism in ScramMechanism:
            result = services.credentials.upsert_password(ADMIN, mechanism, ADMIN_PASSWORD, 4096, actor=ACTOR)
            assert result.succeeded, result
    finally:
        services.close()


@dataclass
class WorkersProxy:
    """A running ``kafkaguard proxy --workers N``: its supervisor process, log, and the listener's port."""

    process: subprocess.Popen[bytes]
    log: Path
    ports: dict[SecurityProtocol, int]
    #: Seconds after a write through one worker within which every other worker has it: one wait for the store
    #: (``sync_interval_seconds``) between two rounds of polls (a few milliseconds each on SQLite: the round that
    #: began just before the write missed it, the next one finds it), with a wide margin for a loaded CI machine.
    lag: float

    HOST = "127.0.0.1"

    @classmethod
    def start(cls, directory: Path, settings: dict[str, Any], *, port: int, workers: int = 2) -> WorkersProxy:
        """``settings`` (``load_settings`` keywords) in a config file under ``directory``, but the upstream password
        (``KAFKAGUARD_UPSTREAM_PASSWORD``, as the README runs it); one SASL_PLAINTEXT listener on ``port``, which
        every worker binds (``settings``' listeners are replaced: the node needs fixed ports)."""
        values = {key: value for key, value in settings.items() if value is not None}
        password = str(values.pop("upstream_password"))
        values["listeners"] = [f"SASL_PLAINTEXT://{cls.HOST}:{port}"]
        config = directory / "proxy.yaml"
        config.write_text(json.dumps(values, default=str, indent=2))  # JSON is YAML
        _add_admin(Path(values["data_dir"]))
        log = directory / "proxy.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(KAFKAGUARD), "proxy", "--workers", str(workers), "--config", str(config)],
                stdout=out, stderr=subprocess.STDOUT, env=environment(KAFKAGUARD_UPSTREAM_PASSWORD=password),
            )  # fmt: skip
        lag = float(values["sync_interval_seconds"]) + LAG_MARGIN_SECONDS
        handle = cls(process, log, {SecurityProtocol.SASL_PLAINTEXT: port}, lag)
        try:
            for number in range(1, workers + 1):  # the client listener, then the broker's port (node 1: port + 2)
                wait_for(log, rf"worker={number} .*listening on SASL_PLAINTEXT://127\.0\.0\.1:{port + 2}:", process)
        except BaseException:
            handle.kill()
            raise
        return handle

    def bootstrap(self, protocol: SecurityProtocol) -> str:
        return f"{self.HOST}:{self.ports[protocol]}"

    @property
    def errors(self) -> list[str]:
        """Every ERROR or CRITICAL line and every traceback the node has logged so far, in order (the log only
        grows: a test compares the list's length before and after)."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [line for line in lines if _ERROR_LINE.match(line) or line.startswith("Traceback")]

    def stop(self) -> None:
        """SIGTERM to the supervisor, which drains its workers; it must exit 0, having logged no error meanwhile."""
        before = len(self.errors)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        tail = self.log.read_text(errors="replace")[-3000:]
        assert self.process.returncode == 0, tail
        assert self.errors[before:] == [], tail

    def kill(self) -> None:
        """SIGKILL to the supervisor; its workers get SIGTERM as it dies (``PR_SET_PDEATHSIG``, ``node.workers``)."""
        self.process.kill()
        self.process.wait(TIMEOUT)

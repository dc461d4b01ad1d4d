"""``--workers N``: one node served by N processes, under a supervisor that keeps N running.

Worked example (``kafkaguard proxy --workers 2``, listener ``SASL_PLAINTEXT://:9092``, two upstream brokers)::

    supervisor (pid 100)      starts: worker 1 (pid 101), worker 2 (pid 102), each `kafkaguard proxy` as today
    worker 1 and worker 2     each bind :9092, :9094, :9095 (and the console's port) with SO_REUSEPORT
    a client connects         the kernel hands the connection to one worker's accept queue (a hash of its addresses)
    kill -9 102               the supervisor logs "worker 2 (pid 102) killed by SIGKILL" and starts worker 2 again
    kill -HUP 100             each worker reloads its live settings
    kill 100 (SIGTERM)        each worker gets SIGTERM and drains; after grace + margin, SIGKILL; exit 0

**Why SO_REUSEPORT, not sockets bound once and inherited.** The proxy's per-broker ports are known only once a worker
has asked the cluster (and new brokers appear later): a supervisor binding everything first would have to discover
the cluster itself and hand new sockets to running workers. Each worker binding the same ports itself needs nothing
of the kind: the ports are a function of the listener's port and the broker's id (``P+1+N``), so every worker binds
the same ones, and a replacement worker binds them again while the others keep serving. The kernel also balances
accepts across the workers' own queues (one shared queue wakes every worker per connection). The cost: listeners
need fixed ports (port 0 would give each worker another; refused with a clear error), and a worker that dies drops
the connections waiting in its accept queue unaccepted (their clients retry, as after any broker restart).

**What is per worker.** Each worker is a whole node: its own connection limits, login failure budget and client
quotas (a user's limit is N times the setting across the node), its own metrics (a scrape is answered by the worker
that accepts it, with every worker's series labelled ``worker="N"``: ``node.worker_metrics``), its own audit trail
writer. The audit log file is shared: the file sink appends each batch
with one ``write`` to a file opened ``O_APPEND``, so lines from different workers never interleave (tested); the Kafka
sink's spool is per worker (``audit_spool_dir``/worker-N): a spool is one process's.

Cost model: the supervisor is one process that polls its workers every ``_POLL_SECONDS`` (a ``waitpid`` each) and
does nothing else; a worker costs what a one-process node costs (memory included: N workers, N times the RSS).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from kafkaguard.config import Listener, Settings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.node.worker_metrics import METRICS_DIR_ENV, metrics_file

log = logging.getLogger(__name__)

#: Set in a worker's environment to its number (1..N): it serves as one node, its listeners shared.
WORKER_ENV = "KAFKAGUARD_WORKER"
#: How often the supervisor looks at its workers (a dead worker is noticed within this).
_POLL_SECONDS = 0.1
#: Restart backoff: the first restart after this, doubling per quick death up to the cap; reset by a long run.
_FIRST_BACKOFF_SECONDS = 0.5
_MAX_BACKOFF_SECONDS = 30.0
_STEADY_SECONDS = 30.0
#: After the grace the workers have to drain, this much more before SIGKILL (their exit, the audit flush).
STOP_MARGIN_SECONDS = 5.0
#: The CLI's exit code for a configuration error (``cli.options.run_service``): a worker that exits with it would
#: exit with it again, so the supervisor stops instead of restarting.
_CONFIG_ERROR_EXIT = 2
#: Linux's prctl(PR_SET_PDEATHSIG): a worker gets SIGTERM when its supervisor dies, even by SIGKILL (no orphans).
_PR_SET_PDEATHSIG = 1


def worker_number() -> int | None:
    """This process's worker number (1..N), None when it is not a worker (a node of one process, or the
    supervisor)."""
    value = os.environ.get(WORKER_ENV)
    return int(value) if value is not None and value.isdigit() else None


def in_worker() -> bool:
    """Whether this process is one of several serving the same ports (they bind with SO_REUSEPORT)."""
    return worker_number() is not None


def check_shareable(settings: Settings) -> None:
    """Refuse what N workers cannot share: a listener on port 0 (each worker would get a port of its own).

    :raises InvalidConfigError: naming the listener.
    """
    for text in settings.listeners:
        listener = Listener.parse(text)
        if listener.port == 0:
            raise InvalidConfigError(
                f"workers {settings.workers}: listener {text} has port 0, and each worker would listen on another "
                "port; give it a fixed port (or run with workers 1)"
            )
    if settings.http_listener is not None and settings.http_listener.rstrip().endswith(":0"):
        raise InvalidConfigError(
            f"workers {settings.workers}: http_listener {settings.http_listener} has port 0; give it a fixed port"
        )


def _die_with_parent() -> None:
    """In the worker, before exec: SIGTERM when the supervisor dies (Linux; elsewhere nothing)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def describe_exit(returncode: int) -> str:
    """``exited with code 1`` or ``killed by SIGKILL``, from a ``Popen.returncode``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode}"


@dataclass
class _Worker:
    number: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = _FIRST_BACKOFF_SECONDS
    restart_at: float | None = None
    restarts: int = field(default=0)


class Supervisor:
    """Starts ``count`` workers running ``command`` (the same ``kafkaguard proxy``/``serve`` command line), restarts
    one that dies, forwards SIGHUP, and on SIGTERM/SIGINT stops them all (``run``)."""

    def __init__(
        self,
        count: int,
        command: Sequence[str],
        *,
        grace_seconds: float,
        spool_dir: Path | None = None,
    ) -> None:
        self.workers = [_Worker(number) for number in range(1, count + 1)]
        self.command = list(command)
        self.grace_seconds = grace_seconds
        self.spool_dir = spool_dir
        self._stopping = False
        self._hangups = 0
        #: Where the workers publish their metrics for one another (``node.worker_metrics``); removed at the end.
        self.metrics_dir = Path(tempfile.mkdtemp(prefix="kafkaguard-workers-"))

    # signal handlers: they only set flags; the loop acts on them
    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self._stopping = True

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        self._hangups += 1

    def _environment(self, number: int) -> dict[str, str]:
        env = dict(os.environ)
        env[WORKER_ENV] = str(number)
        env[METRICS_DIR_ENV] = str(self.metrics_dir)
        if self.spool_dir is not None:  # a spool is one process's (audit.records.spool)
            env["KAFKAGUARD_AUDIT_SPOOL_DIR"] = str(self.spool_dir / f"worker-{number}")
        return env

    def _start(self, worker: _Worker) -> None:
        worker.process = subprocess.Popen(  # noqa: S603 - our own command line, the same interpreter
            self.command,
            env=self._environment(worker.number),
            preexec_fn=_die_with_parent,  # a prctl only; the supervisor has no threads
            process_group=0,  # Ctrl-C reaches the supervisor only; it forwards one SIGTERM
        )
        worker.started_at = time.monotonic()
        worker.restart_at = None
        log.info("worker %d started (pid %d)", worker.number, worker.process.pid)

    def _signal_all(self, signum: signal.Signals) -> None:
        for worker in self.workers:
            if worker.process is not None and worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signum)

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT; the exit code: 0 after a clean stop, 2 when a worker stopped on a
        configuration error (it would again: the others are stopped too)."""
        previous = {
            sig: signal.signal(sig, handler)
            for sig, handler in (
                (signal.SIGTERM, self._on_stop),
                (signal.SIGINT, self._on_stop),
                (signal.SIGHUP, self._on_hangup),
            )
        }
        code = 0
        try:
            log.info("supervisor (pid %d) starting %d workers", os.getpid(), len(self.workers))
            for worker in self.workers:
                self._start(worker)
            code = self._watch()
        finally:
            self._stop_all()
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("supervisor stopped")
        return code

    def _watch(self) -> int:
        hangups = 0
        while not self._stopping:
            if self._hangups != hangups:
                hangups = self._hangups
                log.info("SIGHUP: forwarded to every worker")
                self._signal_all(signal.SIGHUP)
            now = time.monotonic()
            for worker in self.workers:
                process = worker.process
                if process is not None and process.poll() is not None:
                    ran = now - worker.started_at
                    worker.process = None
                    metrics_file(self.metrics_dir, worker.number).unlink(missing_ok=True)  # its series end
                    if process.returncode == _CONFIG_ERROR_EXIT:
                        log.error(
                            "worker %d (pid %d) stopped on a configuration error (exit 2, its error above): "
                            "stopping every worker",
                            worker.number,
                            process.pid,
                        )
                        return _CONFIG_ERROR_EXIT
                    if ran >= _STEADY_SECONDS:
                        worker.backoff = _FIRST_BACKOFF_SECONDS
                    log.warning(
                        "worker %d (pid %d) %s after %.1f s; restarting it in %.1f s",
                        worker.number,
                        process.pid,
                        describe_exit(process.returncode),
                        ran,
                        worker.backoff,
                    )
                    worker.restart_at = now + worker.backoff
                    worker.backoff = min(worker.backoff * 2, _MAX_BACKOFF_SECONDS)
                    worker.restarts += 1
                elif process is None and worker.restart_at is not None and now >= worker.restart_at:
                    self._start(worker)
            time.sleep(_POLL_SECONDS)
        log.info("shutting down: SIGTERM to every worker (grace %g s)", self.grace_seconds)
        return 0

    def _stop_all(self) -> None:
        """SIGTERM to every worker; SIGKILL to those still running after the grace and the margin."""
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_seconds + STOP_MARGIN_SECONDS
        for worker in self.workers:
            process = worker.process
            if process is None:
                continue
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d (pid %d) still running after the grace: SIGKILL", worker.number, process.pid)
                process.kill()
                process.wait()
            if process.returncode not in (0, -signal.SIGTERM):
                log.warning("worker %d (pid %d) %s", worker.number, process.pid, describe_exit(process.returncode))
            worker.process = None


def worker_command() -> list[str]:
    """This process's command line, run again by the same interpreter (a worker parses the same flags)."""
    return [sys.executable, "-m", "kafkaguard.cli.main", *sys.argv[1:]]


def supervise(settings: Settings, *, grace_seconds: float) -> int:
    """Run ``settings.workers`` workers of this command until SIGTERM/SIGINT; the exit code.

    :raises InvalidConfigError: a listener cannot be shared (``check_shareable``).
    """
    check_shareable(settings)
    uses_spool = settings.audit_kafka_bootstrap_servers is not None
    supervisor = Supervisor(
        settings.workers,
        worker_command(),
        grace_seconds=grace_seconds,
        spool_dir=settings.audit_spool_path if uses_spool else None,
    )
    return supervisor.run()

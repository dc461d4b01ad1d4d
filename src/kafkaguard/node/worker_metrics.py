"""One ``/metrics`` for a node of several workers (``node.workers``): whichever worker answers a scrape answers with
every worker's series, each labelled ``worker="N"``.

Worked example (two workers; worker 2 answers the scrape)::

    worker 1, every PUBLISH_SECONDS:  its exposition -> $KAFKAGUARD_WORKER_METRICS_DIR/worker-1.prom (renamed)
    a scrape reaches worker 2:        its own exposition, fresh, and worker-1.prom as last published
    the answer:                       kafkaguard_logins_total{worker="1",listener=...} 7
                                      kafkaguard_logins_total{worker="2",listener=...} 5   (one HELP/TYPE per family)

**Why labels, not sums.** Most of kafkaguard's metrics are computed at the scrape from each process's own state
(collectors, not prometheus-client's counters), which prometheus-client's multiprocess mode cannot add up; and a sum
needs a rule per gauge (ACLs held: the same in every worker; spool bytes: per worker). Labelled series are exact
for every kind: each worker's counters stay monotonic in their own series, and ``sum without (worker) (...)`` gives
the node's figure where a sum is meant. Another worker's series are at most ``PUBLISH_SECONDS`` old; a worker that
died is gone from the answer once the supervisor removes its file (its replacement's counters start again at 0,
which Prometheus reads as a counter reset).

Cost model: each worker renders its exposition every ``PUBLISH_SECONDS`` (what a scrape costs, on the event loop)
and writes it to a file; a scrape additionally reads N - 1 files and rewrites each line once (O(total lines)).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: Set by the supervisor in each worker's environment: where the workers publish their expositions.
METRICS_DIR_ENV = "KAFKAGUARD_WORKER_METRICS_DIR"
#: How often a worker publishes its exposition (another worker's series in a scrape are at most this old).
PUBLISH_SECONDS = 2.0


def metrics_file(directory: Path, number: int) -> Path:
    return directory / f"worker-{number}.prom"


def labelled(exposition: str, number: int) -> dict[str, tuple[list[str], list[str]]]:
    """Each family of a Prometheus text exposition (by the name its HELP/TYPE lines give), its header lines and its
    samples with ``worker="number"`` added as the first label."""
    families: dict[str, tuple[list[str], list[str]]] = {}
    current: tuple[list[str], list[str]] = ([], [])
    label = f'worker="{number}"'
    for line in exposition.splitlines():
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                current = families.setdefault(parts[2], ([], []))
                if line not in current[0]:
                    current[0].append(line)
            continue
        brace, space = line.find("{"), line.find(" ")
        if brace != -1 and (space == -1 or brace < space):  # metric names have no "{" or " ": the first is its end
            rest = line[brace + 1 :]
            current[1].append(f"{line[: brace + 1]}{label}{'' if rest.startswith('}') else ','}{rest}")
        elif space != -1:
            current[1].append(f"{line[:space]}{{{label}}}{line[space:]}")
    return families


def combine(expositions: dict[int, str]) -> str:
    """Expositions by worker number, as one: every family once, its samples from each worker in number order."""
    merged: dict[str, tuple[list[str], list[str]]] = {}
    for number in sorted(expositions):
        for name, (headers, samples) in labelled(expositions[number], number).items():
            into = merged.setdefault(name, ([], []))
            into[0].extend(h for h in headers if h not in into[0])
            into[1].extend(samples)
    return "".join("".join(f"{line}\n" for line in headers + samples) for headers, samples in merged.values())


class WorkerMetrics:
    """This worker's part: publish its exposition, and answer a scrape with every worker's."""

    def __init__(self, directory: Path, number: int, render: Callable[[], bytes]) -> None:
        self.directory = directory
        self.number = number
        self._render = render

    def publish(self) -> None:
        """Write this worker's exposition now, whole (a temporary file renamed over the last one)."""
        path = metrics_file(self.directory, self.number)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_bytes(self._render())
            temporary.replace(path)
        except OSError as e:  # the supervisor removed the directory (it is stopping), or the disk is full
            log.debug("cannot publish worker %d's metrics: %s", self.number, e)
            temporary.unlink(missing_ok=True)

    async def run(self) -> None:
        """Publish every ``PUBLISH_SECONDS`` until cancelled."""
        while True:
            self.publish()
            await asyncio.sleep(PUBLISH_SECONDS)

    def answer(self, own: bytes) -> bytes:
        """A scrape's answer: ``own`` (this worker's exposition, fresh) and the others' last published ones."""
        expositions = {self.number: own.decode("utf-8")}
        with contextlib.suppress(OSError):
            for path in self.directory.glob("worker-*.prom"):
                number = path.stem.removeprefix("worker-")
                if number.isdigit() and int(number) != self.number:
                    with contextlib.suppress(OSError):  # removed meanwhile: that worker died
                        expositions[int(number)] = path.read_text(encoding="utf-8")
        return combine(expositions).encode("utf-8")


def worker_metrics(number: int | None, render: Callable[[], bytes]) -> WorkerMetrics | None:
    """This worker's ``WorkerMetrics`` when it is one of several (``METRICS_DIR_ENV`` set), else None."""
    directory = os.environ.get(METRICS_DIR_ENV)
    if number is None or not directory:
        return None
    return WorkerMetrics(Path(directory), number, render)

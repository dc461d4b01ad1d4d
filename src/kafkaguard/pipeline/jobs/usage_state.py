"""The state of incremental ``audit usage --state DIR`` runs: which log files were processed, and where.

A daily job over a growing log directory should cost only the new files. A log file is known by its path, size
and modification time; a file processed before is skipped, a new one is read, and one whose size or time changed
is refused (its earlier hits cannot be taken back: rotate logs into new files, or rebuild the state with
``--rebuild``). The hits themselves (per ACL binding and requesting principal: matched and decisive requests,
first and last seen) are Parquet tables in the state's current *generation*::

    DIR/CURRENT              the name of the current generation (replaced atomically with os.replace)
    DIR/gen-000003/files     path, size, mtime_ms, records, first_seen, last_seen (one row per processed file)
    DIR/gen-000003/hits      the ACL binding columns, user, matched_requests, decisive_requests, first/last seen

A run writes a whole new generation next to the current one and then points ``CURRENT`` at it, so a run that
fails half-way leaves the previous state as it was; older generations are deleted afterwards. The state
directory must be local (``os.replace`` is the atomic step), the logs local files too (their size and time are
read with ``os.stat``).

Hits are keyed by the ACL's binding (principal, host, operation, permission, resource pattern), not its id (ids
change on import). A hit is recorded under the ACL set of the run that read the file, as AWS IAM's last-accessed
data is: when the set changes, earlier hits of bindings still in the set stay as they were recorded, and bindings
no longer in the set are left out of the results.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from kafkaguard.pipeline.errors import PipelineError

CURRENT = "CURRENT"
_GENERATION = re.compile(r"^gen-(\d{6})$")
_WINDOW = re.compile(r"^\s*(\d+)\s*([dh])\s*$")


@dataclass(frozen=True, slots=True, order=True)
class LogFile:
    path: str
    size: int
    mtime_ms: int


def parse_window(text: str) -> timedelta:
    """``90d`` or ``36h`` → a duration.

    :raises PipelineError: anything else.
    """
    found = _WINDOW.match(text)
    if found is None or int(found.group(1)) == 0:
        raise PipelineError(f"--unused-for must be a number of days or hours such as 90d or 36h, got {text!r}")
    amount = int(found.group(1))
    return timedelta(days=amount) if found.group(2) == "d" else timedelta(hours=amount)


def _local(path: str) -> str:
    if "://" in path and not path.startswith("file:"):
        raise PipelineError(f"--state needs local log files (their size and time identify them), got {path}")
    return path.removeprefix("file://").removeprefix("file:")


def list_log_files(paths: Sequence[str]) -> list[LogFile]:
    """Every file under the given files, directories (recursively) and globs, sorted; hidden and ``_`` files
    (Spark's markers) are left out, as Spark's readers leave them out.

    :raises PipelineError: a remote path, or a path that matches no file.
    """
    found: set[str] = set()
    for given in paths:
        local = _local(given)
        matched = sorted(glob.glob(local)) if any(c in local for c in "*?[") else [local]
        if not matched or not any(os.path.exists(m) for m in matched):
            raise PipelineError(f"log path does not exist: {given}")
        for match in matched:
            if os.path.isdir(match):
                for root, dirs, files in os.walk(match):
                    dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
                    found.update(os.path.join(root, f) for f in files if not f.startswith((".", "_")))
            elif os.path.isfile(match):
                found.add(match)
    out = []
    for path in sorted(found):
        stat = os.stat(path)
        out.append(LogFile(os.path.abspath(path), stat.st_size, stat.st_mtime_ns // 1_000_000))
    return out


@dataclass(frozen=True, slots=True)
class Plan:
    """Which of the listed files a run reads."""

    new: list[LogFile]
    seen: list[LogFile]


def plan(listed: Iterable[LogFile], processed: Iterable[LogFile]) -> Plan:
    """Split the listed files into new and already processed ones.

    :raises PipelineError: a processed file changed since (its size or modification time differs).
    """
    before = {f.path: f for f in processed}
    new, seen, changed = [], [], []
    for f in listed:
        known = before.get(f.path)
        if known is None:
            new.append(f)
        elif known == f:
            seen.append(f)
        else:
            changed.append(f.path)
    if changed:
        raise PipelineError(
            f"{len(changed)} log file(s) changed since they were processed (size or modification time), e.g. "
            f"{changed[0]}: their earlier hits cannot be taken back. Write logs to new files (rotate), or run again "
            "with --rebuild to process every file anew"
        )
    return Plan(new, seen)


class StateDir:
    """Generations of the state in one local directory (see the module docstring)."""

    def __init__(self, path: str) -> None:
        if "://" in path and not path.startswith("file:"):
            raise PipelineError(f"--state must be a local directory, got {path}")
        self.root = Path(path.removeprefix("file://").removeprefix("file:")).absolute()
        if self.root.exists() and not self.root.is_dir():
            raise PipelineError(f"--state {path}: not a directory")

    def current(self) -> Path | None:
        """The current generation, or None (no run yet).

        :raises PipelineError: ``CURRENT`` names a generation that is not there.
        """
        pointer = self.root / CURRENT
        if not pointer.exists():
            return None
        name = pointer.read_text().strip()
        if not _GENERATION.match(name) or not (self.root / name).is_dir():
            raise PipelineError(f"--state {self.root}: {CURRENT} names {name!r}, which is not a generation here")
        return self.root / name

    def next(self) -> Path:
        """A fresh directory for the next generation (not current until ``commit``)."""
        self.root.mkdir(parents=True, exist_ok=True)
        numbers = [int(m.group(1)) for p in self.root.iterdir() if (m := _GENERATION.match(p.name))]
        path = self.root / f"gen-{max(numbers, default=0) + 1:06d}"
        path.mkdir()
        return path

    def commit(self, generation: Path) -> None:
        """Make ``generation`` current (atomically), then delete every other generation."""
        staged = self.root / f".{CURRENT}.tmp"
        staged.write_text(generation.name + "\n")
        os.replace(staged, self.root / CURRENT)
        for path in self.root.iterdir():
            if _GENERATION.match(path.name) and path != generation:
                shutil.rmtree(path, ignore_errors=True)

    def clear(self) -> None:
        """``--rebuild``: forget every processed file."""
        (self.root / CURRENT).unlink(missing_ok=True)

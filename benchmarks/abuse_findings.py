"""Issue 36's findings, measured as ``bench_abuse`` rows: each on this tree beside the code before the change, in the
same run, on the same sizes.

A finding is a module with ``run(context) -> list[FindingRow]`` (``FINDINGS`` names them): it starts the target
processes it needs (``kafkaguard serve`` or ``proxy``, with the settings the finding needs), once with this tree's
``src/`` and once with ``context.before_pythonpath`` (the code before issue 36, unpacked by ``before_tree``) when
that is set, runs its load against each, and reports what it measured with its target. ``bench_abuse`` runs them after
its attacks (``--only kid-flood`` and so on picks some) and writes the section ``abuse-findings``.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Protocol

from tests.kafka.broker import KafkaBroker

#: The last commit before issue 36's changes: the "before" column's code.
BEFORE_REVISION = "931e9e2"

#: Finding key → module with its ``run``.
FINDINGS: dict[str, str] = {
    "kid-flood": "benchmarks.abuse_kid_flood",
    "user-guesses": "benchmarks.abuse_user_guesses",
    "junk-neighbour": "benchmarks.abuse_junk_neighbour",
    "spool-fairness": "benchmarks.abuse_spool_fairness",
    "refused-history": "benchmarks.abuse_refused_history",
}


@dataclass(frozen=True)
class FindingRow:
    """One measured case: what the code before did and what this tree does, the same load, the same run."""

    finding: str
    target: str
    #: The code before issue 36, same load ("not measured: …" when there was no before tree).
    before: str
    after: str
    goal: str
    met: bool


@dataclass(frozen=True)
class FindingContext:
    workdir: Path
    #: The ``kafkaguard`` executable (of this tree's virtualenv; ``PYTHONPATH`` picks the code it runs).
    executable: str
    #: The Kafka test broker, for findings that need a cluster (None: not available, the finding says so).
    broker: KafkaBroker | None
    quick: bool
    #: ``src/`` of the code before issue 36 (``before_tree``), or None.
    before_pythonpath: str | None


class Finding(Protocol):
    def run(self, context: FindingContext) -> list[FindingRow]: ...


def before_tree(workdir: Path, revision: str = BEFORE_REVISION) -> str | None:
    """Unpack ``revision``'s ``src/`` under ``workdir`` and return its path, or None when git cannot (no git, a
    shallow clone without that commit)."""
    repo = Path(__file__).resolve().parent.parent
    git = shutil.which("git")
    if git is None:
        return None
    try:
        archive = subprocess.run([git, "archive", "--format=tar", revision, "src"], cwd=repo, capture_output=True,
                                 check=True, timeout=120).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    target = workdir / f"before-{revision}"
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return str(target / "src")


def run_findings(context: FindingContext, only: Sequence[str] = ()) -> list[FindingRow]:
    rows: list[FindingRow] = []
    for key, module in FINDINGS.items():
        if only and key not in only:
            continue
        finding: Finding = importlib.import_module(module)  # a module with run()
        rows += finding.run(context)
    return rows


def render_findings(rows: Sequence[FindingRow], *, before: str | None) -> str:
    code = (
        f"the code before issue 36 (`{BEFORE_REVISION}`, its `src/` run by the same interpreter) beside this tree"
        if before
        else "this tree only (the code before issue 36 could not be unpacked, so no before column was measured)"
    )
    lines = [
        "## Abuse, issue 36's findings (`benchmarks/bench_abuse.py`, `benchmarks/abuse_*.py`)",
        "",
        f"Each finding's load against fresh target processes: {code}, same load, same run.",
        "",
        "| finding | target | the code before | this tree | goal | met |",
        "|---|---|---|---|---|---|",
        *(
            f"| {row.finding} | {row.target} | {row.before} | {row.after} | {row.goal} | {'✓' if row.met else '✗'} |"
            for row in rows
        ),
    ]
    return "\n".join(lines)

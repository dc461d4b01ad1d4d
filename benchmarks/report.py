"""Writes benchmark results into docs/benchmarks.md, one marked section per benchmark, with the machine described.

Each benchmark module calls ``write_section(name, markdown)``; sections of other benchmarks are kept as they are,
so benchmarks can be run one at a time.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
_HEADER = (
    "# Benchmarks\n\nWritten by `scripts/bench` (see `benchmarks/`). "
    "Every result stands next to a baseline measured in the same run.\n"
)


def machine() -> str:
    """One line describing where the numbers were measured."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{mem_kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        mem = "?"
    java = ""
    try:
        java_bin = shutil.which("java")
        if java_bin is None:
            raise FileNotFoundError("java")
        out = subprocess.run([java_bin, "-version"], capture_output=True, text=True, timeout=20, check=False)
        java = ", " + out.stderr.splitlines()[0].strip() if out.stderr else ""
    except (OSError, subprocess.SubprocessError):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem} RAM, {platform.system()} {platform.release()}, "
        f"CPython {sys.version.split()[0]}{java}"
    )


def write_section(name: str, markdown: str) -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks.md."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    text = DOC.read_text() if DOC.exists() else _HEADER
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = f"<!-- begin {name} -->\n{markdown.rstrip()}\n\n_Measured {stamp} on {machine()}._\n<!-- end {name} -->"
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.DOTALL)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else text.rstrip() + "\n\n" + body + "\n"
    DOC.write_text(text)

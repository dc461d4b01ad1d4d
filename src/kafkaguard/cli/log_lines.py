"""Reading audit logs line by line, for the commands that read them (``audit shadow-report``, ``explain
--from-audit``): plain or gzip-compressed (a rotated ``.gz``), in the order given. Cost: one pass, one line in memory
at a time."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kafkaguard.cli.output import fail


def open_log(path: Path) -> IO[str]:
    """``path`` as text: gunzipped when it ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def log_lines(paths: list[Path], *, exit_code: int = 1) -> Iterator[tuple[str, int, str]]:
    """(file, line number from 1, line) of every line of ``paths``; a file that cannot be read is one ``error:`` line
    and ``exit_code``."""
    for path in paths:
        try:
            with open_log(path) as lines:
                for number, line in enumerate(lines, 1):
                    yield str(path), number, line
        except (OSError, UnicodeDecodeError, EOFError) as e:
            fail(f"cannot read {path}: {e}", exit_code)

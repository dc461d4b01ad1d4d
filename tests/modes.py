"""File-mode helpers for the tests of private data files (the store, the server secret, the audit log)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Group and others may neither read nor write: owner read/write only.
PRIVATE = 0o600


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """The process umask set to ``mask`` inside the block (0o022, the usual default, lets new files be 0644)."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def file_modes(directory: Path) -> dict[str, int]:
    """Every regular file below ``directory`` (relative path → permission bits)."""
    return {str(path.relative_to(directory)): mode(path) for path in sorted(directory.rglob("*")) if path.is_file()}

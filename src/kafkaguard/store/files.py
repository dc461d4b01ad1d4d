"""Private files: the database (StoredKey and ServerKey of every user), its WAL and shared-memory files, the server
secret and the audit log are readable and writable by their owner only (mode 0600).

A new file is created with mode 0600 (``os.open`` with that mode; a umask can only narrow it). A file found with
any group or other permission is set to 0600 when kafkaguard opens it, with an INFO log line naming it, so a data
directory made by an older kafkaguard, or copied with wider modes, is tightened on first use (or, when its owner is
another user, left as it is with a WARNING).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

#: Owner read and write, nothing for group and others.
PRIVATE_MODE = 0o600


def create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists; an existing file is left as it is (see ``tighten``).

    :raises OSError: the file cannot be created.
    """
    # No O_EXCL: another process may create the same file at the same moment, and either creation will do.
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_MODE))


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data``, whole or not at all: written to a temporary file of this process (mode 0600)
    beside it, flushed to disk, then renamed over it. Of processes writing the same file at once, the last rename
    wins, and no reader ever sees part of a write.

    :raises OSError: the file cannot be written.
    """
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE), "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def open_private_append(path: Path) -> int:
    """A descriptor of ``path`` opened for appending, the file created with mode 0600 if it does not exist.

    :raises OSError: the file cannot be opened or created.
    """
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_MODE)


def tighten(path: Path) -> bool:
    """Set ``path`` to mode 0600 if group or others have any permission on it, logging it at INFO. True if the
    mode was changed. A file that is absent, or already private, is left alone; one whose mode cannot be changed
    (another user owns it) is left as it is with a WARNING, since refusing to start would not make it private.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if not mode & 0o077:
            return False
        path.chmod(PRIVATE_MODE)
    except FileNotFoundError:
        return False
    except OSError as e:
        log.warning("%s may be open to group or others and cannot be made private: %s", path, e)
        return False
    log.info("%s was open to group or others (mode %#o): set to %#o", path, mode, PRIVATE_MODE)
    return True

"""Reading a child process's stdout line by line with deadlines, for the multi-process tests."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from typing import IO


class Lines:
    """A child's stdout, read by a thread, so the test can wait for a line with a deadline."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        assert child.stdout is not None
        stream = child.stdout
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))

    def wait_for(self, wanted: str, timeout: float) -> float:
        """Seconds until ``wanted`` was printed; fails after ``timeout``."""
        start = time.monotonic()
        while (left := timeout - (time.monotonic() - start)) > 0:
            try:
                if self._queue.get(timeout=left) == wanted:
                    return time.monotonic() - start
            except queue.Empty:
                break
        raise AssertionError(f"the other process did not print {wanted!r} within {timeout} s")

"""Growing the process's file descriptor table once, at start, instead of under a flood of connections.

Linux grows a process's fd table by doubling it when an fd past its end is needed, and when the process has more than
one thread (ours: the audit writer, asyncio's executor) each growth waits for an RCU grace period (``expand_fdtable`` →
``synchronize_rcu``): the ``accept`` that needed it sleeps for that grace period, and the event loop with it. Under a
flood of connections, one such stall at each doubling (~256, 512 … 4,096 fds), none once the table has been grown at
start (see docs/benchmarks.md, "Figures from the code"). The table never shrinks, so growing it once costs one ``dup2``
and ~8 bytes per fd.
"""

from __future__ import annotations

import contextlib
import os
import resource


def reserve_descriptors(count: int) -> int:
    """Grow the fd table to hold ``count`` fds (at most the soft RLIMIT_NOFILE); returns the size reserved (0 if
    nothing was done: the platform has no such limit, or it failed, which costs only the stalls above)."""
    with contextlib.suppress(OSError, ValueError):
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        size = min(count, soft) if soft != resource.RLIM_INFINITY else count
        if size <= 3:
            return 0
        probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.dup2(probe, size - 1, inheritable=False)  # the kernel grows the table to hold fd size - 1
            os.close(size - 1)
        finally:
            os.close(probe)
        return size
    return 0

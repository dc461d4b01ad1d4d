"""Counting garbage cycles in a running server's process, for the tests that prove its paths leave none
(``tests/node/test_collector.py``, ``tests/proxy/test_no_garbage_cycles.py``): ``node.collector`` freezes what is
alive every 0.1 s and reclaims frozen cycles only hourly, so a cycle made per request or per connection is a leak."""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec

from tests.serving import ServerHandle

P = ParamSpec("P")


def of(o: object, modules: tuple[str, ...]) -> bool:
    """Whether ``o``'s type is from one of ``modules`` (a type whose metaclass defines ``__module__`` is not)."""
    module: object = type(o).__module__
    return isinstance(module, str) and module.startswith(modules)


def freed_only_by_the_collector(modules: tuple[str, ...]) -> Counter[str]:
    """What only a full collection frees now (frozen objects included), by type (of ``modules``): the garbage cycles.

    Two kinds: a cycle the collection finds and keeps (``gc.DEBUG_SAVEALL``: ``gc.garbage``), and one it frees
    before that — a cycle through a suspended generator or coroutine is broken by its finalizer (the collection
    closes it, its frame lets go, and reference counting frees the rest), so it never reaches ``gc.garbage``: the
    walked Fetch answer's old cycle (walk → generator → frame → walk) was of that kind, and counting ``gc.garbage``
    alone did not see it. The second kind is what was alive before the collection (``gc.get_objects()``, by id:
    nothing is held meanwhile) and is gone after it. ``gc.collect()``'s return value is not used: it proved
    unreliable before. Call it while nothing else runs: with the server's loop ``parked``."""
    gc.unfreeze()
    before = {id(o): type(o).__qualname__ for o in gc.get_objects() if of(o, modules)}
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = Counter(type(o).__qualname__ for o in gc.garbage if of(o, modules))
        kept = {id(o) for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    alive = {id(o) for o in gc.get_objects()}
    found.update(name for i, name in before.items() if i not in alive and i not in kept)
    return found


@contextmanager
def parked(server: ServerHandle) -> Iterator[None]:
    """The server's loop blocked in a callback until the block ends: none of its code runs meanwhile, and nothing
    it scheduled is freed. Why not count in a coroutine on the loop: the thread that scheduled the coroutine
    (``run_coroutine_threadsafe``) may still hold the loop's ``Handle`` for it and drop it while the loop counts —
    one stray ``Handle`` "freed", in about one run in four."""
    entered, release = threading.Event(), threading.Event()

    def park() -> None:
        entered.set()
        release.wait(30)

    server.loop.call_soon_threadsafe(park)
    assert entered.wait(10), "the server's loop did not park"
    try:
        yield
    finally:
        release.set()


#: Set in the child interpreter of an ``isolated`` test: run the test itself there.
ISOLATED = "KAFKAGUARD_GARBAGE_TEST_CHILD"


def isolated(test: Callable[P, None]) -> Callable[P, None]:
    """Run ``test`` in a fresh interpreter of its own (``python -m pytest <its node id>``), the parent passing when
    the child's run passes. Why: a cycle count sees the whole process, and in the full suite the process holds
    what earlier modules left (threads of their servers, garbage their collectors froze), which a count then takes
    for the test's own (``Event`` and ``Handle`` counted in the full suite only). The parent still sets up the
    test's fixtures (pytest asks for them by the signature), unused."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        if os.environ.get(ISOLATED) == "1":
            test(*args, **kwargs)
            return
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        child = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
            env={**os.environ, ISOLATED: "1"},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        said = f"{child.stdout[-6000:]}\n{child.stderr[-2000:]}"
        assert child.returncode == 0, f"{node} failed in its own interpreter:\n{said}"
        assert "1 passed" in child.stdout, f"{node} did not run in its own interpreter:\n{said}"

    return run

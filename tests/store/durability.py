"""The parent side of the SIGKILL durability tests, on SQLite (``test_sqlite``) and PostgreSQL
(``test_postgres_faults``): run ``durability_child`` on a store, kill it at a random moment, and after each round
check that every change it acknowledged is there (and no acknowledged deletion came back)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kafkaguard.scram import ScramMechanism
from kafkaguard.store import Store

ROOT = Path(__file__).resolve().parents[2]


def run_and_kill(target: str, start: int, pause: float, env: Mapping[str, str] | None = None) -> list[str]:
    """The lines ``durability_child`` printed on ``target`` before a SIGKILL ``pause`` seconds after it was ready."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.store.durability_child", target, str(start)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    time.sleep(pause)
    os.kill(child.pid, signal.SIGKILL)
    with child.stdout:
        lines = child.stdout.read().splitlines()
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    return lines


def check_sigkilled_writers(
    target: str,
    open_store: Callable[[], Store],
    *,
    rounds: int,
    rng: random.Random,
    pauses: tuple[float, float],
    env: Mapping[str, str] | None = None,
    check: Callable[[Store], None] = lambda store: None,
) -> None:
    """``rounds`` writers on ``target``, each killed after a pause drawn from ``pauses``; after each, the store
    ``open_store`` opens holds every acknowledged change (and passes ``check``)."""
    created: set[int] = set()
    deleting: set[int] = set()
    deleted: set[int] = set()
    acked_credential: dict[str, int] = {}
    attempted_credential: dict[str, int] = {}
    acknowledged = 0
    for round_number in range(rounds):
        for line in run_and_kill(target, round_number * 100_000, rng.uniform(*pauses), env):
            kind, *args = line.split()
            acknowledged += not kind.endswith("?")
            if kind == "A":
                created.add(int(args[0]))
            elif kind == "D?":
                deleting.add(int(args[0]))
            elif kind == "D":
                deleted.add(int(args[0]))
            elif kind == "C?":
                attempted_credential[args[0]] = int(args[1])
            elif kind == "C":
                acked_credential[args[0]] = int(args[1])
        store = open_store()
        try:
            check(store)
            present = {int(a.binding.pattern.name[1:]) for a in store.load_acls().acls}
            assert created - deleting <= present, "an acknowledged creation was lost"
            assert not deleted & present, "an acknowledged deletion was lost"
            for user, iterations in acked_credential.items():
                stored = store.get_credential(user, ScramMechanism.SCRAM_SHA_256)
                assert stored is not None
                assert stored.iterations in {iterations, attempted_credential[user]}
            log = store.changes_since(0)
            assert log is not None
            assert set(log.added) == set(store.load_acls().acls), "the change log disagrees with the ACL table"
        finally:
            store.close()
    assert acknowledged > rounds * 5  # the kills landed while work was going on, not only before it started
    assert len(created) > rounds

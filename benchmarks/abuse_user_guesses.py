"""Issue 36 finding 3: no budget per user. Wrong PLAIN passwords for one user (alice), each a new one, from 16
loopback addresses at once, each address guessing as fast as the server answers, on the code before issue 36 and on
this tree; meanwhile alice's owner logs in every 2 s with SCRAM-SHA-256 (no cache: every one is checked) from an
address that never fails (127.0.38.200).

Reported: password checks against alice per minute (answers "Invalid username or password": each is a PBKDF2
derivation and a guess), refusals, and the owner's logins. Goal: checks within what the user budget allows in the
window — ``login_failures_per_user_burst`` (20) + ``login_failures_per_user_per_minute`` (10) a minute + one per
address new to the flood (16) — and every one of the owner's logins succeeding. The before column is bounded only
by the per-address budget (16 × (10 + 30 a minute)).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path

from benchmarks.abuse_findings import FindingContext, FindingRow
from benchmarks.bench_abuse import RawConn, open_conn
from benchmarks.login_flood import THROTTLED, flood, sources, start_target
from tests.wire import scramp_exchange

FINDING = "user-guesses"
USER, PASSWORD = "alice", "alice-secret"
ADDRESSES = 16
USER_BURST, USER_PER_MINUTE = 20, 10.0  # the defaults of login_failures_per_user_*
OWNER_ADDRESS = "127.0.38.200"
OWNER_INTERVAL_S = 2.0


def guess(number: int) -> bytes:
    """The n-th guess: a password of its own (the same wrong password at once from many connections is checked once,
    its answer shared, so it would not be n guesses)."""
    return f"\x00{USER}\x00guess-{number}".encode()


@dataclass(frozen=True)
class Measured:
    checked: int
    throttled: int
    seconds: float
    owner_ok: int
    owner_all: int

    @property
    def guesses(self) -> str:
        return f"{self.checked} checks in {self.seconds:.0f} s, {self.throttled} refused unchecked"

    @property
    def owner(self) -> str:
        return f"{self.owner_ok}/{self.owner_all} logged in"


def classify(code: int, _auth_bytes: bytes, message: str | None) -> str:
    if message == "Authentication failed: Invalid username or password":
        return "checked"
    if message is not None and message.startswith(THROTTLED):
        return "throttled"
    return "ok" if code == 0 else "other"


def run(context: FindingContext) -> list[FindingRow]:
    seconds = 10.0 if context.quick else 58.0
    allowed = USER_BURST + USER_PER_MINUTE * seconds / 60 + ADDRESSES
    after = _measure(context.executable, None, context.workdir / "user-guesses-after", seconds)
    before = None
    if context.before_pythonpath is not None:
        before = _measure(context.executable, context.before_pythonpath, context.workdir / "user-guesses-before",
                          seconds)  # fmt: skip
    missing = "not measured: no before tree"
    return [
        FindingRow(
            FINDING,
            f"PLAIN guesses against one user from {ADDRESSES} addresses",
            before.guesses if before else missing,
            after.guesses,
            f"≤ {allowed:.0f} checks in {seconds:.0f} s (user burst 20 + 10/min + 1 per address)",
            after.checked <= allowed,
        ),
        FindingRow(
            FINDING,
            "meanwhile the owner's SCRAM login from a clean address, every 2 s",
            before.owner if before else missing,
            after.owner,
            "every one logged in",
            0 < after.owner_ok == after.owner_all,
        ),
    ]


async def _owner_login(port: int) -> bool:
    conn: RawConn = await open_conn(RawConn, OWNER_ADDRESS, port)
    steps = scramp_exchange(USER, PASSWORD)
    try:
        body = next(steps)
        while True:
            body = steps.send(await conn.request(body))
    except StopIteration:
        return True
    except AssertionError:  # a step refused
        return False
    finally:
        conn.close()


def _measure(executable: str, pythonpath: str | None, directory: Path, seconds: float) -> Measured:
    settings: dict[str, object] = {
        "listeners": ["SASL_PLAINTEXT://127.0.0.1:PORT"],
        "sasl_mechanisms": ["SCRAM-SHA-256", "PLAIN"],
        "sasl_plain_without_tls": True,
    }
    target = start_target(executable, pythonpath, directory, settings, [(USER, PASSWORD)])
    owner: list[bool] = []
    stop = threading.Event()

    def owner_logs_in() -> None:  # a thread with its own event loop, beside the flood's
        while not stop.wait(OWNER_INTERVAL_S):
            try:
                owner.append(asyncio.run(_owner_login(target.port)))
            except (OSError, TimeoutError):
                owner.append(False)

    thread = threading.Thread(target=owner_logs_in, daemon=True)
    try:
        thread.start()
        outcomes = flood(target.port, sources("127.0.38", ADDRESSES), "PLAIN", guess, classify,
                         seconds)  # fmt: skip
    finally:
        stop.set()
        thread.join(30)
        target.stop()
    return Measured(outcomes.counts["checked"], outcomes.counts["throttled"], outcomes.seconds, sum(owner), len(owner))

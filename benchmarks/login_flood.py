"""What ``abuse_kid_flood`` and ``abuse_user_guesses`` share: a ``kafkaguard serve`` target with a config of its own
(this tree's code, or the code before issue 36 through ``PYTHONPATH``), and a flood of failing SASL logins from
loopback source addresses.

The target logs at INFO to a file (``JWKS refresh of … complete`` lines count a ``file:`` JWKS's reloads, in the
code before as in this tree), and its users are added with its own ``kafkaguard users add`` (the store's schema is
the target code's). Settings are keys both codes know, so the same config starts both.

A flood is ``workers`` asyncio tasks, each bound to its own source address (127.0.x.y: Linux routes 127.0.0.0/8 to
the loopback device), each opening a connection, sending SaslHandshake + one SaslAuthenticate and reading the
answer, again and again until the window ends: one login in flight per address, each the moment the last was
answered. The server answers a failure after ``auth_failure_delay_ms`` (Kafka's 100 ms), the same for both codes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from benchmarks.bench_abuse import HOST, RawConn, free_port_pair, listening, open_conn

START_TIMEOUT_S = 60.0
#: How a throttled answer starts (this tree: any mechanism; the code before: PLAIN's per-address budget).
THROTTLED = "Authentication failed: Too many failed logins"


@dataclass
class LoginTarget:
    """A running ``kafkaguard serve`` (``stop`` ends it)."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def log_lines(self, needle: str) -> int:
        return sum(needle in line for line in self.log.read_text(errors="replace").splitlines())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_target(
    executable: str,
    pythonpath: str | None,
    directory: Path,
    settings: dict[str, Any],
    users: Sequence[tuple[str, str]] = (),
) -> LoginTarget:
    """``kafkaguard serve`` on a free port with ``settings`` (``PORT`` in a listener is the port), ``users`` added
    first; the code at ``pythonpath`` when given."""
    directory.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    data_dir = directory / "data"
    for user, password in users:
        subprocess.run([executable, "users", "add", user, "--password", password, "--data-dir", str(data_dir)],
                       env=env, capture_output=True, check=True, timeout=120)  # fmt: skip
    port = free_port_pair(0)
    config = directory / "kafkaguard.yaml"
    listeners = [listener.replace("PORT", str(port)) for listener in settings.get("listeners", [])]
    config.write_text(json.dumps(settings | {"listeners": listeners}))
    log = directory / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([executable, "serve", "--data-dir", str(data_dir), "--config", str(config),
                                    "--log-level", "INFO"], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    target = LoginTarget(process, port, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not listening(port):
        if process.poll() is not None or time.monotonic() > deadline:
            target.stop()
            raise RuntimeError(f"kafkaguard serve did not start; its log:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)  # polling for the listener, bounded by the deadline
    return target


@dataclass
class Outcomes:
    """How the flood's logins ended: ``counts[kind]`` where kind is what ``classify`` said of the answer."""

    counts: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def per_minute(self, kind: str) -> float:
        return self.counts[kind] * 60 / self.seconds if self.seconds else 0.0


async def sasl_once(source: str, port: int, mechanism: str, auth_bytes: bytes) -> tuple[int, bytes, str | None]:
    """One login on a new connection: (SaslAuthenticate's error code, its auth bytes, its error message)."""
    conn: RawConn = await open_conn(RawConn, source, port)
    try:
        handshake = await conn.request(SaslHandshakeRequest(mechanism=mechanism))
        if handshake.error_code != 0:
            return int(handshake.error_code), b"", "handshake refused"
        answer = await conn.request(SaslAuthenticateRequest(auth_bytes=auth_bytes))
        return int(answer.error_code), bytes(answer.auth_bytes), answer.error_message
    finally:
        conn.close()


def flood(
    port: int,
    sources: Sequence[str],
    mechanism: str,
    message: Callable[[int], bytes],
    classify: Callable[[int, bytes, str | None], str],
    seconds: float,
) -> Outcomes:
    """Logins from every source at once for ``seconds``: ``message(n)`` is the n-th login's token (n over all
    sources), ``classify`` names each answer (connection errors are ``error``)."""
    outcomes = Outcomes()
    numbers = iter(range(10**9))

    async def worker(source: str, stop_at: float) -> None:
        while time.monotonic() < stop_at:
            try:
                async with asyncio.timeout(30):
                    answer = await sasl_once(source, port, mechanism, message(next(numbers)))
                outcomes.counts[classify(*answer)] += 1
            except (OSError, TimeoutError):
                outcomes.counts["error"] += 1
                await asyncio.sleep(0.05)  # the server refused or closed: not a busy loop

    async def run() -> None:
        started = time.monotonic()
        await asyncio.gather(*(worker(source, started + seconds) for source in sources))
        outcomes.seconds = time.monotonic() - started

    asyncio.run(run())
    return outcomes


def sources(prefix: str, count: int) -> list[str]:
    """``count`` loopback source addresses ``prefix``.1 …"""
    assert prefix.startswith("127.")
    return [f"{prefix}.{number}" for number in range(1, count + 1)]


__all__ = ["HOST", "THROTTLED", "LoginTarget", "Outcomes", "flood", "sasl_once", "sources", "start_target"]

"""Issue 36 item 1: changes refused by authorization in the management history, and what recording them costs.

Against a fresh ``kafkaguard serve`` (with the console) per code — this tree, and the code before issue 36 — a user
without any ACL (``attacker``):

* **visibility**: one refused change through each door (CreateAcls, DeleteAcls, AlterUserScramCredentials,
  AlterClientQuotas, CreateTopics, DeleteTopics on the wire; ``POST /api/acls`` on the console), then the doors
  whose refusal is in the store's history (read straight from SQLite, the same for both codes);
* **the flood**: the attacker sends CreateAcls with 10,000 bindings back to back on one connection for the window,
  while a super user creates one ACL every 50 ms on another; then the history rows the flood wrote (goal: at most
  ``refused_changes_burst`` + ``refused_changes_per_minute`` × the window, 100 + 100/min by default), the super
  user's CreateAcls latency (goal: p99 at most twice the code before's, or within 5 ms of it) and the attacker's
  answers (requests answered, p50: what recording adds to a refusal).

Run: ``.venv/bin/python -m benchmarks.bench_abuse --only refused-history --target serve --no-write`` (``--quick``:
a 5 s window instead of 20 s).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.abuse_findings import FindingContext, FindingRow
from benchmarks.bench_server import pct
from tests.server.refused_requests import (
    alter_quotas,
    alter_scram,
    create_acls,
    create_topics,
    delete_acls,
    delete_topics,
)
from tests.wire import Wire, decode_response, encode_request, frame

HOST = "127.0.0.1"
ADMIN, ADMIN_PASSWORD = "admin", "admin-bench-pw"
ATTACKER, ATTACKER_PASSWORD = "attacker", "attacker-bench-pw"
FLOOD_ITEMS = 10_000
ADMIN_INTERVAL_S = 0.05
START_TIMEOUT_S = 60.0
#: The defaults of refused_changes_burst and refused_changes_per_minute (``config``).
BURST, PER_MINUTE = 100, 100.0
DOORS = ("CreateAcls", "DeleteAcls", "AlterUserScramCredentials", "AlterClientQuotas", "CreateTopics",
         "DeleteTopics", "POST /api/acls")  # fmt: skip


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((HOST, port)) == 0


@dataclass
class _Serve:
    """``kafkaguard serve`` with the console on a fresh data directory, run by ``pythonpath``'s code."""

    context: FindingContext
    label: str
    pythonpath: str | None
    port: int = field(default_factory=_free_port)
    http_port: int = field(default_factory=_free_port)

    def __post_init__(self) -> None:
        self.data_dir = self.context.workdir / f"refused-{self.label}-{uuid.uuid4().hex[:6]}"
        env = self.env()
        for user, password in ((ADMIN, ADMIN_PASSWORD), (ATTACKER, ATTACKER_PASSWORD)):
            subprocess.run([self.context.executable, "users", "add", user, "--password", password, "--data-dir",
                            str(self.data_dir)], env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
        self.log = self.context.workdir / f"refused-{self.label}.log"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [self.context.executable, "serve", "--data-dir", str(self.data_dir), "--listener",
                 f"SASL_PLAINTEXT://{HOST}:{self.port}", "--super-users", f"User:{ADMIN}", "--http-listener",
                 f"{HOST}:{self.http_port}", "--log-level", "WARNING"],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (_listening(self.port) and _listening(self.http_port)):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"kafkaguard serve ({self.label}) did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)  # polling for the listeners, bounded by the deadline

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env

    def wire(self, user: str, password: str) -> Wire:
        wire = Wire((HOST, self.port), timeout=120)
        wire.login(user, password)
        return wire

    def refused_rows(self) -> int:
        """The attacker's rows in the management history, read from SQLite (the same table in both codes)."""
        with sqlite3.connect(self.data_dir / "kafkaguard.db") as db:
            (count,) = db.execute(
                "SELECT count(*) FROM management_events WHERE actor_principal = ?", (f"User:{ATTACKER}",)
            ).fetchone()
        return int(count)

    def metrics(self) -> str:
        with httpx.Client(base_url=f"http://{HOST}:{self.http_port}", timeout=30) as rest:
            return rest.get("/metrics").text

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _visible_doors(serve: _Serve) -> int:
    """One refused change per door; the doors whose refusal the history has."""
    seen = 0
    for door in DOORS:
        before = serve.refused_rows()
        name = f"bench-{uuid.uuid4().hex[:8]}"
        if door == "POST /api/acls":
            binding = {"resource_type": "TOPIC", "resource_name": name, "principal": "User:x", "operation": "READ",
                       "permission_type": "ALLOW"}  # fmt: skip
            with httpx.Client(base_url=f"http://{HOST}:{serve.http_port}", auth=(ATTACKER, ATTACKER_PASSWORD),
                              timeout=30) as rest:  # fmt: skip
                assert rest.post("/api/acls", json=binding).status_code == 403
        else:
            requests: dict[str, Any] = {
                "CreateAcls": create_acls(name), "DeleteAcls": delete_acls(name),
                "AlterClientQuotas": alter_quotas(name), "AlterUserScramCredentials": alter_scram(name, f"{name}-new"),
                "CreateTopics": create_topics(name), "DeleteTopics": delete_topics(name),
            }  # fmt: skip
            with serve.wire(ATTACKER, ATTACKER_PASSWORD) as wire:
                wire.request(requests[door])
        seen += serve.refused_rows() > before
    return seen


@dataclass
class _Flood:
    attacker_ms: list[float] = field(default_factory=list)
    admin_ms: list[float] = field(default_factory=list)
    admin_errors: int = 0


def _flood(serve: _Serve, seconds: float) -> _Flood:
    """The attacker's 10,000-binding CreateAcls back to back, beside a super user's one-ACL CreateAcls every 50 ms."""
    result = _Flood()
    stop = threading.Event()
    request = create_acls(*(f"flood-{i}" for i in range(FLOOD_ITEMS)))
    payload = encode_request(request, 0)
    api_key, version = type(request).__api_key__, type(request).__version__

    def attack() -> None:
        with serve.wire(ATTACKER, ATTACKER_PASSWORD) as wire:
            correlation = 0
            while not stop.is_set():
                correlation += 1
                framed = bytearray(frame(payload))
                framed[8:12] = correlation.to_bytes(4, "big")
                started = time.perf_counter()
                wire.send_raw(bytes(framed))
                answer = wire.recv_frame()
                assert answer is not None and decode_response(answer, api_key, version)[0] == correlation
                result.attacker_ms.append((time.perf_counter() - started) * 1000)

    def administer() -> None:
        with serve.wire(ADMIN, ADMIN_PASSWORD) as wire:
            next_at = time.perf_counter()
            while not stop.is_set():
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                started = time.perf_counter()
                next_at = started + ADMIN_INTERVAL_S
                answer = wire.request(create_acls(f"admin-{uuid.uuid4().hex}", principal="User:someone"))
                result.admin_ms.append((time.perf_counter() - started) * 1000)
                result.admin_errors += answer.results[0].error_code != 0

    threads = [threading.Thread(target=attack, daemon=True), threading.Thread(target=administer, daemon=True)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(120)
    return result


@dataclass
class _Measured:
    doors: int
    flood: _Flood
    rows: int
    metrics: str


def _measure(context: FindingContext, label: str, pythonpath: str | None, seconds: float) -> _Measured:
    serve = _Serve(context, label, pythonpath)
    try:
        doors = _visible_doors(serve)
        before_flood = serve.refused_rows()
        flood = _flood(serve, seconds)
        return _Measured(doors, flood, serve.refused_rows() - before_flood, serve.metrics())
    finally:
        serve.stop()


def _latency(values: list[float]) -> str:
    ordered = sorted(values)
    return f"p50 {pct(ordered, 0.5):.1f} ms, p99 {pct(ordered, 0.99):.1f} ms ({len(ordered)} requests)"


def _metric(text: str, outcome: str) -> str:
    prefix = f'kafkaguard_refused_changes_total{{outcome="{outcome}"}} '
    return next((f"{float(line[len(prefix) :]):,.0f}" for line in text.splitlines() if line.startswith(prefix)), "-")


def run(context: FindingContext) -> list[FindingRow]:
    seconds = 5.0 if context.quick else 20.0
    before = _measure(context, "before", context.before_pythonpath, seconds) if context.before_pythonpath else None
    after = _measure(context, "after", None, seconds)

    def cell(of: Callable[[_Measured], str]) -> str:
        return of(before) if before is not None else "not measured: no before tree"

    bound = BURST + int(PER_MINUTE * seconds / 60)
    p99 = pct(sorted(after.flood.admin_ms), 0.99)
    p99_before = pct(sorted(before.flood.admin_ms), 0.99) if before is not None else float("nan")
    admin_met = before is None or p99 <= max(2 * p99_before, p99_before + 5.0)
    requests = len(after.flood.attacker_ms)
    counted = (f"{after.rows} rows for {requests} requests × {FLOOD_ITEMS} items; metric: recorded "
               f"{_metric(after.metrics, 'recorded')}, summarized {_metric(after.metrics, 'summarized')}, rate_limited "
               f"{_metric(after.metrics, 'rate_limited')}")  # fmt: skip
    flooded = f"a {seconds:g} s flood of 10k-item refused CreateAcls writes ≤ {bound} rows"
    failed = f", {after.flood.admin_errors} failed" if after.flood.admin_errors else ""
    return [
        FindingRow("refused-history", "serve", cell(lambda m: f"{m.doors}/{len(DOORS)} doors"),
                   f"{after.doors}/{len(DOORS)} doors", "a refused change of every door in the history",
                   after.doors == len(DOORS)),
        FindingRow("refused-history", "serve",
                   cell(lambda m: f"{m.rows} rows for {len(m.flood.attacker_ms)} requests × {FLOOD_ITEMS} items"),
                   counted, flooded, after.rows <= bound),
        FindingRow("refused-history", "serve", cell(lambda m: _latency(m.flood.admin_ms)),
                   _latency(after.flood.admin_ms) + failed,
                   "a super user's CreateAcls during the flood: p99 ≤ 2× before (or +5 ms)",
                   admin_met and after.flood.admin_errors == 0),
        FindingRow("refused-history", "serve", cell(lambda m: _latency(m.flood.attacker_ms)),
                   _latency(after.flood.attacker_ms), "the attacker's refused CreateAcls answered throughout (no goal "
                   "on its speed: what recording adds)", requests > 0),
    ]  # fmt: skip

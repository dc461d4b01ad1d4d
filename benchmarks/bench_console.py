"""Console login flood vs the Kafka listener in the same process (``kafkaguard serve --http-listener``).

Run: ``.venv/bin/python -m benchmarks.bench_console [--seconds 10] [--no-write]``.

``kafkaguard serve`` runs as a subprocess with a SASL_PLAINTEXT Kafka listener and the console on loopback, pinned
to one core; this process and the flood's process share the other core. A Kafka client of our own (kio-encoded
frames, SCRAM-SHA-256 login; ``benchmarks.bench_server``'s client) sends CreateAcls of a fresh ACL, one at a time,
and deletes it again untimed, so the store stays the same size; the latency of each CreateAcls is from writing the
request to the last byte of its response. It is measured twice in one run:

1. quiet: nothing else talks to the server;
2. flooded: meanwhile ``FLOOD_CLIENTS`` HTTP/1.1 clients (one keep-alive connection each, a pre-encoded request,
   responses read by status line and Content-Length: the least client CPU per request) send ``GET /api/acls`` with
   a wrong Basic password for a SCRAM-SHA-512 user of 16384 iterations (the most expensive check), each the moment
   its last answer arrives, for a fixed duration: the flood starts a second before the window and ends after it.
   The flood process runs at nice 19, so that on the shared client core it delays the latency probe as little as
   possible; the server's core is left alone.

Reported: CreateAcls p50/p90/p99/p99.9/max in each phase, flooded p99 ÷ quiet p99 (target ≤ 2×), the server's CPU
over each window, and what the console answered the flood (401, 429, other; attempts/s), with its own
``kafkaguard_console_logins_total`` counters read from ``/metrics`` afterwards as a cross-check.

``--server-pythonpath DIR`` runs the server (and prepares its store) with another ``src/`` first on the path, to
compare with an older checkout (``git archive HEAD src | tar -x -C /tmp/old``; run this module with the same
``PYTHONPATH``); such a run never writes docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import multiprocessing
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection as PipeEnd
from pathlib import Path

import httpx
from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsRequest

from benchmarks.bench_server import (
    HOST,
    PASSWORD,
    USER,
    CachedScramClient,
    api_versions_request,
    connect,
    creation,
    exact_filter,
    pct,
    prepare_data_dir,
    rt_binding,
    wait_for_quiet,
)
from benchmarks.report import write_section
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR

KAFKAGUARD = str(Path(sys.executable).parent / "kafkaguard")
FLOOD_CLIENTS = 32
#: The flooded user: the costliest check a console login can need (SCRAM-SHA-512, the most iterations allowed).
VICTIM, VICTIM_ITERATIONS = "victim", 16384
#: A bound on each flood client's loop, whatever the clock says.
MAX_REQUESTS_PER_CLIENT = 200_000
TARGET_RATIO = 2.0


# ------------------------------------------------------------------------------------------------ the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """``kafkaguard serve --http-listener`` as a subprocess; always stopped by ``close``."""

    process: subprocess.Popen[bytes]
    kafka_port: int
    url: str
    log: Path

    @classmethod
    def start(cls, data_dir: Path, cpu: int | None, pythonpath: str | None) -> Server:
        kafka_port, http_port = free_port(), free_port()
        args = [KAFKAGUARD, "serve", "--data-dir", str(data_dir), "--super-users", "User:admin",
                "--listener", f"SASL_PLAINTEXT://{HOST}:{kafka_port}", "--http-listener", f"{HOST}:{http_port}",
                "--log-level", "WARNING"]  # fmt: skip
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        log = data_dir.parent / "server.log"

        def pin() -> None:  # in the child before exec: every thread the server starts inherits the core
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        with log.open("wb") as out:
            process = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=pin)
        server = cls(process, kafka_port, f"http://{HOST}:{http_port}", log)
        try:
            server.wait_ready()
        except BaseException:
            server.close()
            raise
        return server

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kafkaguard serve exited: {self.log.read_text()}")
            with contextlib.suppress(httpx.TransportError, OSError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    socket.create_connection((HOST, self.kafka_port), timeout=1).close()
                    return
            time.sleep(0.1)
        raise RuntimeError(f"kafkaguard serve did not become ready: {self.log.read_text()}")

    def cpu_seconds(self) -> float:
        """User + system CPU of the server process, all threads (``/proc/<pid>/stat``)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def logins(self) -> dict[str, float]:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        found = re.findall(r'^kafkaguard_console_logins_total\{result="(\w+)"\} ([0-9.e+]+)$', text, re.MULTILINE)
        return {result: float(value) for result, value in found}

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def prepare(data_dir: Path) -> None:
    """bench_server's store (the bench user with CreateAcls/DeleteAcls rights, its ACLs) plus the flooded user."""
    services = prepare_data_dir(data_dir)
    try:
        result = services.credentials.upsert_password(
            VICTIM, ScramMechanism.SCRAM_SHA_512, "the-real-password", VICTIM_ITERATIONS, actor=ACTOR
        )
        assert result.succeeded, result
    finally:
        services.close()


# ------------------------------------------------------------------------------------------------ the probe


async def probe(kafka_port: int, warmup: float, seconds: float, first_index: int) -> list[float]:
    """CreateAcls latencies (ms) over ``seconds`` after ``warmup``: one connection, one request at a time, each
    ACL deleted again (untimed) before the next is created."""
    conn = await connect(kafka_port)
    await conn.request(api_versions_request())
    await CachedScramClient().login(conn, ScramMechanism.SCRAM_SHA_256, USER, PASSWORD)
    latencies: list[float] = []
    start = time.perf_counter()
    index = first_index
    try:
        while (now := time.perf_counter()) < start + warmup + seconds:
            binding = rt_binding(index)
            index += 1
            t0 = time.perf_counter()
            created = await conn.request(CreateAclsRequest(creations=(creation(binding),)))
            elapsed = conn.last_frame_at - t0
            deleted = await conn.request(DeleteAclsRequest(filters=(exact_filter(binding),)))
            if created.results[0].error_code != 0 or len(deleted.filter_results[0].matching_acls) != 1:
                raise RuntimeError(f"CreateAcls/DeleteAcls failed: {created} {deleted}")
            if now >= start + warmup:
                latencies.append(elapsed * 1000)
    finally:
        conn.close()
    return sorted(latencies)


# ------------------------------------------------------------------------------------------------ the flood


def _flood_child(url: str, seconds: float, cpu: int | None, results: PipeEnd) -> None:
    """Entry point of the flood process: nice 19 on the client core, then FLOOD_CLIENTS clients for ``seconds``."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    os.nice(19)
    statuses, elapsed = asyncio.run(_flood(url, seconds))
    results.send((dict(statuses), elapsed))


async def _flood(url: str, seconds: float) -> tuple[Counter[int], float]:
    statuses: Counter[int] = Counter()
    host, port = httpx.URL(url).host, httpx.URL(url).port or 80
    token = base64.b64encode(f"{VICTIM}:a-wrong-password".encode()).decode()
    request = (
        f"GET /api/acls HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Basic {token}\r\n"
        "Accept: application/json\r\n\r\n"
    ).encode()
    stop_at = time.perf_counter() + seconds

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for _ in range(MAX_REQUESTS_PER_CLIENT):
                if time.perf_counter() >= stop_at:
                    return
                writer.write(request)
                statuses[await _read_response(reader)] += 1
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(FLOOD_CLIENTS)))
    return statuses, time.perf_counter() - start


async def _read_response(reader: asyncio.StreamReader) -> int:
    """One HTTP/1.1 response with a Content-Length body (what the console sends); its status code."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in head if line.lower().startswith("content-length:"))
    await reader.readexactly(length)
    return int(head[0].split()[1])


class Flood:
    """The flood in a child process; ``result`` waits for it and returns (status counts, seconds)."""

    def __init__(self, url: str, seconds: float, cpu: int | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._results, child_end = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_flood_child, args=(url, seconds, cpu, child_end), daemon=True)
        self.process.start()
        child_end.close()

    def result(self, timeout: float) -> tuple[dict[int, int], float]:
        try:
            if not self._results.poll(timeout):
                raise TimeoutError("the flood process did not report")
            statuses, elapsed = self._results.recv()
            return statuses, float(elapsed)
        finally:
            self.process.join(10)
            if self.process.is_alive():
                self.process.kill()


# ------------------------------------------------------------------------------------------------ measuring


@dataclass
class Phase:
    name: str
    latencies_ms: list[float]
    server_cpu: float  # share of one core over the window
    statuses: dict[int, int] | None = None
    flood_seconds: float = 0.0

    @property
    def p50(self) -> float:
        return pct(self.latencies_ms, 0.50)

    @property
    def p99(self) -> float:
        return pct(self.latencies_ms, 0.99)

    @property
    def p90(self) -> float:
        return pct(self.latencies_ms, 0.90)

    @property
    def p999(self) -> float:
        return pct(self.latencies_ms, 0.999)

    @property
    def attempts(self) -> int:
        return sum((self.statuses or {}).values())


def measure(server: Server, name: str, warmup: float, seconds: float, first_index: int) -> Phase:
    cpu0, wall0 = server.cpu_seconds(), time.perf_counter()
    latencies = asyncio.run(probe(server.kafka_port, warmup, seconds, first_index))
    cpu = (server.cpu_seconds() - cpu0) / (time.perf_counter() - wall0)
    return Phase(name, latencies, cpu)


def run(server: Server, client_cpu: int | None, seconds: float) -> tuple[Phase, Phase, dict[str, float]]:
    wait_for_quiet(30)
    quiet = measure(server, "quiet", 1.0, seconds, 0)
    wait_for_quiet(30)
    before = server.logins()
    flood = Flood(server.url, seconds + 3.0, client_cpu)
    time.sleep(1.0)  # the flood is under way before the window opens (and ends after it closes)
    flooded = measure(server, "flooded", 0.5, seconds, 1_000_000)
    flooded.statuses, flooded.flood_seconds = flood.result(timeout=seconds + 60)
    after = server.logins()
    counted = {result: after.get(result, 0.0) - before.get(result, 0.0) for result in after}
    return quiet, flooded, counted


# ------------------------------------------------------------------------------------------------ report


def _latencies(phase: Phase) -> str:
    values = (phase.p50, phase.p90, phase.p99, phase.p999, phase.latencies_ms[-1])
    return " | ".join(f"**{v:.2f} ms**" if i == 2 else f"{v:.2f} ms" for i, v in enumerate(values))


def http_parser(pythonpath: str | None) -> str:
    """The HTTP implementation uvicorn picks in the server process (``http="auto"``: httptools if importable)."""
    probe = [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('httptools') is not None)"]
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None
    found = subprocess.run(probe, capture_output=True, text=True, env=env, check=True, timeout=30).stdout.strip()
    return "httptools" if found == "True" else "h11 (pure Python; httptools is not installed)"


def render(quiet: Phase, flooded: Phase, counted: dict[str, float], affinity: str, seconds: float, parser: str) -> str:
    ratio = flooded.p99 / quiet.p99
    statuses = flooded.statuses or {}
    other = flooded.attempts - statuses.get(401, 0) - statuses.get(429, 0)
    rate = flooded.attempts / flooded.flood_seconds
    verdict = "✓" if ratio <= TARGET_RATIO else "✗"
    lines = [
        "## Console login flood vs the Kafka listener (`benchmarks/bench_console.py`)",
        "",
        f"`kafkaguard serve --http-listener` as a subprocess ({affinity}): a SASL_PLAINTEXT Kafka listener and the "
        "console in one process and event loop, default settings (1 PBKDF2 thread, 4 derivations in flight, 10 "
        "failed logins per client address then 30 a minute, failed logins answered after 100 ms). Probe: one "
        "Kafka connection (SCRAM-SHA-256) sending CreateAcls of a fresh ACL one at a time, each deleted again "
        f"untimed; {seconds:g} s windows. Flood: {FLOOD_CLIENTS} HTTP/1.1 clients (one keep-alive connection each, "
        "a pre-encoded request; a process of their own at nice 19) sending `GET /api/acls` with a wrong Basic "
        f"password for a SCRAM-SHA-512 user of {VICTIM_ITERATIONS} iterations, each the moment its last answer "
        "arrives, from 1 s before the window until after it; all from 127.0.0.1, so one client address. Server CPU: "
        "share of one core over the window (`/proc/<pid>/stat`, all threads). uvicorn's HTTP parser: "
        f"{parser}.",
        "",
        "| phase | CreateAcls p50 | p90 | **p99** | p99.9 | max | samples | server CPU | console answered the flood |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| quiet | {_latencies(quiet)} | {len(quiet.latencies_ms):,} | {quiet.server_cpu:.0%} | – |",
        f"| flooded | {_latencies(flooded)} | {len(flooded.latencies_ms):,} | "
        f"{flooded.server_cpu:.0%} | {flooded.attempts:,} login attempts in {flooded.flood_seconds:.1f} s = "
        f"{rate:,.0f}/s: {statuses.get(429, 0):,} × 429, {statuses.get(401, 0):,} × 401, {other:,} other |",
        "",
        f"**Flooded p99 ÷ quiet p99 = {ratio:.2f}×** (target ≤ {TARGET_RATIO:g}×) {verdict}. The console's own "
        f"counters over the flood (`kafkaguard_console_logins_total`): "
        + ", ".join(f"{result} +{value:,.0f}" for result, value in sorted(counted.items()))
        + ".",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each measured window")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument(
        "--server-pythonpath", help="PYTHONPATH for the server process (to compare another checkout's src/)"
    )
    args = parser.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    server_cpu, client_cpu = (cores[-1], cores[0]) if len(cores) >= 2 else (None, None)
    previous = set(cores)
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-console-"))
    server: Server | None = None
    try:
        prepare(tmp / "data")
        server = Server.start(tmp / "data", server_cpu, args.server_pythonpath)
        if client_cpu is not None:
            os.sched_setaffinity(0, {client_cpu})
            affinity = f"pinned to CPU {server_cpu}; the probe and the flood to CPU {client_cpu}"
        else:
            affinity = "unpinned: fewer than two usable cores"
        quiet, flooded, counted = run(server, client_cpu, args.seconds)
    finally:
        if server is not None:
            server.close()
        if previous:
            os.sched_setaffinity(0, previous)
        shutil.rmtree(tmp, ignore_errors=True)
    markdown = render(quiet, flooded, counted, affinity, args.seconds, http_parser(args.server_pythonpath))
    print(markdown)
    if not args.no_write and not args.server_pythonpath:
        write_section("console", markdown)


if __name__ == "__main__":
    main()

"""The workers phase (issue 39): one CPU-bound proxy workload against ``kafkaguard proxy --workers 1`` and
``--workers 2``, both running for the whole run, measured in the same rounds on the same machine.

Run: ``.venv/bin/python -m benchmarks.bench_logins --workers-phase [--rounds N] [--seconds S] [--no-write]`` (needs
Java 17+ and a Kafka distribution, as ``bench_logins``). It writes the ``workers-issue-39`` section of
docs/benchmarks.md (not with ``--quick`` or ``--no-write``).

**The workloads, and which one the proxy's CPU limits.** Both proxies run in service-account mode in front of one
Kafka 3.9 broker (upstream SASL_PLAINTEXT, SCRAM-SHA-512 as ``admin``), on a SASL_PLAINTEXT listener of their own:

* *pipelined ApiVersions* (the proxy-bound one, the phase's result): ``CONNECTIONS`` connections logged in with
  SCRAM-SHA-512 before the window, each keeping ``DEPTH`` ApiVersions v3 requests in flight. The proxy answers
  ApiVersions itself (the versions it negotiated with the broker at start), so the broker is not in the loop, and a
  request costs the proxy its whole fixed per-request path (read, frame, header decode, dispatch, answer, write).
  The client sends one pre-encoded request and counts the answers by their 4-byte sizes alone, without decoding
  them, and writes as many copies as it read: a few microseconds a request against the proxy's tens, so here the
  proxy, not the load generator, is what runs out of CPU;
* *SCRAM-SHA-512 logins* (the counterexample): 50 clients, each login a fresh connection (connect, ApiVersions,
  SaslHandshake, two SaslAuthenticate, close), as ``bench_logins``. The proxy decides them itself (no broker work),
  but our client's login costs about what the proxy's does (``bench_logins``: ~0.6 ms each, the generator at 80–98%
  of its core), so on two shared cores it cannot show what a second worker buys: it shows the machine's bound.

Many small Produce requests were not chosen: each goes to the broker, whose JVM then takes more of the same two
cores per request than the proxy does (``bench_proxy``'s CPU table), so the broker, not the proxy, would set the
rate.

**What this machine allows.** Two cores, shared by the proxy's workers, the load generator (one asyncio process)
and the broker (idle in these windows: its CPU is reported), and by other work on the machine (measured before each
round). Nothing is pinned: the workers need both cores. The cost model per core: while the proxy is the bottleneck,

    rate(N workers) ≈ min(N, cores available to the proxy) ÷ p,   cores available = C − rate × (c + b)

with ``p``, ``c`` and ``b`` the proxy's, the generator's and the broker's CPU seconds per unit of work and ``C`` the
machine's cores. One worker gets at most one core (rate ≤ 1/p); two workers share the machine with the generator,
so ``rate(2) ≤ C ÷ (p + c + b)`` and the gain is at most ``2p ÷ (p + c + b)``: below 2 by the generator's share, and
about 1 for logins, where ``c ≈ p``. The report prints the model's ratio, each rate from its own windows' CPU a
unit (c falls as more answers arrive per read), next to the measured one. For an N-core host the plan is on paper
(docs/benchmarks.md, "Workers: the cost model per core"): the generator elsewhere, ``rate ≈ N ÷ p`` until the
upstream or the network is the limit.

**Metering.** Per window: the proxy's CPU is user + system of its whole process tree (``/proc/<pid>/stat``, 10 ms
ticks) — with one worker the process itself (``--workers 1`` runs no supervisor), with two the supervisor and both
workers, summed, and each worker's share reported (SO_REUSEPORT spreads connections by a hash of their addresses, so
with few long connections one worker can get more than half); the generator's CPU (``time.process_time``); the
broker's; the machine's busy cores (``/proc/stat``), and, less those three, what other processes took. Rounds: after
a warm-up of every (workload, target), in each round every workload on both targets back to back, which target goes
first alternating; medians over rounds, and the ratio 2-workers ÷ 1-worker of each round.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_logins import HOST, PASSWORD, USER, Plan, Scenario, drive
from benchmarks.bench_proxy import (
    CLK_TCK,
    ProxyProcess,
    _free_port_pair,
    _stat_fields,
    kafkaguard_executable,
    prepare_proxy_data_dir,
    process_tree,
)
from benchmarks.bench_server import (
    CLIENT_ID,
    CachedScramClient,
    KafkaConn,
    api_versions_request,
    wait_for_quiet,
)
from kafkaguard.scram import ScramMechanism
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.wire import encode_request, frame

#: The worker counts compared (the ratio is the second's rate over the first's).
WORKERS = (1, 2)
#: Logged-in connections of the pipelined workload: enough that SO_REUSEPORT's hash spreads them near evenly.
CONNECTIONS = 64
#: ApiVersions requests in flight on each connection (a window of requests, as a client with many in flight).
DEPTH = 16
PIPELINED = "pipelined ApiVersions (proxy-bound)"
LOGINS = "SCRAM-SHA-512 logins, a connection each"
WORKLOADS = (PIPELINED, LOGINS)
UNITS = {PIPELINED: "request", LOGINS: "login"}
_SIZE = struct.Struct(">i")

# ------------------------------------------------------------------------------------------------ the proxies


@dataclass
class WorkersTarget:
    """A ``kafkaguard proxy --workers N`` on its own SASL_PLAINTEXT port."""

    workers: int
    process: ProxyProcess
    port: int

    @property
    def name(self) -> str:
        return f"workers {self.workers}"


def start_proxy(workers: int, tmp: Path, broker: KafkaBroker) -> WorkersTarget:
    """``kafkaguard proxy --workers N`` in service-account mode in front of ``broker``, the bench user's SCRAM
    credentials in a fresh data directory; returns once each of its N workers listens on the port."""
    workdir = tmp / f"proxy-workers-{workers}"
    workdir.mkdir()
    prepare_proxy_data_dir(workdir / "data")
    password_file = workdir / "upstream-password"
    password_file.write_text(ADMIN_PASSWORD)
    password_file.chmod(0o600)
    port = _free_port_pair(2)  # P+2: the broker's node port (node id 1), fixed as N workers need
    config = {
        "data_dir": str(workdir / "data"),
        "listeners": [f"SASL_PLAINTEXT://{HOST}:{port}"],
        "advertised_host": HOST,
        "super_users": f"User:{ADMIN}",
        "sasl_mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"],
        "upstream": broker.bootstrap,
        "upstream_security_protocol": "SASL_PLAINTEXT",
        "upstream_sasl_mechanism": "SCRAM-SHA-512",
        "upstream_user": ADMIN,
        "upstream_password_file": str(password_file),
        # 50 clients on 127.0.0.1 stand for many: lift the per-address creation rate (100/s by default)
        "max_connection_creation_rate_per_ip": 1_000_000.0,
        "workers": workers,
    }
    path = workdir / "kafkaguard.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    process = ProxyProcess([kafkaguard_executable(None), "proxy", "--config", str(path)], workdir, [port])
    deadline = time.monotonic() + 60.0
    while listeners_on(port) < workers:  # the first worker listening is not all of them
        if time.monotonic() > deadline:
            process.stop()
            raise RuntimeError(f"proxy --workers {workers}: {listeners_on(port)} listening on {port} after 60 s")
        time.sleep(0.2)  # polling for the workers' listeners, bounded by the deadline
    return WorkersTarget(workers, process, port)


def listeners_on(port: int) -> int:
    """How many listening IPv4 TCP sockets have local port ``port`` (one per worker: SO_REUSEPORT)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
            count += 1
    return count


def tree_cpu(pid: int) -> dict[int, float]:
    """User + system CPU seconds of ``pid`` and of each of its descendants, by pid."""
    seconds = {}
    for member in process_tree(pid):
        try:
            fields = _stat_fields(member)
        except (OSError, ValueError, IndexError):
            continue  # gone between the walk and the read
        seconds[member] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return seconds


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far (``/proc/stat``'s first line)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


# ------------------------------------------------------------------------------------------------ the load


class PipelinedConn(KafkaConn):
    """A ``KafkaConn`` that, once ``start``ed, keeps ``depth`` copies of one pre-encoded request in flight and counts
    the answers by their sizes alone (no decoding: the load generator's cost a request stays a few microseconds),
    writing one copy for each answer read."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = 0
        self._pending = bytearray()
        self._request = b""
        self._counting = False
        self._in_flight = 0
        self._drained: asyncio.Future[None] | None = None

    def start(self, request: bytes, depth: int) -> None:
        assert self.transport is not None
        self._request, self._counting, self._in_flight = request, True, depth
        self.transport.write(request * depth)

    def data_received(self, data: bytes) -> None:
        if not self._counting:
            super().data_received(data)
            return
        pending = self._pending
        pending += data
        offset, answers, size = 0, 0, len(pending)
        while size - offset >= 4:
            end = offset + 4 + _SIZE.unpack_from(pending, offset)[0]
            if end > size:
                break
            offset, answers = end, answers + 1
        if offset:
            del pending[:offset]
        self.answered += answers
        if self._drained is None:
            if answers and self.transport is not None:
                self.transport.write(self._request * answers)
        else:
            self._in_flight -= answers
            if self._in_flight <= 0 and not self._drained.done():
                self._drained.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(ConnectionError("connection lost while draining"))

    async def drain(self, timeout: float) -> None:
        """Stop sending; wait for the answers still in flight."""
        self._drained = asyncio.get_running_loop().create_future()
        if self._in_flight <= 0:
            return
        await asyncio.wait_for(self._drained, timeout)


async def open_pipelined(port: int, scram: CachedScramClient, count: int) -> list[PipelinedConn]:
    """``count`` connections, each logged in (ApiVersions, SCRAM-SHA-512), in waves of 16 (the listen backlog)."""

    async def one() -> PipelinedConn:
        _transport, conn = await asyncio.get_running_loop().create_connection(PipelinedConn, HOST, port)
        await conn.request(api_versions_request())
        await scram.login(conn, ScramMechanism.SCRAM_SHA_512, USER, PASSWORD)
        return conn

    conns: list[PipelinedConn] = []
    for start in range(0, count, 16):
        conns += await asyncio.gather(*(one() for _ in range(min(16, count - start))))
    return conns


def logins_scenario(scram: CachedScramClient) -> Scenario:
    return Scenario(LOGINS, "sasl", None, lambda conn: scram.login(conn, ScramMechanism.SCRAM_SHA_512, USER, PASSWORD))


# ------------------------------------------------------------------------------------------------ measuring


@dataclass
class Window:
    """One workload on one target in one round: units of work done, and what each process used meanwhile."""

    workload: str
    workers: int
    round: int
    count: int
    seconds: float
    proxy_cpu_s: float  # the whole tree: the supervisor and every worker
    per_process_s: dict[int, float]  # by pid, the tree's root included
    client_cpu_s: float
    broker_cpu_s: float
    machine_cores: float  # busy cores of the whole machine over the window
    failures: int = 0

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def others_cores(self) -> float:
        """Cores the machine spent on processes other than the proxy, the generator and the broker in the window
        (other work on this shared machine: it takes from every term of the cost model)."""
        return max(0.0, self.machine_cores - (self.proxy_cpu_s + self.client_cpu_s + self.broker_cpu_s) / self.seconds)

    def per_unit_ms(self, cpu_s: float) -> float:
        return 1000 * cpu_s / max(self.count, 1)

    def worker_shares(self, root: int) -> list[float]:
        """Each worker's share of the workers' CPU (with one worker: the process itself, ``[1.0]``)."""
        workers = {pid: s for pid, s in self.per_process_s.items() if pid != root} or self.per_process_s
        total = sum(workers.values()) or 1.0
        return sorted(s / total for s in workers.values())


class Meter:
    """CPU of the proxy's tree, this process, the broker and the machine between ``__enter__`` and ``__exit__``."""

    def __init__(self, proxy_pid: int, broker_pid: int) -> None:
        self.proxy_pid, self.broker_pid = proxy_pid, broker_pid

    def __enter__(self) -> Meter:
        self._proxy = tree_cpu(self.proxy_pid)
        self._broker = sum(tree_cpu(self.broker_pid).values())
        self._client = time.process_time()
        self._machine = machine_busy()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._wall
        after = tree_cpu(self.proxy_pid)
        # a worker started in the window counts from 0; one that ended in it is lost (an undercount)
        self.per_process = {pid: s - self._proxy.get(pid, 0.0) for pid, s in after.items()}
        self.client = time.process_time() - self._client
        self.broker = sum(tree_cpu(self.broker_pid).values()) - self._broker
        busy, total = machine_busy()  # over every CPU: a share of the whole machine, times its cores
        self.machine_cores = (busy - self._machine[0]) / max(total - self._machine[1], 1) * (os.cpu_count() or 1)


async def measure_pipelined(target: WorkersTarget, round_: int, plan: Plan, broker_pid: int,
                            scram: CachedScramClient) -> Window:  # fmt: skip
    conns = await open_pipelined(target.port, scram, CONNECTIONS)
    request = frame(encode_request(api_versions_request(), 1, CLIENT_ID))
    try:
        for conn in conns:
            conn.start(request, DEPTH)
        await asyncio.sleep(plan.warmup)
        before = sum(conn.answered for conn in conns)
        with Meter(target.process.pid, broker_pid) as meter:
            await asyncio.sleep(plan.seconds)
            done = sum(conn.answered for conn in conns)
        await asyncio.gather(*(conn.drain(30.0) for conn in conns))
        if any(conn.lost.done() for conn in conns):
            raise RuntimeError(f"{PIPELINED} on {target.name}: the proxy closed a connection")
    finally:
        for conn in conns:
            conn.close()
    return Window(PIPELINED, target.workers, round_, done - before, meter.seconds, sum(meter.per_process.values()),
                  meter.per_process, meter.client, meter.broker, meter.machine_cores)  # fmt: skip


async def measure_logins(target: WorkersTarget, round_: int, plan: Plan, broker_pid: int,
                         scenario: Scenario) -> Window:  # fmt: skip
    await drive(target.port, scenario, plan.concurrency, plan.warmup)
    with Meter(target.process.pid, broker_pid) as meter:
        driven = await drive(target.port, scenario, plan.concurrency, plan.seconds)
    if driven.count == 0:
        raise RuntimeError(f"{LOGINS} on {target.name}: every login failed: {driven.failures[0]!r}")
    return Window(LOGINS, target.workers, round_, driven.count, meter.seconds, sum(meter.per_process.values()),
                  meter.per_process, meter.client, meter.broker, meter.machine_cores,
                  failures=len(driven.failures))  # fmt: skip


@dataclass
class WorkersOutcome:
    plan: Plan
    roots: dict[int, int]  # workers -> the proxy's pid (the supervisor's with several)
    windows: list[Window] = field(default_factory=list)
    quiet: list[float] = field(default_factory=list)

    def of(self, workload: str, workers: int) -> list[Window]:
        return [w for w in self.windows if w.workload == workload and w.workers == workers]


async def run(plan: Plan, targets: Sequence[WorkersTarget], broker_pid: int) -> WorkersOutcome:
    scram = CachedScramClient()
    scenario = logins_scenario(scram)
    outcome = WorkersOutcome(plan, {t.workers: t.process.pid for t in targets})

    async def one(workload: str, target: WorkersTarget, round_: int, warm: bool = False) -> Window:
        timing = Plan(plan.quick, plan.rounds, plan.first_warmup, 0.2, plan.first_warmup) if warm else plan
        if workload == PIPELINED:
            return await measure_pipelined(target, round_, timing, broker_pid, scram)
        return await measure_logins(target, round_, timing, broker_pid, scenario)

    _say("warm-up: every workload on both proxies")
    for workload in WORKLOADS:
        for target in targets:
            await one(workload, target, -1, warm=True)
    for round_ in range(plan.rounds):
        outcome.quiet.append(wait_for_quiet(2.0 if plan.quick else 20.0))
        _say(f"round {round_ + 1}/{plan.rounds} (other load {outcome.quiet[-1]:.2f} cores)")
        order = list(targets) if round_ % 2 == 0 else list(reversed(targets))
        for workload in WORKLOADS:
            for target in order:
                w = await one(workload, target, round_)
                outcome.windows.append(w)
                shares = " / ".join(f"{s:.0%}" for s in w.worker_shares(target.process.pid))
                _say(f"  {workload} / {target.name}: {w.rate:,.0f}/s, proxy {w.proxy_cpu_s / w.seconds:.2f} cores "
                     f"({w.per_unit_ms(w.proxy_cpu_s):.3f} ms/{UNITS[workload]}, workers {shares}), generator "
                     f"{w.client_cpu_s / w.seconds:.2f}, broker {w.broker_cpu_s / w.seconds:.2f}, machine "
                     f"{w.machine_cores:.2f} cores ({w.others_cores:.2f} other processes)"
                     + (f", {w.failures} FAILED" if w.failures else ""))  # fmt: skip
    return outcome


def _say(text: str) -> None:
    print(f"[bench_logins workers {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the report


def _median(values: Sequence[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


def model_rate(workers: int, p: float, c: float, b: float, cores: float) -> float:
    """The cost model's rate for ``workers`` workers on ``cores`` otherwise idle cores, from the CPU seconds per unit
    of the proxy (``p``), the load generator (``c``: one process, so at most one core) and the broker (``b``)."""
    return min(workers / p, cores / (p + c + b), 1 / c)


def per_unit(windows: Sequence[Window]) -> tuple[float, float, float]:
    """(p, c, b): the medians over ``windows`` of the proxy's, the generator's and the broker's CPU seconds a unit."""
    return (
        _median([w.proxy_cpu_s / w.count for w in windows]),
        _median([w.client_cpu_s / w.count for w in windows]),
        _median([w.broker_cpu_s / w.count for w in windows]),
    )


def model_ratio(one: Sequence[Window], two: Sequence[Window], workers: int, cores: float) -> float:
    """rate(``workers``) ÷ rate(1) by the cost model, each rate from its own windows' CPU a unit (the generator's
    cost a unit is not a constant: it falls as more answers arrive per read, so the 1-worker figure would
    understate what two workers leave it)."""
    return model_rate(workers, *per_unit(two), cores) / model_rate(1, *per_unit(one), cores)


def render(o: WorkersOutcome, cores: float) -> str:
    one, two = WORKERS
    rows, cost_rows = [], []
    for workload in WORKLOADS:
        a, b = o.of(workload, one), o.of(workload, two)
        unit = UNITS[workload]
        rate_a, rate_b = _median([w.rate for w in a]), _median([w.rate for w in b])
        per_round = [y.rate / x.rate for x, y in zip(a, b, strict=True)]
        balance = _median([min(w.worker_shares(o.roots[two])) for w in b])

        def cell(windows: Sequence[Window], attr: str) -> str:
            return f"{_median([w.per_unit_ms(getattr(w, attr)) for w in windows]):.3f}"

        def cores_of(windows: Sequence[Window], attr: str) -> str:
            return f"{_median([getattr(w, attr) / w.seconds for w in windows]):.2f}"

        rows.append(
            f"| {workload} | {rate_a:,.0f} | {rate_b:,.0f} | **{rate_b / rate_a:.2f}×** "
            f"| {', '.join(f'{r:.2f}' for r in per_round)} | {model_ratio(a, b, two, cores):.2f}× "
            f"| {cores_of(a, 'proxy_cpu_s')} / {cores_of(b, 'proxy_cpu_s')} "
            f"| {_median([w.machine_cores for w in a]):.2f} / {_median([w.machine_cores for w in b]):.2f} "
            f"| {_median([w.others_cores for w in a]):.2f} / {_median([w.others_cores for w in b]):.2f} "
            f"| {balance:.0%} | {sum(w.failures for w in a + b)} |"
        )
        per_core = 1 / per_unit(a)[0]
        cost_rows.append(
            f"| {workload} | {cell(a, 'proxy_cpu_s')} / {cell(b, 'proxy_cpu_s')} "
            f"| {cell(a, 'client_cpu_s')} / {cell(b, 'client_cpu_s')} | {cell(a, 'broker_cpu_s')} / "
            f"{cell(b, 'broker_cpu_s')} | {per_core:,.0f} {unit}s/s |"
        )
    plan = o.plan
    return "\n".join(
        [
            "## Workers: one proxy workload on `--workers 1` and `--workers 2` (`benchmarks/bench_logins.py "
            "--workers-phase`, issue 39)",
            "",
            "Run: `.venv/bin/python -m benchmarks.bench_logins --workers-phase [--rounds N] [--seconds S]`. What the "
            "workloads are and why the first is the proxy-bound one: the module's docstring "
            "(`benchmarks/workers_phase.py`); the cost model and the plan for an N-core host: the hand-written "
            "section after this one.",
            "",
            f"Two `kafkaguard proxy` in service-account mode in front of one Kafka 3.9 broker, one with `--workers "
            f"{one}` (one process, no supervisor), one with `--workers {two}` (a supervisor and two workers on one "
            "port, SO_REUSEPORT), both running the whole run. *Pipelined ApiVersions*: "
            f"{CONNECTIONS} connections logged in (SCRAM-SHA-512) before each window, {DEPTH} ApiVersions v3 in "
            "flight on each, answered by the proxy itself, counted by their sizes (not decoded). *Logins*: "
            f"{plan.concurrency} clients, each login a fresh connection (connect, ApiVersions, SaslHandshake, two "
            "SaslAuthenticate, close). Nothing pinned: the proxy's workers, the load generator (one asyncio process) "
            f"and the broker share this machine's {cores:g} cores. Each window {plan.seconds:g} s after "
            f"{plan.warmup:g} s of warm-up ({plan.first_warmup:g} s per workload and proxy before the first round); "
            f"{plan.rounds} rounds, in each every workload on both proxies back to back, which goes first "
            "alternating; medians over rounds. Proxy CPU: user + system of its process tree (`/proc/<pid>/stat`, "
            "10 ms ticks), the supervisor and every worker summed. Cost model: rate(N) = min(N ÷ p, "
            f"{cores:g} ÷ (p + c + b), 1 ÷ c) on {cores:g} otherwise idle cores, with p, c, b the CPU seconds per "
            "unit of the proxy, the load generator (one process: one core at most) and the broker, each rate from "
            "its own windows' CPU: its column, rate(2) ÷ rate(1), is what the model says the measured CPU allows "
            "on this machine, next to the measured ratio. Other processes: the machine's busy cores (`/proc/stat`) "
            "less the proxy's, the generator's and the broker's, in the windows: where it is not near 0, other "
            "work on this shared machine took cores from the run and the ratios are not the proxy's.",
            "",
            f"| workload | workers {one} /s | workers {two} /s | {two} ÷ {one} | per round | cost model, {two} ÷ {one} "
            f"| proxy CPU, cores: {one} / {two} | machine busy, cores: {one} / {two} "
            f"| of which other processes: {one} / {two} "
            f"| least-loaded worker's share ({two}) | failed |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"CPU per unit of work, ms (workers {one} / workers {two}), and what one proxy core does (1 ÷ p at one "
            "worker: the figure the N-core plan multiplies).",
            "",
            "| workload | proxy (whole tree) | load generator | broker | per proxy core |",
            "|---|---:|---:|---:|---:|",
            *cost_rows,
            "",
            "Other load on the machine before each round: " + ", ".join(f"{x:.2f}" for x in o.quiet) + " cores.",
        ]
    )


# ------------------------------------------------------------------------------------------------ main


def main(plan: Plan, home: Path, tmp: Path, cores: float) -> str:
    """The phase on a fresh broker and two fresh proxies; the markdown section."""
    broker = KafkaBroker(home, tmp / "kafka")
    targets: list[WorkersTarget] = []
    try:
        _say("starting the Kafka broker")
        broker.start()
        assert broker.process is not None
        for workers in WORKERS:
            _say(f"starting kafkaguard proxy --workers {workers}")
            targets.append(start_proxy(workers, tmp, broker))
        try:
            outcome = asyncio.run(run(plan, targets, broker.process.pid))
        except BaseException:
            for target in targets:
                print(target.process.output_tail(), file=sys.stderr)
            raise
    finally:
        for target in targets:
            target.process.stop()
        broker.stop()
    return render(outcome, cores)


__all__ = ["WORKERS", "WORKLOADS", "PipelinedConn", "Window", "WorkersOutcome", "main", "render", "start_proxy"]

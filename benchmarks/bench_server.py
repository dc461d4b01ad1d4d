"""Server load benchmark (issue 4): many concurrent authenticated clients against the real Kafka-protocol server.

Run: ``scripts/bench server`` (or ``.venv/bin/python -m benchmarks.bench_server [--quick] [--no-write]``).

The server (``KafkaServer`` on a fresh SQLite data directory, one SASL_PLAINTEXT listener on a free loopback port)
runs in its own process pinned to one core; this process is the load generator, pinned to the other. The load
generator speaks the Kafka protocol itself, with the tests' client codec (``tests/wire.py``): requests encoded with
kio's ``entity_writer`` (the request header their schema names: v1, or v2 for flexible versions; 4-byte framing),
every response decoded with ``entity_reader`` and its error code checked. Each connection logs in with SaslHandshake
v1 + two SaslAuthenticate v2 (SCRAM-SHA-256 unless said otherwise; ``tests.wire.scram_exchange``) through a small
SCRAM client of our own that caches the salted password per (user, salt, iterations), so a login costs the client
four HMACs, not a PBKDF2; its first login is checked against ``scramp``'s client. Load is closed-loop: each
connection keeps ``depth`` requests in flight and sends the next one when a response arrives; latency is from
writing a request to the last byte of its response (decoding comes after the clock read).

Measured, each next to a baseline from the same run:

1. SCRAM logins/s over fresh connections (connect, ApiVersions, SaslHandshake, SaslAuthenticate × 2, close);
   baseline: connect + ApiVersions + close.
2. DescribeAcls with a small result at 50 connections; baseline: ApiVersions at the same concurrency (framing,
   header, kio decode/encode, no handler work; a baseline, not a bound: ApiVersions' response is larger than a small
   DescribeAcls response, so DescribeAcls may be the faster).
3. DescribeAcls returning all of 10k ACLs; baseline: the same handler and response encoding called in-process.
4. CreateAcls + DeleteAcls round trips (durable SQLite commits); baseline: the same through ``AclService``
   in-process.

Afterwards each scenario is repeated with ``cProfile`` enabled in the server's event-loop thread (switched on and
off over a control pipe), and the hot spots are reported as file:function with their share of the busy time
(``benchmarks.profiling``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gc
import hashlib
import hmac
import logging
import multiprocessing
import os
import pstats
import secrets
import shutil
import statistics
import struct
import tempfile
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as PipeEnd
from pathlib import Path
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.static.primitive import i8

from benchmarks.bench_authorize import CORE, realistic
from benchmarks.profiling import PROFILE_START, PROFILE_STOP, LoopProfiler, Profile, render_profiles, summarize
from benchmarks.report import write_section
from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import load_settings
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.wire import decode_response, encode_request, frame, scram_exchange, scramp_exchange

HOST = "127.0.0.1"
USER, PASSWORD = "bench", "bench-password"
ADMIN = "admin"
ITERATIONS = 4096
#: The DescribeAcls "small result" filter: one literal topic of bench_authorize's CORE set (two ACLs).
SMALL_TOPIC = "payments.team1.events-1"
#: The server process's own safety limit: it stops by itself after this long even if we never say so.
SERVER_MAX_LIFETIME_S = 1200.0

# ------------------------------------------------------------------------------------------------ the server


def _server_child(data_dir: str, cpu: int | None, ctl: PipeEnd) -> None:
    """Entry point of the server process: serve until told to stop (or SERVER_MAX_LIFETIME_S passes)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_serve(Path(data_dir), ctl))


async def _serve(data_dir: Path, ctl: PipeEnd) -> None:
    from kafkaguard.server.app import KafkaServer  # the server extra, imported only in the server process

    # The load generator's fresh connections (thousands a second, all from 127.0.0.1) stand for many clients: lift the
    # creation rate per address (100/s by default). Through the environment, which a base revision without the setting
    # (bench_regression) ignores.
    os.environ.setdefault("KAFKAGUARD_MAX_CONNECTION_CREATION_RATE_PER_IP", "1000000")
    settings = load_settings(
        None,
        data_dir=data_dir,
        listeners=[f"SASL_PLAINTEXT://{HOST}:0"],
        super_users=f"User:{ADMIN}",
        auth_failure_delay_ms=100,
    )
    services = build_services(settings)
    server = KafkaServer(services)
    await server.start()
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    loop.add_reader(ctl.fileno(), lambda: commands.put_nowait(ctl.recv()))
    ctl.send(("port", server.bound_listeners[0].port))
    profiler = LoopProfiler()
    gc_pauses = _GcPauses()
    gc.callbacks.append(gc_pauses)
    deadline = loop.time() + SERVER_MAX_LIFETIME_S
    try:
        while (remaining := deadline - loop.time()) > 0:
            try:
                command, arg = await asyncio.wait_for(commands.get(), remaining)
            except TimeoutError:
                break
            if command == "stop":
                break
            if command == "cpu":
                ctl.send(("cpu", (time.process_time(), gc_pauses.total, gc_pauses.take_max())))
            elif command in profiler.commands:
                ctl.send(profiler.handle(command, arg))
            else:
                ctl.send(("error", command))
    finally:
        loop.remove_reader(ctl.fileno())
        gc.callbacks.remove(gc_pauses)
        await server.stop()
        services.close()


class _GcPauses:
    """A ``gc.callbacks`` entry summing the collector's pauses (and the longest since last asked) in this process."""

    def __init__(self) -> None:
        self.total = 0.0
        self.longest = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            pause = time.perf_counter() - self._start
            self.total += pause
            self.longest = max(self.longest, pause)

    def take_max(self) -> float:
        longest, self.longest = self.longest, 0.0
        return longest


class ServerProcess:
    """The server in a child process, controlled over a pipe; always stopped by ``close``."""

    def __init__(self, data_dir: Path, cpu: int | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ctl, child_end = ctx.Pipe()
        self.process = ctx.Process(target=_server_child, args=(str(data_dir), cpu, child_end), daemon=True)
        self.process.start()
        child_end.close()
        self.port = int(self._call("wait", None, timeout=60.0))
        self.pid = int(self.process.pid or 0)

    def _call(self, command: str, arg: Any, timeout: float = 30.0) -> Any:
        if command != "wait":
            self._ctl.send((command, arg))
        if not self._ctl.poll(timeout):
            raise TimeoutError(f"the server process did not answer {command!r} within {timeout:g} s")
        _kind, value = self._ctl.recv()
        return value

    def cpu_seconds(self) -> tuple[float, float, float]:
        """The server's CPU seconds, its total GC pause seconds, and its longest GC pause since the last call."""
        cpu, gc_total, gc_max = self._call("cpu", None)
        return float(cpu), float(gc_total), float(gc_max)

    def profile_start(self) -> None:
        self._call(PROFILE_START, None)

    def profile_stop(self, path: Path) -> pstats.Stats:
        self._call(PROFILE_STOP, str(path), timeout=120.0)
        return pstats.Stats(str(path))

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError, EOFError):
                self._ctl.send(("stop", None))
            self.process.join(20)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self._ctl.close()


# ------------------------------------------------------------------------------------------------ the protocol

CLIENT_ID = "kafkaguard-bench"


class Template:
    """A request encoded once; each send only patches the correlation id (bytes 8..12 of the frame)."""

    def __init__(self, body: Any) -> None:
        self.frame = frame(encode_request(body, 0, CLIENT_ID))
        self.api_key = int(type(body).__api_key__)
        self.api_version = int(type(body).__version__)

    def with_id(self, correlation_id: int) -> bytes:
        frame = bytearray(self.frame)
        struct.pack_into(">i", frame, 8, correlation_id)
        return bytes(frame)


@dataclass
class LoadRun:
    """Shared state of one closed-loop load: connections record while ``recording`` and stop when ``stopping``."""

    template: Template
    check: Callable[[Any], bool]
    recording: bool = False
    stopping: bool = False
    latencies: list[float] = field(default_factory=list)
    errors: int = 0


def complete_frames(buffer: bytearray) -> Generator[bytes, None, None]:
    """The complete frames at the front of ``buffer`` (their payloads, without the 4-byte size), each taken out of
    it as it is yielded; a partial frame stays for the next read."""
    while len(buffer) >= 4:
        size = int.from_bytes(buffer[:4], "big")
        if len(buffer) < 4 + size:
            return
        payload = bytes(buffer[4 : 4 + size])
        del buffer[: 4 + size]
        yield payload


class KafkaConn(asyncio.Protocol):
    """A raw Kafka client connection: request/response with futures, or a closed-loop load with ``depth``
    requests in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._next_id = 1
        self._waiting: dict[int, tuple[asyncio.Future[Any], int, int]] = {}  # future, api key, api version
        self._run: LoadRun | None = None
        self._sent: deque[tuple[int, float]] = deque()
        self._drained: asyncio.Future[None] | None = None
        self.last_frame_at = 0.0  # perf_counter() when the last complete response arrived (before decoding)
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        for future, _key, _version in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("connection lost"))
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        for payload in complete_frames(self._buffer):
            now = self.last_frame_at = time.perf_counter()
            if self._run is not None:
                self._on_load_response(self._run, payload, now)
            else:
                self._on_response(payload)

    # request / response
    async def request(self, body: Any, timeout: float = 30.0) -> Any:
        assert self.transport is not None
        correlation_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = (future, int(type(body).__api_key__), int(type(body).__version__))
        self.transport.write(frame(encode_request(body, correlation_id, CLIENT_ID)))
        return await asyncio.wait_for(future, timeout)

    def _on_response(self, payload: bytes) -> None:
        correlation_id = int.from_bytes(payload[:4], "big", signed=True)
        future, api_key, api_version = self._waiting.pop(correlation_id)
        if not future.done():
            future.set_result(decode_response(payload, api_key, api_version)[1])

    # closed-loop load
    def start_load(self, run: LoadRun, depth: int) -> None:
        self._run = run
        for _ in range(depth):
            self._send_load()

    def _send_load(self) -> None:
        assert self.transport is not None and self._run is not None
        correlation_id = self._next_id
        self._next_id += 1
        self._sent.append((correlation_id, time.perf_counter()))
        self.transport.write(self._run.template.with_id(correlation_id))

    def _on_load_response(self, run: LoadRun, payload: bytes, now: float) -> None:
        correlation_id, sent_at = self._sent.popleft()
        if int.from_bytes(payload[:4], "big", signed=True) != correlation_id:
            raise RuntimeError("response out of order")
        if run.recording:
            run.latencies.append(now - sent_at)
        template = run.template
        if not run.check(decode_response(payload, template.api_key, template.api_version)[1]):
            run.errors += 1
        if not run.stopping:
            self._send_load()
        elif not self._sent and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def drain_load(self, timeout: float) -> None:
        if self._sent:
            self._drained = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(self._drained, timeout)
        self._run = None
        self._drained = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(port: int) -> KafkaConn:
    _transport, conn = await asyncio.get_running_loop().create_connection(KafkaConn, HOST, port)
    return conn


# ------------------------------------------------------------------------------------------------ SCRAM client


@dataclass(frozen=True)
class _Keys:
    client_key: bytes
    stored_key: bytes
    server_key: bytes


class CachedScramClient:
    """RFC 5802 client side with the salted password cached per (mechanism, user, salt, iterations): after the
    first login of a user a login costs four HMACs and one hash, so the load generator stays cheap. The messages go
    through ``tests.wire.scram_exchange``, as scramp's do."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str, bytes, int], _Keys] = {}
        self.derivations = 0

    def keys(self, hash_name: str, user: str, password: str, salt: bytes, iterations: int) -> _Keys:
        key = (hash_name, user, salt, iterations)
        keys = self._keys.get(key)
        if keys is None:
            salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
            client_key = hmac.digest(salted, b"Client Key", hash_name)
            keys = _Keys(
                client_key, hashlib.new(hash_name, client_key).digest(), hmac.digest(salted, b"Server Key", hash_name)
            )
            self._keys[key] = keys
            self.derivations += 1
        return keys

    async def login(self, conn: KafkaConn, mechanism: ScramMechanism, user: str, password: str) -> None:
        """SaslHandshake v1 + SaslAuthenticate v2 × 2 on ``conn``; raises unless the server proves itself too."""
        hash_name = "sha256" if mechanism is ScramMechanism.SCRAM_SHA_256 else "sha512"
        await exchange(conn, scram_exchange(_CachedLogin(self, hash_name, user, password), mechanism.mechanism_name))


class _CachedLogin:
    """One login's four steps (``tests.wire.ScramClientSteps``), with the keys of ``CachedScramClient``."""

    def __init__(self, cache: CachedScramClient, hash_name: str, user: str, password: str) -> None:
        self._cache, self._hash_name, self._user, self._password = cache, hash_name, user, password
        self._nonce = secrets.token_urlsafe(18)
        self._client_first_bare = f"n={user},r={self._nonce}"
        self._final = ""
        self._expected = ""

    def get_client_first(self) -> str:
        return "n,," + self._client_first_bare

    def set_server_first(self, message: str) -> None:
        attrs = dict(part.split("=", 1) for part in message.split(","))
        if not attrs["r"].startswith(self._nonce):
            raise RuntimeError("server nonce does not extend ours")
        hash_name = self._hash_name
        keys = self._cache.keys(hash_name, self._user, self._password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self._client_first_bare},{message},{without_proof}".encode()
        signature = hmac.digest(keys.stored_key, auth_message, hash_name)
        proof = bytes(a ^ b for a, b in zip(keys.client_key, signature, strict=True))
        self._final = f"{without_proof},p={base64.b64encode(proof).decode()}"
        self._expected = "v=" + base64.b64encode(hmac.digest(keys.server_key, auth_message, hash_name)).decode()

    def get_client_final(self) -> str:
        return self._final

    def set_server_final(self, message: str) -> None:
        if message != self._expected:
            raise RuntimeError("server signature does not verify")


async def exchange(conn: KafkaConn, steps: Generator[Any, Any, None]) -> None:
    """Drive a ``tests.wire`` exchange (a generator of request bodies) over ``conn``."""
    try:
        body = next(steps)
        while True:
            body = steps.send(await conn.request(body))
    except StopIteration:
        return


async def scramp_login(conn: KafkaConn, user: str, password: str) -> None:
    """One login through scramp's client (an independent implementation), to check ours against it."""
    await exchange(conn, scramp_exchange(user, password, "SCRAM-SHA-256"))


# ------------------------------------------------------------------------------------------------ requests


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="kafkaguard-bench", client_software_version="1.0")


def describe_request(
    resource_type: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern_type: PatternType = PatternType.ANY,
) -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(resource_type.code),
        resource_name_filter=name,
        pattern_type_filter=i8(pattern_type.code),
        principal_filter=None,
        host_filter=None,
        operation=i8(AclOperation.ANY.code),
        permission_type=i8(AclPermissionType.ANY.code),
    )


def creation(binding: AclBinding) -> AclCreation:
    p, e = binding.pattern, binding.entry
    return AclCreation(
        resource_type=i8(p.resource_type.code),
        resource_name=p.name,
        resource_pattern_type=i8(p.pattern_type.code),
        principal=e.principal,
        host=e.host,
        operation=i8(e.operation.code),
        permission_type=i8(e.permission_type.code),
    )


def exact_filter(binding: AclBinding) -> DeleteAclsFilter:
    p, e = binding.pattern, binding.entry
    return DeleteAclsFilter(
        resource_type_filter=i8(p.resource_type.code),
        resource_name_filter=p.name,
        pattern_type_filter=i8(p.pattern_type.code),
        principal_filter=e.principal,
        host_filter=e.host,
        operation=i8(e.operation.code),
        permission_type=i8(e.permission_type.code),
    )


def rt_binding(i: int) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, f"bench.roundtrip-{i}", PatternType.LITERAL),
        AccessControlEntry(f"User:rt-{i}", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )


def cluster_acls() -> list[AclBinding]:
    """What the bench user needs: DESCRIBE (DescribeAcls) and ALTER (CreateAcls/DeleteAcls) on the cluster."""
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    return [
        AclBinding(cluster, AccessControlEntry(f"User:{USER}", "*", op, AclPermissionType.ALLOW))
        for op in (AclOperation.DESCRIBE, AclOperation.ALTER)
    ]


def prepare_data_dir(data_dir: Path) -> Services:
    """A store with the bench user (both mechanisms), its cluster ACLs and the CORE ACLs; returned open."""
    settings = load_settings(None, data_dir=data_dir, super_users=f"User:{ADMIN}")
    services = build_services(settings)
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        result = services.credentials.upsert_password(USER, mechanism, PASSWORD, ITERATIONS, actor=ACTOR)
        assert result.succeeded, result
    outcomes = services.acls.create_acls([*cluster_acls(), *CORE], actor=ACTOR)
    assert all(o.error is None for o in outcomes)
    return services


# ------------------------------------------------------------------------------------------------ measuring


def pct(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


@dataclass
class Result:
    name: str
    count: int
    seconds: float
    latencies_ms: list[float]
    server_cpu: float  # share of one core, 0..1
    client_cpu: float
    server_wait: float = float("nan")  # share of the window spent waiting for a CPU
    client_wait: float = float("nan")
    gc_share: float = float("nan")  # share of the window the server spent in GC pauses
    gc_max_ms: float = float("nan")

    @classmethod
    def of(cls, name: str, seconds: float, latencies_s: Sequence[float], cpu: CpuMeter) -> Result:
        latencies = sorted(x * 1000 for x in latencies_s)
        return cls(name, len(latencies), seconds, latencies, cpu.server_share, cpu.client_share, cpu.server_wait,
                   cpu.client_wait, cpu.gc_share, cpu.gc_max * 1000)  # fmt: skip

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def p50(self) -> float:
        return pct(self.latencies_ms, 0.50)

    @property
    def p99(self) -> float:
        return pct(self.latencies_ms, 0.99)


def _runqueue_wait_s(pid: int) -> float:
    """Seconds the threads of ``pid`` spent runnable but waiting for a CPU (``/proc/<pid>/task/*/schedstat``):
    how much other processes on this shared machine took from us."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


class CpuMeter:
    """Server and load-generator CPU over one measurement window, each as a share of one core, and the share of
    the window each spent waiting for its core (taken by other processes)."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server

    def __enter__(self) -> CpuMeter:
        self._wall = time.perf_counter()
        self._client = time.process_time()
        self._server, self._gc, _ = self.server.cpu_seconds()
        self._server_wait = _runqueue_wait_s(self.server.pid)
        self._client_wait = _runqueue_wait_s(os.getpid())
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        server, gc_total, self.gc_max = self.server.cpu_seconds()
        self.server_share = (server - self._server) / wall
        self.gc_share = (gc_total - self._gc) / wall
        self.client_share = (time.process_time() - self._client) / wall
        self.server_wait = (_runqueue_wait_s(self.server.pid) - self._server_wait) / wall
        self.client_wait = (_runqueue_wait_s(os.getpid()) - self._client_wait) / wall


def busy_other_cores(interval: float = 0.5) -> float:
    """CPU in use on the machine over ``interval``, in cores (ours are idle while this is called)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    busy0, total0 = sample()
    time.sleep(interval)
    busy1, total1 = sample()
    return (busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1)


def wait_for_quiet(max_seconds: float, threshold: float = 0.15) -> float:
    """Wait (at most ``max_seconds``) until other processes use less than ``threshold`` of a core; return the
    load last seen, in cores. The machine is shared with other work, and a busy neighbour halves a core."""
    deadline = time.perf_counter() + max_seconds
    load = busy_other_cores()
    while load > threshold and time.perf_counter() < deadline:
        load = busy_other_cores()
    return load


def _ok(body: Any) -> bool:
    return int(body.error_code) == 0


async def closed_loop(
    server: ServerProcess,
    conns: Sequence[KafkaConn],
    template: Template,
    depth: int,
    warmup: float,
    seconds: float,
    name: str,
    check: Callable[[Any], bool] = _ok,
) -> Result:
    run = LoadRun(template, check)
    for conn in conns:
        conn.start_load(run, depth)
    await asyncio.sleep(warmup)
    with CpuMeter(server) as cpu:
        run.recording = True
        start = time.perf_counter()
        await asyncio.sleep(seconds)
        run.recording = False
        elapsed = time.perf_counter() - start
    run.stopping = True
    await asyncio.gather(*(conn.drain_load(30.0) for conn in conns))
    if run.errors:
        raise RuntimeError(f"{name}: {run.errors} responses carried an error code")
    return Result.of(name, elapsed, run.latencies, cpu)


async def open_authenticated(port: int, n: int, scram: CachedScramClient) -> list[KafkaConn]:
    async def one() -> KafkaConn:
        conn = await connect(port)
        await conn.request(api_versions_request())
        await scram.login(conn, ScramMechanism.SCRAM_SHA_256, USER, PASSWORD)
        return conn

    conns: list[KafkaConn] = []
    for start in range(0, n, 25):  # in waves, so the listen backlog never overflows
        conns += await asyncio.gather(*(one() for _ in range(min(25, n - start))))
    return conns


async def logins(
    server: ServerProcess,
    scram: CachedScramClient,
    mechanism: ScramMechanism | None,
    concurrency: int,
    seconds: float,
    name: str,
) -> Result:
    """Fresh connections as fast as ``concurrency`` workers can make them: connect, ApiVersions, and (unless
    ``mechanism`` is None: the baseline) a full SCRAM login; then close. Latency is per connection."""
    latencies: list[float] = []
    failures = 0
    stop_at = 0.0

    async def worker() -> None:
        nonlocal failures
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            conn = await connect(server.port)
            try:
                versions = await conn.request(api_versions_request())
                if versions.error_code != 0:
                    failures += 1
                if mechanism is not None:
                    await scram.login(conn, mechanism, USER, PASSWORD)
            finally:
                conn.close()
            latencies.append(time.perf_counter() - t0)
            await conn.lost

    stop_at = time.perf_counter() + 0.5
    await asyncio.gather(*(worker() for _ in range(concurrency)))  # warm-up
    latencies.clear()
    with CpuMeter(server) as cpu:
        start = time.perf_counter()
        stop_at = start + seconds
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{name}: {failures} failures")
    return Result.of(name, elapsed, latencies, cpu)


async def create_delete(
    server: ServerProcess, port: int, scram: CachedScramClient, n_conns: int, seconds: float
) -> Result:
    """Each connection: CreateAcls of one ACL, then DeleteAcls of exactly it, again and again (its own ACL)."""
    conns = await open_authenticated(port, n_conns, scram)
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def worker(index: int, conn: KafkaConn) -> None:
        binding = rt_binding(index)
        create = CreateAclsRequest(creations=(creation(binding),))
        delete = DeleteAclsRequest(filters=(exact_filter(binding),))
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            created = await conn.request(create)
            deleted = await conn.request(delete)
            latencies.append(time.perf_counter() - t0)
            if created.results[0].error_code != 0 or len(deleted.filter_results[0].matching_acls) != 1:
                raise RuntimeError(f"create/delete round trip failed: {created} {deleted}")

    with CpuMeter(server) as cpu:
        start = time.perf_counter()
        await asyncio.gather(*(worker(i, conn) for i, conn in enumerate(conns)))
        elapsed = time.perf_counter() - start
    for conn in conns:
        conn.close()
    name = f"CreateAcls + DeleteAcls, {n_conns} connection{'s' if n_conns > 1 else ''}"
    return Result.of(name, elapsed, latencies, cpu)


def inprocess_create_delete(services: Services, seconds: float) -> Result:
    """Baseline: the same round trip through AclService in this process (same store code, same fsyncs)."""
    binding = rt_binding(10_000)
    latencies: list[float] = []
    client0 = time.process_time()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        services.acls.create_acls([binding], actor=ACTOR)
        removed = services.acls.delete_acls([binding.to_filter()], actor=ACTOR)
        latencies.append(time.perf_counter() - t0)
        assert len(removed[0].removed_acls) == 1
    elapsed = time.perf_counter() - start
    cpu = (time.process_time() - client0) / elapsed
    name = "baseline: same round trip via AclService in-process"
    return Result(name, len(latencies), elapsed, sorted(x * 1000 for x in latencies), float("nan"), cpu)


async def populate(conn: KafkaConn, bindings: Sequence[AclBinding], batch: int = 1000) -> float:
    """Create ``bindings`` over the wire in CreateAcls of ``batch``; the seconds it took."""
    start = time.perf_counter()
    for i in range(0, len(bindings), batch):
        chunk = bindings[i : i + batch]
        response = await conn.request(CreateAclsRequest(creations=tuple(creation(b) for b in chunk)), timeout=120)
        bad = [r for r in response.results if r.error_code != 0]
        if bad:
            raise RuntimeError(f"CreateAcls failed: {bad[0]}")
    return time.perf_counter() - start


def acl_count(body: Any) -> int:
    return sum(len(resource.acls) for resource in body.resources)


async def describe_all_sequential(server: ServerProcess, conn: KafkaConn, requests: int, expected: int) -> Result:
    """DescribeAcls(ANY) one at a time on one connection; every response decoded and counted (after the clock)."""
    out: list[float] = []
    with CpuMeter(server) as cpu:
        start = time.perf_counter()
        for _ in range(requests):
            t0 = time.perf_counter()
            body = await conn.request(describe_request(), timeout=60)
            out.append(conn.last_frame_at - t0)
            if body.error_code != 0 or acl_count(body) != expected:
                raise RuntimeError(f"DescribeAcls returned {acl_count(body)} ACLs, expected {expected}")
        elapsed = time.perf_counter() - start
    name = f"DescribeAcls (all {expected:,}), 1 connection, {requests} requests one at a time"
    return Result.of(name, elapsed, out, cpu)


async def inprocess_describe_all(services: Services, rounds: int) -> tuple[float, float, float, int]:
    """Baseline for the 10k DescribeAcls: medians (ms) of the index lookup alone, of the whole handler (authorize,
    lookup, kio entities) and of encoding its response, all in this process; and the response size in bytes."""
    from kafkaguard.apis.acls import describe_acls
    from kafkaguard.protocol.codec import encode_response
    from kafkaguard.protocol.scope import BrokerInfo, RequestScope

    scope = RequestScope(
        services=services,
        broker=BrokerInfo(1, HOST, 0, "bench"),
        context=RequestContext(f"User:{USER}", HOST),
        api_key=ApiKey.DESCRIBE_ACLS,
        api_version=3,
        client_id="bench",
        snapshot=services.authorizer.snapshot,
    )
    request = describe_request()
    lookup, handler, encode = [], [], []
    size = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        services.acls.describe_acls(AclBindingFilter.ANY)
        t1 = time.perf_counter()
        response = await describe_acls(scope, request)
        t2 = time.perf_counter()
        size = len(encode_response(ApiKey.DESCRIBE_ACLS, 3, 1, response))
        t3 = time.perf_counter()
        lookup.append((t1 - t0) * 1000)
        handler.append((t2 - t1) * 1000)
        encode.append((t3 - t2) * 1000)
    return statistics.median(lookup), statistics.median(handler), statistics.median(encode), size


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class Plan:
    quick: bool
    warmup: float
    seconds: float
    login_seconds: float
    connections: int = 50
    login_concurrency: int = 50
    rt_connections: int = 8
    big_acls: int = 10_000
    big_requests: int = 40
    profile_seconds: float = 3.0
    quiet_wait: float = 60.0

    @classmethod
    def make(cls, quick: bool) -> Plan:
        if quick:
            return cls(True, 0.3, 1.0, 1.0, big_acls=2_000, big_requests=10, profile_seconds=1.0, quiet_wait=5.0)
        return cls(False, 1.0, 5.0, 4.0)


@dataclass
class Outcome:
    plan: Plan
    logins: list[Result]
    small: list[Result]
    roundtrips: list[Result]
    big_seq: Result
    big_conc: Result
    big_count: int
    big_inprocess: tuple[float, float, float, int]
    populate_s: float
    profiles: list[Profile]
    derivations: int
    quiet: list[float]


async def run(plan: Plan, server: ServerProcess, baseline: Services, tmp: Path) -> Outcome:
    scram = CachedScramClient()
    port = server.port
    # Our SCRAM client is checked against scramp's before it is trusted with the numbers.
    conn = await connect(port)
    await conn.request(api_versions_request())
    await scramp_login(conn, USER, PASSWORD)
    conn.close()

    quiet = [wait_for_quiet(plan.quiet_wait)]
    print(f"logins … (other load {quiet[-1]:.2f} cores)")
    login_rows = [
        await logins(
            server, scram, None, plan.login_concurrency, plan.login_seconds, "baseline: connect + ApiVersions"
        ),
        await logins(
            server,
            scram,
            ScramMechanism.SCRAM_SHA_256,
            plan.login_concurrency,
            plan.login_seconds,
            "SCRAM-SHA-256 login (connect + ApiVersions + SASL)",
        ),
        await logins(
            server,
            scram,
            ScramMechanism.SCRAM_SHA_512,
            plan.login_concurrency,
            plan.login_seconds,
            "SCRAM-SHA-512 login (connect + ApiVersions + SASL)",
        ),
    ]
    for row in login_rows:
        print(f"  {row.name}: {row.rate:,.0f}/s p50 {row.p50:.2f} ms p99 {row.p99:.2f} ms")

    quiet.append(wait_for_quiet(plan.quiet_wait))
    print(f"steady load … (other load {quiet[-1]:.2f} cores)")
    n = plan.connections
    conns = await open_authenticated(port, n, scram)
    small_template = Template(describe_request(ResourceType.TOPIC, SMALL_TOPIC, PatternType.LITERAL))
    probe = await conns[0].request(describe_request(ResourceType.TOPIC, SMALL_TOPIC, PatternType.LITERAL))
    small_size = acl_count(probe)
    assert probe.error_code == 0 and small_size == 2, probe

    def small_check(body: Any) -> bool:
        return int(body.error_code) == 0 and acl_count(body) == small_size

    small = [
        await closed_loop(
            server,
            conns,
            Template(api_versions_request()),
            1,
            plan.warmup,
            plan.seconds,
            f"baseline: ApiVersions, {n} connections × 1 in flight",
        ),
        await closed_loop(
            server,
            conns,
            small_template,
            1,
            plan.warmup,
            plan.seconds,
            f"DescribeAcls ({small_size} ACLs of 12), {n} connections × 1 in flight",
            small_check,
        ),
        await closed_loop(
            server,
            conns,
            small_template,
            4,
            plan.warmup,
            plan.seconds,
            f"DescribeAcls ({small_size} ACLs of 12), {n} connections × 4 in flight",
            small_check,
        ),
    ]
    for row in small:
        print(f"  {row.name}: {row.rate:,.0f}/s p50 {row.p50:.2f} ms p99 {row.p99:.2f} ms")

    quiet.append(wait_for_quiet(plan.quiet_wait))
    print(f"create/delete … (other load {quiet[-1]:.2f} cores)")
    roundtrips = [
        inprocess_create_delete(baseline, plan.seconds),
        await create_delete(server, port, scram, 1, plan.seconds),
        await create_delete(server, port, scram, plan.rt_connections, plan.seconds),
    ]
    for row in roundtrips:
        print(f"  {row.name}: {row.rate:,.0f}/s p50 {row.p50:.2f} ms p99 {row.p99:.2f} ms")

    print(f"populating {plan.big_acls:,} ACLs …")
    big = [acl.binding for acl in realistic(plan.big_acls, queries=1).acls]
    populate_s = await populate(conns[0], big)
    baseline.acls.create_acls(big, actor=ACTOR)
    quiet.append(wait_for_quiet(plan.quiet_wait))
    expected = len(baseline.acls.describe_acls(AclBindingFilter.ANY))
    small.append(
        await closed_loop(
            server,
            conns,
            small_template,
            1,
            plan.warmup,
            plan.seconds,
            f"DescribeAcls ({small_size} ACLs of {expected:,}), {n} connections × 1 in flight",
            small_check,
        )
    )
    print(f"  {small[-1].name}: {small[-1].rate:,.0f}/s p50 {small[-1].p50:.2f} ms p99 {small[-1].p99:.2f} ms")
    big_seq = await describe_all_sequential(server, conns[0], plan.big_requests, expected)

    def big_check(body: Any) -> bool:
        return int(body.error_code) == 0 and acl_count(body) == expected

    big_name = f"DescribeAcls (all {expected:,}), 4 connections × 1 in flight"
    big_template = Template(describe_request())
    big_conc = await closed_loop(server, conns[:4], big_template, 1, plan.warmup, plan.seconds, big_name, big_check)
    big_inprocess = await inprocess_describe_all(baseline, 10 if plan.quick else 30)
    lookup_ms, handler_ms, encode_ms, _size = big_inprocess
    print(
        f"  DescribeAcls all {expected:,}: p50 {big_seq.p50:.1f} ms p99 {big_seq.p99:.1f} ms; "
        f"in-process lookup/handler/encode {lookup_ms:.1f}/{handler_ms:.1f}/{encode_ms:.1f} ms"
    )

    quiet.append(wait_for_quiet(plan.quiet_wait))
    print(f"profiling … (other load {quiet[-1]:.2f} cores)")
    profiles: list[Profile] = []

    async def profiled(name: str, work: Callable[[], Any]) -> None:
        server.profile_start()
        await work()
        stats = server.profile_stop(tmp / f"profile-{len(profiles)}.pstats")
        profiles.append(summarize(name, stats))

    ps = plan.profile_seconds
    await profiled(
        "SCRAM-SHA-256 logins",
        lambda: logins(server, scram, ScramMechanism.SCRAM_SHA_256, plan.login_concurrency, ps, "profiled"),
    )
    await profiled(
        f"DescribeAcls small result, {n} connections",
        lambda: closed_loop(server, conns, small_template, 1, 0.2, ps, "profiled", small_check),
    )
    await profiled(
        f"DescribeAcls of all {expected:,} ACLs",
        lambda: describe_all_sequential(server, conns[0], max(5, plan.big_requests // 4), expected),
    )
    await profiled(
        f"CreateAcls + DeleteAcls, {plan.rt_connections} connections",
        lambda: create_delete(server, port, scram, plan.rt_connections, ps),
    )
    for conn in conns:
        conn.close()
    return Outcome(plan, login_rows, small, roundtrips, big_seq, big_conc, expected, big_inprocess, populate_s,
                   profiles, scram.derivations, quiet)  # fmt: skip


# ------------------------------------------------------------------------------------------------ the report


def _cpu(share: float) -> str:
    return "–" if share != share else f"{100 * share:.0f}%"  # NaN: not measured


def _row(r: Result) -> str:
    return (
        f"| {r.name} | {r.rate:,.0f} | {r.p50:.2f} ms | {r.p99:.2f} ms | {r.count:,} in {r.seconds:.1f} s | "
        f"{_cpu(r.server_cpu)} / {_cpu(r.client_cpu)} | {_cpu(r.server_wait)} / {_cpu(r.client_wait)} | "
        + ("–" if r.gc_max_ms != r.gc_max_ms else f"{100 * r.gc_share:.1f}% / {r.gc_max_ms:.1f} ms")
        + " |"
    )


HEAD = (
    "| scenario | {rate} | p50 | p99 | measured | CPU: server / generator | waiting for a CPU: server / generator "
    "| server GC: share / longest pause |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|"
)


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def render(o: Outcome, affinity: str) -> str:
    plan = o.plan
    sha256 = o.logins[1]
    small = o.small[1]
    big_p50, big_p99 = o.big_seq.p50, o.big_seq.p99
    lines = [
        "## Server under load (`benchmarks/bench_server.py`)",
        "",
        f"`KafkaServer` in its own process ({affinity}), SASL_PLAINTEXT on a loopback port, fresh SQLite data "
        "directory (WAL, `synchronous=FULL`). The load generator is one asyncio process speaking the protocol "
        "itself (kio `entity_writer`/`entity_reader`, every response decoded and its error code checked; "
        "closed loop: a connection sends its next request when a response arrives). Logins use our own SCRAM "
        "client with the salted password cached per user/salt/iterations (checked first against `scramp`; "
        f"{o.derivations} PBKDF2 derivations in the whole run), {ITERATIONS} iterations. The bench user is not a "
        "super user: it holds CLUSTER DESCRIBE and ALTER ACLs, so every request is really authorized. "
        f"Each timed window {plan.seconds:g} s after {plan.warmup:g} s of warm-up (logins {plan.login_seconds:g} s). "
        "CPU: share of one core over the window (server: all its threads; the SQLite writes run on worker threads "
        "on the server's core, so waits can add up past 100%). Server GC: share of the window in the collector's "
        "pauses and the longest one (`gc.callbacks` in the server). Waiting for a CPU: share of the window "
        "the process was runnable but another process held its core (`/proc/<pid>/task/*/schedstat`) — the "
        f"machine is shared; before each phase the run waited for other load below 0.15 cores (last seen: "
        f"{', '.join(f'{x:.2f}' for x in o.quiet)} cores).",
        "",
        "### Targets (issue 4)",
        "",
        "| target | result | |",
        "|---|---|---|",
        f"| ≥ 1,000 SCRAM logins/s | {sha256.rate:,.0f}/s (SCRAM-SHA-256, {plan.login_concurrency} concurrent) | "
        f"{_verdict(sha256.rate >= 1000)} |",
        f"| ≥ 5,000 DescribeAcls/s (small result) at {plan.connections} connections | {small.rate:,.0f}/s | "
        f"{_verdict(small.rate >= 5000)} |",
        f"| p99 ≤ 20 ms for those | p99 {small.p99:.1f} ms | {_verdict(small.p99 <= 20)} |",
        f"| DescribeAcls of 10k ACLs ≤ 100 ms | p50 {big_p50:.1f} ms, p99 {big_p99:.1f} ms "
        f"({o.big_count:,} ACLs) | {_verdict(big_p99 <= 100 and o.big_count >= 10_000)} |",
        "",
        "### SCRAM logins (fresh connection each)",
        "",
        HEAD.format(rate="logins/s"),
        *(_row(r) for r in o.logins),
        "",
        "### Steady load, authenticated connections",
        "",
        HEAD.format(rate="requests/s"),
        *(_row(r) for r in o.small),
        "",
        f"### DescribeAcls returning every ACL ({o.big_count:,})",
        "",
        f"Populated over the wire with CreateAcls of 1,000 bindings each: {o.big_count - 12:,} ACLs in "
        f"{o.populate_s:.2f} s. Response {o.big_inprocess[3] / 1024:,.0f} KiB. Latency ends at the response's "
        "last byte (decoding it comes after).",
        "",
        HEAD.format(rate="requests/s"),
        _row(o.big_seq),
        _row(o.big_conc),
        "",
        "Baseline, in this process on a store with the same ACLs (medians): index lookup "
        f"`AclService.describe_acls(ANY)` {o.big_inprocess[0]:.1f} ms; the whole handler `describe_acls` "
        f"(authorize, lookup, building the kio entities) {o.big_inprocess[1]:.1f} ms; `encode_response` of its "
        f"response {o.big_inprocess[2]:.1f} ms — handler + encoding = {o.big_inprocess[1] + o.big_inprocess[2]:.1f} "
        "ms of the server's time before a byte is sent.",
        "",
        "### CreateAcls + DeleteAcls round trips (two durable commits each)",
        "",
        HEAD.format(rate="round trips/s"),
        *(_row(r) for r in o.roundtrips),
        "",
        "### Where the server's time goes (cProfile in the server's event-loop thread)",
        "",
        "Each scenario re-run for a few seconds with the profiler on (which slows the server, so only the shares "
        "mean something). Shares are of the loop thread's busy time (time in `epoll.poll`, i.e. idle, excluded; "
        "SQLite commits on `asyncio.to_thread` workers are not in these profiles). Self time: in the function "
        "itself; cumulative: with everything it calls.",
    ]
    lines += render_profiles(o.profiles)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ main


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs and 2k ACLs (a demo, not a result)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    plan = Plan.make(args.quick)
    logging.basicConfig(level=logging.WARNING)

    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    server_cpu = cores[-1] if len(cores) >= 2 else None
    previous_affinity = set(cores)
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-server-"))
    server: ServerProcess | None = None
    baseline: Services | None = None
    try:
        prepare_data_dir(tmp / "server").close()
        baseline = prepare_data_dir(tmp / "baseline")
        server = ServerProcess(tmp / "server", server_cpu)
        if server_cpu is not None:
            os.sched_setaffinity(0, {cores[0]})
            affinity = f"pinned to CPU {server_cpu}; the load generator to CPU {cores[0]}"
        else:
            affinity = "unpinned: fewer than two usable cores"
        outcome = asyncio.run(run(plan, server, baseline, tmp))
    finally:
        if server is not None:
            server.close()
        if baseline is not None:
            baseline.close()
        if previous_affinity:
            os.sched_setaffinity(0, previous_affinity)
        shutil.rmtree(tmp, ignore_errors=True)

    markdown = render(outcome, affinity)
    print(markdown)
    if not args.no_write and not args.quick:
        write_section("server", markdown)


if __name__ == "__main__":
    main()

"""Abuse benchmark (issue 24): what one client can take from the others, on ``kafkaguard serve`` and
``kafkaguard proxy``.

Run: ``scripts/bench abuse`` (or ``.venv/bin/python -m benchmarks.bench_abuse [--quick] [--no-write]``;
``--only ATTACK``, ``--target serve|proxy``, ``--setting key=value`` for a setting of every target process, e.g.
``--setting max_request_items=10000``; ``--kafka-tgz`` as for ``bench_proxy``; ``--server-pythonpath DIR/src`` runs
the targets on another checkout's code, e.g. the code before a change, and writes the section ``abuse-base``). The
proxy half needs Java 17+ and a Kafka distribution (``KAFKA_TGZ`` / ``KAFKA_HOME``, else
``../shared/kafka/kafka_*.tar.gz``); without one only the ``serve`` half runs and the output says so.

Every attack runs against a fresh target process (``kafkaguard serve``, or ``kafkaguard proxy`` in front of the
Kafka 3.9 test broker of ``tests/kafka/broker.py``), pinned to one core, its RLIMIT_NOFILE raised to the hard limit.
This process (pinned to the other core, with the broker's JVM) measures; the attack comes from a process of its own
(``multiprocessing``, same core, SCHED_IDLE), so the attack's CPU does not slow the measuring client down.
Everything speaks the Kafka protocol itself (``tests/wire.py``'s codec; the big frames built by hand and checked
against kio's encoding of a small one). Source addresses are loopback addresses of 127.0.0.0/8 and nothing else:
the server listens on 127.0.0.1, and each client binds its own source address before connecting.

Per attack, two windows on the same target process:

1. *quiet*: a logged-in **watchdog** (SCRAM-SHA-256, from 127.0.0.2) sends DescribeAcls v3 of the cluster's ACLs
   (one: its own DESCRIBE), which both targets answer themselves (the proxy from its store: Metadata forwarded to
   the broker carried the JVM's own pauses into the proxy's quiet p99, 3–158 ms from run to run on this machine),
   paced at one every ``WATCHDOG_INTERVAL_S`` with one in flight. Its latency is corrected for coordinated omission:
   a response that took L > interval also counts the sends it held back (L − interval, L − 2·interval, …), so a
   stall of S seconds weighs S / interval samples whether or not the watchdog was waiting on it, and a p99 says how
   long a request sent at a random moment waits. Meanwhile two **login probes** (connect, ApiVersions,
   SaslHandshake, SaslAuthenticate × 2, close; one every ``LOGIN_INTERVAL_S``, each given ``LOGIN_TIMEOUT_S``): one
   from 127.0.0.3 (on the proxy alternately to the bootstrap port and to the broker's port), one from the
   attacker's own address.
2. *attacked*: the same while the attack runs at full rate for the window's length. Requests and logins still in
   flight when it ends are waited for (a few seconds), then counted with the time they had waited so far.

Attacks (``_attacks()``), each from one address and spread over ``MANY_SOURCES`` addresses:

* big-item requests from a logged-in user who may describe nothing, one request in flight per connection, the next
  sent when the last is answered; a connection the server closes is opened again and logged in again:
  DescribeGroups v5 with as many empty (and, separately, distinct short) group names as fit in 1 MiB,
  FindCoordinator v4 and DescribeTransactions v0 with 0.5 MiB of empty keys (proxy), DeleteTopics v4 with 263k
  distinct names of one to three characters (serve);
* an idle connection flood: up to ``IDLE_CONNECTIONS`` TCP connections that send nothing, opened at
  ``IDLE_CONNECTS_PER_S`` (as fast as the server's accept queue takes them) and held to the end of the window; when
  the server closes some, more are opened;
* pre-authentication CPU: 4 connections sending ApiVersions v3 frames of 512 KiB of empty unknown tagged fields, each
  the moment the last one was answered or its connection closed (then reconnecting); and the same with junk frames
  of the same size (an ApiVersions v3 header, then random bytes).

Reported per attack and target: the watchdog's p50/p99 quiet and attacked, their ratio (target ≤ 2×), the longest
wait, the logins from the other address and from the attacker's (target: every login from another address
succeeds), what the attacker got done, the target's CPU and peak RSS, and how long the target and the measuring
process waited for a CPU (the machine is shared). A target whose RSS passes ``RSS_LIMIT`` is killed (and said so).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import ipaddress
import json
import multiprocessing
import os
import random
import resource
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection as PipeEnd
from pathlib import Path
from typing import Any, Literal

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.types import GroupId, TopicName, TransactionalId
from kio.static.primitive import i8, i32Timedelta

from benchmarks.abuse_findings import FINDINGS, FindingContext, FindingRow, before_tree, render_findings, run_findings
from benchmarks.bench_server import CachedScramClient, KafkaConn, _CachedLogin, complete_frames, pct, wait_for_quiet
from benchmarks.report import write_section
from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.bootstrap import build_services
from kafkaguard.config import load_settings
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker, KafkaNotConfigured
from tests.wire import decode_response, encode_request, frame, scram_exchange

HOST = "127.0.0.1"
#: Source addresses, all in 127.0.0.0/8 (checked in ``main``): Linux routes the whole block to the loopback device.
WATCHDOG_ADDRESS = "127.0.0.2"
OTHER_LOGIN_ADDRESS = "127.0.0.3"
ATTACKER_ADDRESS = "127.0.0.10"
MANY_SOURCES = [f"127.0.1.{i}" for i in range(1, 17)]
USER, PASSWORD = "bench", "bench-password"
ATTACKER, ATTACKER_PASSWORD = "attacker", "attacker-password"
ITERATIONS = 4096
CLIENT_ID = "bench-abuse"
#: node.id of the test broker; the proxy serves it on its listener port + 1 + NODE_ID.
NODE_ID = 1

WATCHDOG_INTERVAL_S = 0.002
LOGIN_INTERVAL_S = 0.1
LOGIN_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 5.0
#: Big-item frames: post-login, so up to max_request_bytes (100 MiB by default) would pass; the issue's sizes.
MIB = 1024 * 1024
#: Pre-auth frames: exactly the default max_unauthenticated_request_bytes.
PREAUTH_FRAME_BYTES = 512 * 1024
IDLE_CONNECTIONS = 11_000
#: The idle flood's pace. A burst overflows the server's accept queue (asyncio's default backlog is 100): the final
#: ACKs it drops leave connections the client counts as open and the server never accepted (it sends its SYN-ACK
#: again 1, 3, 7 … s later), so an unpaced flood of 11,000 had ~6,000 accepted after 25 s; paced, the server
#: accepted 10,000 in 5 s (measured on the code before issue 24).
IDLE_CONNECTS_PER_S = 3000
IDLE_CONNECTS_IN_FLIGHT = 400
#: Linux's IP_BIND_ADDRESS_NO_PORT (``socket`` names it from Python 3.12 on).
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
#: A target past this resident size is killed (it would take the shared machine's memory next).
RSS_LIMIT = 4 * 1024**3
TARGET_RATIO = 2.0
START_TIMEOUT_S = 60.0

# ------------------------------------------------------------------------------------------------ the frames
#
# Built by hand: kio needs seconds and hundreds of MiB to encode a million items, and the frames are only bytes.
# ``_checked`` compares each builder with kio's encoding of a small instance before it is trusted with a big one.


def uvarint_bytes(value: int) -> bytes:
    """An unsigned varint, written here rather than imported: this module is imported by the targets of the code
    before a change too (``Setup.data_dir``, the findings' "before" column), which may keep it elsewhere."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def header_v2(api_key: int, api_version: int, correlation_id: int = 0) -> bytes:
    """Request header v2: key, version, correlation id, client id (a non-compact nullable string), no tags."""
    client = CLIENT_ID.encode()
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client)) + client + b"\x00"


def compact_strings(items: Sequence[bytes]) -> bytes:
    """A compact array of compact strings."""
    return uvarint_bytes(len(items) + 1) + b"".join(uvarint_bytes(len(item) + 1) + item for item in items)


#: Legal in a topic name (Kafka's ``[a-zA-Z0-9._-]``): 64 characters, so 64³ = 262,144 names of three.
ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


def short_names() -> Generator[bytes, None, None]:
    """Distinct names, shortest first (``.`` and ``..`` skipped: Kafka refuses them as topic names)."""
    length = 1
    while True:
        for index in range(len(ALPHABET) ** length):
            name = bytearray()
            for _ in range(length):
                index, digit = divmod(index, len(ALPHABET))
                name.append(ALPHABET[digit])
            if bytes(name) not in (b".", b".."):
                yield bytes(name)
        length += 1


def fill(budget: int, names: Callable[[], Generator[bytes, None, None]] | None) -> list[bytes]:
    """As many names as fit in ``budget`` bytes of a compact string array (empty strings when ``names`` is None)."""
    if names is None:
        return [b""] * (budget - 8)  # one byte each, the array's own length prefix a few bytes
    out: list[bytes] = []
    used = 8
    for name in names():
        used += 1 + len(name)
        if used > budget:
            return out
        out.append(name)
    raise AssertionError("unreachable: names() never ends")


def describe_groups(groups: Sequence[bytes]) -> bytes:
    return header_v2(15, 5) + compact_strings(groups) + b"\x00" + b"\x00"  # include_authorized_operations, tags


def delete_topics(topics: Sequence[bytes]) -> bytes:
    return header_v2(20, 4) + compact_strings(topics) + struct.pack(">i", 30_000) + b"\x00"  # timeout_ms, tags


def find_coordinator(keys: Sequence[bytes]) -> bytes:
    return header_v2(10, 4) + b"\x00" + compact_strings(keys) + b"\x00"  # key_type GROUP, keys, tags


def describe_transactions(ids: Sequence[bytes]) -> bytes:
    return header_v2(65, 0) + compact_strings(ids) + b"\x00"


def api_versions_tagged(budget: int) -> bytes:
    """ApiVersions v3 whose body ends in as many empty unknown tagged fields (tags 0, 1, 2 …) as fit in ``budget``."""
    head = header_v2(18, 3) + compact_strings([b"x"])[1:] + compact_strings([b"1"])[1:]
    fields: list[bytes] = []
    used = len(head) + 4  # the count's varint
    for tag in range(budget):
        entry = uvarint_bytes(tag) + b"\x00"
        if used + len(entry) > budget:
            break
        fields.append(entry)
        used += len(entry)
    return head + uvarint_bytes(len(fields)) + b"".join(fields)


def junk(budget: int) -> bytes:
    """An ApiVersions v3 header, then random bytes up to ``budget``."""
    head = header_v2(18, 3)
    return head + random.Random(24).randbytes(budget - len(head))


def _checked() -> None:
    """Each builder encodes a small request exactly as kio does (so the big ones are what they claim to be)."""
    names = [b"a", b"", b"bc"]
    text = [n.decode() for n in names]
    pairs = [
        (describe_groups(names), DescribeGroupsRequest(groups=tuple(GroupId(n) for n in text),
                                                        include_authorized_operations=False)),
        (delete_topics(names), DeleteTopicsRequest(topic_names=tuple(TopicName(n) for n in text),
                                                    timeout=i32Timedelta.parse(timedelta(seconds=30)))),
        (find_coordinator(names), FindCoordinatorRequest(key_type=i8(0), coordinator_keys=tuple(text))),
        (describe_transactions(names),
         DescribeTransactionsRequest(transactional_ids=tuple(TransactionalId(n) for n in text))),
    ]  # fmt: skip
    for ours, body in pairs:
        expected = encode_request(body, 0, CLIENT_ID)
        assert ours == expected, f"{type(body).__name__}: {ours.hex()} != {expected.hex()}"
    plain = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    assert api_versions_tagged(0)[:-1] == encode_request(plain, 0, CLIENT_ID)[:-1]  # all but the tag count


#: The item arrays' share of a 1 MiB / 0.5 MiB frame (the header and the other fields take the rest).
BIG, HALF = MIB - 64, MIB // 2 - 64

#: The big-item requests: attack → (builder, bytes of items, names: None for empty strings).
ITEM_ARRAYS: dict[
    str, tuple[Callable[[Sequence[bytes]], bytes], int, Callable[[], Generator[bytes, None, None]] | None]
] = {
    "describe-groups-empty": (describe_groups, BIG, None),
    "describe-groups-distinct": (describe_groups, BIG, short_names),
    "delete-topics": (delete_topics, BIG, short_names),
    "find-coordinator": (find_coordinator, HALF, None),
    "describe-transactions": (describe_transactions, HALF, None),
}
PREAUTH_FRAMES: dict[str, Callable[[int], bytes]] = {"api-versions-tagged": api_versions_tagged, "junk": junk}


def payload(key: str) -> bytes:
    """The frame (without its length prefix) the attack ``key`` sends."""
    if key in ITEM_ARRAYS:
        build, budget, names = ITEM_ARRAYS[key]
        return build(fill(budget, names))
    return PREAUTH_FRAMES[key](PREAUTH_FRAME_BYTES)


def item_count(key: str) -> int:
    _build, budget, names = ITEM_ARRAYS[key]
    return len(fill(budget, names))


def with_correlation_id(payload: bytes, correlation_id: int) -> bytes:
    framed = bytearray(frame(payload))
    struct.pack_into(">i", framed, 8, correlation_id)
    return bytes(framed)


# ------------------------------------------------------------------------------------------------ the attacks

Kind = Literal["items", "idle", "preauth"]


@dataclass(frozen=True)
class Attack:
    key: str
    title: str
    kind: Kind
    targets: tuple[str, ...]
    #: Connections from the one address; from MANY_SOURCES, one per address (at least), or as many spread over them.
    connections: int


@functools.cache
def _attacks() -> list[Attack]:
    n = {key: item_count(key) for key in ITEM_ARRAYS}
    both = ("serve", "proxy")
    return [
        Attack("describe-groups-empty", f"DescribeGroups v5, {n['describe-groups-empty']:,} empty names (1 MiB)",
               "items", ("proxy",), 1),
        Attack("describe-groups-distinct",
               f"DescribeGroups v5, {n['describe-groups-distinct']:,} distinct names (1 MiB)", "items", ("proxy",), 1),
        Attack("find-coordinator", f"FindCoordinator v4, {n['find-coordinator']:,} empty keys (0.5 MiB)", "items",
               ("proxy",), 1),
        Attack("describe-transactions",
               f"DescribeTransactions v0, {n['describe-transactions']:,} empty ids (0.5 MiB)", "items", ("proxy",), 1),
        Attack("delete-topics", f"DeleteTopics v4, {n['delete-topics']:,} distinct names (1 MiB)", "items",
               ("serve",), 1),
        Attack("idle", "idle connection flood (connections that send nothing)", "idle", both, IDLE_CONNECTIONS),
        Attack("idle-hello", "idle connection flood after one ApiVersions each (then nothing)", "idle", both,
               IDLE_CONNECTIONS),
        Attack("api-versions-tagged", "pre-auth ApiVersions v3, 512 KiB of empty unknown tagged fields", "preauth",
               both, 4),
        Attack("junk", "pre-auth junk frames of 512 KiB", "preauth", both, 4),
    ]  # fmt: skip


@dataclass(frozen=True)
class AttackOrder:
    """What the attacker process is told (picklable)."""

    attack: Attack
    sources: tuple[str, ...]
    connections: int
    seconds: float
    cpu: int | None


@dataclass
class AttackStats:
    """What the attacker got done (sent back over the pipe)."""

    requests: int = 0  # frames sent
    answered: int = 0  # frames answered
    closed: int = 0  # connections the server closed (or reset)
    connects: int = 0  # TCP connections made
    connect_failures: int = 0  # refused, reset or timed out while connecting
    logins: int = 0
    login_failures: int = 0
    peak_open: int = 0  # idle flood: connections open at once, at most
    open_at_end: int = 0
    #: idle flood: ESTABLISHED at the server's end when the window closed. Fewer than open_at_end when the server's
    #: accept queue was full: the client then counts a connection whose last handshake packet the server dropped.
    established_at_server: int = 0
    ramp_s: float = float("nan")  # idle flood: seconds until peak_open was first reached
    answer_s: list[float] = field(default_factory=list)  # big items: seconds from send to answer
    stopped_early: str = ""


# ------------------------------------------------------------------------------------------------ a raw client


class RawConn(asyncio.Protocol):
    """One connection sending kio requests (ApiVersions, SASL) or pre-built frames, one at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiting: asyncio.Future[bytes] | None = None
        self._next_id = 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_exception(ConnectionError("closed by the server"))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        for payload in complete_frames(self._buffer):
            if self._waiting is not None and not self._waiting.done():
                self._waiting.set_result(payload)

    async def roundtrip(self, payload: bytes) -> bytes:
        """Send a pre-built request (its correlation id set) and return its answer's payload.

        :raises ConnectionError: the server closed the connection instead of answering."""
        if self.transport is None or self.transport.is_closing():
            raise ConnectionError("closed")
        self._waiting = asyncio.get_running_loop().create_future()
        correlation_id = self._next_id
        self._next_id += 1
        self.transport.write(with_correlation_id(payload, correlation_id))
        return await self._waiting

    async def request(self, body: Any) -> Any:
        """A kio request; its decoded answer."""
        payload = await self.roundtrip(encode_request(body, 0, CLIENT_ID))
        return decode_response(payload, type(body).__api_key__, type(body).__version__)[1]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def open_conn(factory: Callable[[], asyncio.Protocol], source: str, port: int) -> Any:
    """A TCP connection from ``source`` (a loopback address) to the target's ``port``; its protocol."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(CONNECT_TIMEOUT_S):  # not wait_for: on 3.11 it can swallow a cancellation
        _transport, protocol = await loop.create_connection(factory, HOST, port, local_addr=(source, 0))
    return protocol


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1.0")


#: The watchdog's ACL: DESCRIBE on the cluster, which DescribeAcls needs; the watchdog asks for exactly it.
CLUSTER = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)


def watchdog_request() -> DescribeAclsRequest:
    """DescribeAcls of the cluster's ACLs (one: the watchdog's own), answered by both targets themselves (the proxy
    from its store), so the broker's own pauses do not enter the proxy's numbers."""
    return DescribeAclsRequest(
        resource_type_filter=i8(ResourceType.CLUSTER.code),
        resource_name_filter=CLUSTER.name,
        pattern_type_filter=i8(PatternType.LITERAL.code),
        principal_filter=None,
        host_filter=None,
        operation=i8(AclOperation.ANY.code),
        permission_type=i8(AclPermissionType.ANY.code),
    )


def raise_nofile() -> None:
    """Open files up to the hard limit: the idle flood holds 11,000 sockets on each side."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ------------------------------------------------------------------------------------------------ the attacker


def _attacker_child(order: AttackOrder, pipe: PipeEnd) -> None:
    """Entry point of the attacker process: build the frame, say ready, attack on "go", report."""
    if order.cpu is not None:
        os.sched_setaffinity(0, {order.cpu})
    # SCHED_IDLE: the measuring client preempts the attacker the moment it wakes up (at nice 19 it still waited for
    # the core 16-31% of the window, measured), and the attacker has every cycle the client leaves.
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    raise_nofile()
    frame_bytes = b"" if order.attack.kind == "idle" else payload(order.attack.key)
    pipe.send(("ready", len(frame_bytes)))
    try:
        command, port = pipe.recv()
    except EOFError:
        return  # the run ended before this attack began
    if command != "go":
        return
    if order.attack.kind == "idle":
        hello = frame(encode_request(api_versions_request(), 1)) if order.attack.key == "idle-hello" else b""
        stats = idle_flood(order, port, hello)
    else:
        stats = asyncio.run(_attack(order, port, frame_bytes))
    pipe.send(("done", stats))


async def _attack(order: AttackOrder, port: int, payload: bytes) -> AttackStats:
    stats = AttackStats()
    worker = _items_worker if order.attack.kind == "items" else _preauth_worker
    sources = [order.sources[i % len(order.sources)] for i in range(order.connections)]
    stop_at = time.perf_counter() + order.seconds
    try:
        # The timeout ends a worker waiting on a stalled server; the workers also check stop_at themselves, since
        # Python 3.11's wait_for (inside asyncio's connect) can swallow a cancellation that races its result.
        async with asyncio.timeout(order.seconds):
            await asyncio.gather(*(worker(source, port, payload, stats, stop_at) for source in sources))
    except TimeoutError:
        pass  # the window is over: the workers were cancelled and closed their connections
    return stats


async def _connect(source: str, port: int, stats: AttackStats) -> RawConn | None:
    try:
        conn: RawConn = await open_conn(RawConn, source, port)
    except (OSError, TimeoutError):
        stats.connect_failures += 1
        await asyncio.sleep(0.01)  # not a hot loop against a listener that refuses
        return None
    stats.connects += 1
    return conn


async def _items_worker(source: str, port: int, payload: bytes, stats: AttackStats, stop_at: float) -> None:
    """Log in as the attacker, send the big request again and again; when the server closes the connection, connect
    and log in again."""
    while time.perf_counter() < stop_at:
        conn = await _connect(source, port, stats)
        if conn is None:
            continue
        try:
            try:
                await conn.request(api_versions_request())
                await _login(conn, ATTACKER, ATTACKER_PASSWORD)
            except (ConnectionError, AssertionError):
                stats.login_failures += 1
                await asyncio.sleep(0.01)
                continue
            stats.logins += 1
            while time.perf_counter() < stop_at:
                stats.requests += 1
                start = time.perf_counter()
                await conn.roundtrip(payload)
                stats.answered += 1
                stats.answer_s.append(time.perf_counter() - start)
        except ConnectionError:
            stats.closed += 1
        finally:
            conn.close()


#: The attacker's salted passwords, derived once: its logins then cost it four HMACs, not a PBKDF2, so it logs in
#: again as fast as the server lets it.
_ATTACKER_KEYS = CachedScramClient()


async def _login(conn: RawConn, user: str, password: str) -> None:
    """SCRAM-SHA-256 with bench_server's cached client steps, over ``conn``."""
    steps = scram_exchange(_CachedLogin(_ATTACKER_KEYS, "sha256", user, password), "SCRAM-SHA-256")
    try:
        body = next(steps)
        while True:
            body = steps.send(await conn.request(body))
    except StopIteration:
        return


async def _preauth_worker(source: str, port: int, payload: bytes, stats: AttackStats, stop_at: float) -> None:
    """Send the frame without logging in, again and again; connect again when the server closes the connection."""
    while time.perf_counter() < stop_at:
        conn = await _connect(source, port, stats)
        if conn is None:
            continue
        try:
            while time.perf_counter() < stop_at:
                stats.requests += 1
                await conn.roundtrip(payload)
                stats.answered += 1
        except ConnectionError:
            stats.closed += 1
        finally:
            conn.close()


def _still_open(sock: socket.socket) -> bool:
    """After a readable event on an idle connection: False at end of stream or on a reset."""
    try:
        return bool(sock.recv(65536))
    except BlockingIOError:
        return True
    except OSError:
        return False


def established_at(port: int) -> int:
    """TCP connections to 127.0.0.1:``port`` that are ESTABLISHED at its end (``/proc/net/tcp``; its accept queue
    included)."""
    local = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as table:
        next(table)
        return sum(1 for line in table if (fields := line.split())[1] == local and fields[3] == "01")


def idle_flood(order: AttackOrder, port: int, hello: bytes = b"") -> AttackStats:
    """Open connections that send nothing (``IDLE_CONNECTS_PER_S``, at most ``IDLE_CONNECTS_IN_FLIGHT`` connecting at
    once, from the sources in turn) until ``order.connections`` are open; open more when the server closes some; hold
    them to the window's end. With ``hello`` (a frame), each sends it once connected, then nothing (its answer is
    read and dropped): the server must then hold a served connection, not one waiting for its first bytes.

    Plain non-blocking sockets and epoll rather than asyncio: a connect costs the attacker a few syscalls."""
    stats = AttackStats()
    poller = select.epoll()
    sockets: dict[int, socket.socket] = {}
    connecting: dict[int, float] = {}  # fd → when its connect began (insertion order: oldest first)
    start = time.perf_counter()
    stop_at = start + order.seconds
    index = 0
    opened = 0

    def drop(fd: int) -> None:
        poller.unregister(fd)
        sockets.pop(fd).close()

    try:
        while (now := time.perf_counter()) < stop_at:
            while (
                opened + len(connecting) < order.connections
                and len(connecting) < IDLE_CONNECTS_IN_FLIGHT
                and index < (now - start) * IDLE_CONNECTS_PER_S
            ):
                sock = socket.socket()
                sock.setblocking(False)
                # the port is picked at connect time, per destination: a bind(0) scans the whole range per socket
                sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                try:
                    sock.bind((order.sources[index % len(order.sources)], 0))
                    code = sock.connect_ex((HOST, port))
                except OSError:
                    code = -1
                index += 1
                if code not in (0, errno.EINPROGRESS):
                    sock.close()
                    stats.connect_failures += 1
                    break  # out of ports or descriptors: wait for the poll below before trying again
                sockets[sock.fileno()] = sock
                connecting[sock.fileno()] = now
                poller.register(sock.fileno(), select.EPOLLOUT | select.EPOLLIN | select.EPOLLRDHUP)
            for fd, events in poller.poll(0.01):
                sock = sockets[fd]
                if fd in connecting:
                    del connecting[fd]
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        stats.connect_failures += 1
                        drop(fd)
                        continue
                    stats.connects += 1
                    opened += 1
                    if opened > stats.peak_open:
                        stats.peak_open, stats.ramp_s = opened, time.perf_counter() - start
                    poller.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                    if hello:
                        with contextlib.suppress(OSError):
                            sock.send(hello)  # a few dozen bytes: the socket buffer takes them at once
                    if not events & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
                        continue
                if not _still_open(sock):  # end of stream or reset: the server closed it
                    opened -= 1
                    stats.closed += 1
                    drop(fd)
            while connecting:
                fd, began = next(iter(connecting.items()))
                if now - began < CONNECT_TIMEOUT_S:
                    break
                del connecting[fd]
                stats.connect_failures += 1
                drop(fd)
    finally:
        stats.open_at_end = opened
        stats.established_at_server = established_at(port)
        for sock in sockets.values():
            sock.close()
        poller.close()
    return stats


class Attacker:
    """The attacker process: spawned (and its frame built) while the target starts, attacking on ``go``."""

    def __init__(self, order: AttackOrder) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._pipe, child = ctx.Pipe()
        self.process = ctx.Process(target=_attacker_child, args=(order, child), daemon=True)
        self.process.start()
        child.close()

    def wait_ready(self) -> None:
        if not self._pipe.poll(120):
            raise RuntimeError("the attacker process did not get ready")
        self._pipe.recv()

    def go(self, port: int) -> None:
        self._pipe.send(("go", port))

    def result(self, timeout: float) -> AttackStats:
        try:
            if not self._pipe.poll(timeout):
                return AttackStats(stopped_early="the attacker process did not report")
            _done, stats = self._pipe.recv()
            assert isinstance(stats, AttackStats)
            return stats
        finally:
            self.close()

    def close(self) -> None:
        self._pipe.close()  # an attacker still waiting for "go" sees the end of the pipe and returns
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


# ------------------------------------------------------------------------------------------------ the target


def free_port_pair(offset: int) -> int:
    """A port P with P and P + ``offset`` free on HOST (the proxy serves node N at its port + 1 + N)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port: int = probe.getsockname()[1]
        if port + offset > 65535:
            continue
        try:
            with socket.socket() as probe:
                probe.bind((HOST, port + offset))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of ports on 127.0.0.1")


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((HOST, port)) == 0


def prepare_data_dir(data_dir: Path) -> None:
    """``bench`` (the watchdog and the login probes) and ``attacker``, both with SCRAM credentials; ``bench`` may
    DESCRIBE the cluster (its DescribeAcls), the attacker has no ACL at all: it may describe nothing."""
    services = build_services(load_settings(None, data_dir=data_dir, super_users=f"User:{ADMIN}"))
    try:
        for user, password in ((USER, PASSWORD), (ATTACKER, ATTACKER_PASSWORD)):
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
                result = services.credentials.upsert_password(user, mechanism, password, ITERATIONS, actor=ACTOR)
                assert result.succeeded, result
        entry = AccessControlEntry(f"User:{USER}", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        outcomes = services.acls.create_acls([AclBinding(CLUSTER, entry)], actor=ACTOR)
        assert all(o.error is None for o in outcomes), outcomes
    finally:
        services.close()


@dataclass
class Setup:
    """What every target process of the run shares."""

    workdir: Path
    cpu: int | None
    executable: str
    broker: KafkaBroker | None
    settings: dict[str, str]
    #: Another ``src/`` first on the targets' path (``--server-pythonpath``), e.g. the code before a change.
    pythonpath: str | None = None

    def env(self) -> dict[str, str]:
        """The targets' environment: no KAFKAGUARD_* setting of ours leaks in."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env

    def data_dir(self, target: str) -> Path:
        """The target's store, prepared once, by the code the target runs (its schema may differ from ours)."""
        path = self.workdir / f"{target}-data"
        if not path.exists():
            repo = Path(__file__).resolve().parent.parent
            env = self.env()
            env["PYTHONPATH"] = os.pathsep.join(p for p in (self.pythonpath, str(repo)) if p)
            code = "import sys, pathlib, benchmarks.bench_abuse as b; b.prepare_data_dir(pathlib.Path(sys.argv[1]))"
            subprocess.run([sys.executable, "-c", code, str(path)], env=env, cwd=repo, check=True, timeout=120)
        return path

    def config_file(self) -> Path | None:
        """A YAML config (JSON is YAML) with the ``--setting`` values: an unknown key stops the target at start."""
        if not self.settings:
            return None
        path = self.workdir / "settings.yaml"
        path.write_text(json.dumps(self.settings))
        return path


class Target:
    """``kafkaguard serve`` or ``kafkaguard proxy`` as a child process pinned to its core with RLIMIT_NOFILE at the
    hard limit; ``stop`` terminates it (killing it when its loop does not answer the signal)."""

    def __init__(self, name: str, setup: Setup) -> None:
        self.name = name
        self.killed = ""
        data_dir = setup.data_dir(name)
        if name == "serve":
            self.port = free_port_pair(0)
            self.login_ports = [self.port]
            command = [setup.executable, "serve"]
        else:
            assert setup.broker is not None
            self.port = free_port_pair(1 + NODE_ID)
            self.login_ports = [self.port, self.port + 1 + NODE_ID]
            password_file = setup.workdir / "upstream-password"
            password_file.write_text(ADMIN_PASSWORD)
            password_file.chmod(0o600)
            command = [setup.executable, "proxy", "--advertised-host", HOST, "--upstream", setup.broker.bootstrap,
                       "--upstream-security-protocol", "SASL_PLAINTEXT", "--upstream-sasl-mechanism", "SCRAM-SHA-512",
                       "--upstream-user", ADMIN, "--upstream-password-file", str(password_file)]  # fmt: skip
        command += ["--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://{HOST}:{self.port}",
                    "--super-users", f"User:{ADMIN}", "--log-level", "WARNING"]  # fmt: skip
        config = setup.config_file()
        if config is not None:
            command += ["--config", str(config)]
        env = setup.env()
        cpu = setup.cpu

        def prepare() -> None:  # in the child before exec: every thread it starts inherits both
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
            raise_nofile()

        self.log = setup.workdir / f"{name}.log"
        with self.log.open("ab") as out:
            out.write(f"\n=== {' '.join(command)}\n".encode())
            out.flush()
            self.process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, preexec_fn=prepare)  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(listening(port) for port in self.login_ports):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"kafkaguard {name} did not start; its log:\n{self.tail()}")
            time.sleep(0.1)  # polling for the listeners, bounded by the deadline

    @property
    def pid(self) -> int:
        return self.process.pid

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self, reason: str) -> None:
        self.killed = reason
        self.process.kill()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(3)
            except subprocess.TimeoutExpired:
                self.process.kill()  # a frozen loop never runs its SIGTERM handler
                self.process.wait(10)


# ------------------------------------------------------------------------------------------------ measuring

Phase = Literal["quiet", "attacked"]
PHASES: tuple[Phase, ...] = ("quiet", "attacked")


@dataclass
class Latencies:
    """One phase of the watchdog: latencies (ms, corrected for coordinated omission), and what went wrong."""

    samples_ms: list[float] = field(default_factory=list)
    sent: int = 0
    censored: int = 0  # still unanswered when measuring ended: counted with the time waited so far
    errors: int = 0  # answered with an error, or not with the one ACL
    disconnects: int = 0

    def add(self, seconds: float) -> None:
        """One answer after ``seconds``, and the sends it held back (HdrHistogram's expected-interval correction)."""
        self.samples_ms.append(seconds * 1000)
        missing = seconds - WATCHDOG_INTERVAL_S
        while missing >= WATCHDOG_INTERVAL_S:
            self.samples_ms.append(missing * 1000)
            missing -= WATCHDOG_INTERVAL_S

    def percentile(self, q: float) -> float:
        return pct(sorted(self.samples_ms), q)

    @property
    def longest_ms(self) -> float:
        return max(self.samples_ms, default=float("nan"))


class Watchdog:
    """A logged-in client sending DescribeAcls every WATCHDOG_INTERVAL_S, one in flight; reconnects (and
    logs in again) when its connection is closed, the request's clock still running."""

    def __init__(self, port: int, scram: CachedScramClient) -> None:
        self.port = port
        self.scram = scram
        self.phase: Phase | None = None
        self.phases = {phase: Latencies() for phase in PHASES}
        self.inflight: tuple[float, Phase] | None = None
        self.conn: KafkaConn | None = None

    async def connect(self, stop: asyncio.Event) -> KafkaConn | None:
        """A logged-in connection, trying until it gets one; None once ``stop`` is set."""
        while not stop.is_set():
            try:
                conn: KafkaConn = await open_conn(KafkaConn, WATCHDOG_ADDRESS, self.port)
                await conn.request(api_versions_request())
                await self.scram.login(conn, ScramMechanism.SCRAM_SHA_256, USER, PASSWORD)
                return conn
            except (OSError, TimeoutError, ConnectionError, AssertionError, RuntimeError):
                await asyncio.sleep(0.05)
        return None

    async def run(self, stop: asyncio.Event) -> None:
        request = watchdog_request()
        self.conn = await self.connect(stop)
        next_at = time.perf_counter()
        while self.conn is not None and not stop.is_set():
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            phase = self.phase
            start = time.perf_counter()
            next_at = start + WATCHDOG_INTERVAL_S
            self.inflight = (start, phase) if phase is not None else None
            body = None
            while body is None and self.conn is not None:
                try:
                    body = await self.conn.request(request, timeout=3600)
                except (ConnectionError, OSError):
                    if phase is not None:
                        self.phases[phase].disconnects += 1
                    self.conn.close()
                    self.conn = await self.connect(stop)
            if body is None or self.conn is None:
                return  # stopped while the target was gone: ``censor`` counts the request
            elapsed = self.conn.last_frame_at - start
            self.inflight = None
            if phase is not None:
                latencies = self.phases[phase]
                latencies.sent += 1
                latencies.add(elapsed)
                if body.error_code != 0 or len(body.resources) != 1:
                    latencies.errors += 1

    def censor(self) -> None:
        """Count a request still in flight with the time it has waited so far."""
        if self.inflight is not None:
            start, phase = self.inflight
            self.phases[phase].sent += 1
            self.phases[phase].censored += 1
            self.phases[phase].add(time.perf_counter() - start)
            self.inflight = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


@dataclass
class Logins:
    ok_ms: list[float] = field(default_factory=list)
    refused: int = 0  # connection refused, closed or reset, or an error answer
    timed_out: int = 0  # not done within LOGIN_TIMEOUT_S

    @property
    def attempts(self) -> int:
        return len(self.ok_ms) + self.refused + self.timed_out

    @property
    def failed(self) -> int:
        return self.refused + self.timed_out


class LoginProbe:
    """Fresh logins from ``source``, one every LOGIN_INTERVAL_S (each given LOGIN_TIMEOUT_S), on ``ports`` in turn."""

    def __init__(self, source: str, ports: Sequence[int], scram: CachedScramClient) -> None:
        self.source = source
        self.ports = list(ports)
        self.scram = scram
        self.phase: Phase | None = None
        self.phases = {phase: Logins() for phase in PHASES}

    async def login(self, port: int) -> str:
        """An empty string when the login succeeded, else why not: "refused" or "timeout"."""
        conn: KafkaConn | None = None
        try:
            async with asyncio.timeout(LOGIN_TIMEOUT_S):
                conn = await open_conn(KafkaConn, self.source, port)
                versions = await conn.request(api_versions_request())
                if versions.error_code != 0:
                    return "refused"
                await self.scram.login(conn, ScramMechanism.SCRAM_SHA_256, USER, PASSWORD)
                return ""
        except TimeoutError:
            return "timeout"
        except (OSError, ConnectionError, AssertionError, RuntimeError):
            return "refused"
        finally:
            if conn is not None:
                conn.close()

    async def run(self, stop: asyncio.Event) -> None:
        index = 0
        while not stop.is_set():
            phase = self.phase
            start = time.perf_counter()
            outcome = await self.login(self.ports[index % len(self.ports)])
            index += 1
            elapsed = time.perf_counter() - start
            if phase is not None:
                logins = self.phases[phase]
                if outcome == "":
                    logins.ok_ms.append(elapsed * 1000)
                elif outcome == "timeout":
                    logins.timed_out += 1
                else:
                    logins.refused += 1
            await asyncio.sleep(max(0.0, start + LOGIN_INTERVAL_S - time.perf_counter()))


PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid``, all its threads (one small read: the measuring loop calls it)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def peak_rss_bytes(pid: int) -> int:
    """``VmHWM``: the most ``pid`` ever had resident."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def waited_s(pid: int) -> float:
    """Seconds the threads of ``pid`` spent runnable while another process held their core (``schedstat``): what
    the shared machine took from the target and from the measuring client."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


@dataclass
class Window:
    """CPU and waits of one window, as shares of one core / of the window."""

    target_cpu: float = float("nan")
    target_wait: float = float("nan")
    client_wait: float = float("nan")


class Meter:
    """Reads the target's CPU and both processes' waits at a window's start and end."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._at = self._read()

    def _read(self) -> tuple[float, float, float, float]:
        return time.perf_counter(), cpu_seconds(self.pid), waited_s(self.pid), waited_s(os.getpid())

    def window(self) -> Window:
        now = self._read()
        (wall0, cpu0, target0, client0), (wall1, cpu1, target1, client1) = self._at, now
        self._at = now
        wall = wall1 - wall0
        return Window((cpu1 - cpu0) / wall, (target1 - target0) / wall, (client1 - client0) / wall)


async def guard_memory(target: Target, peak: list[int]) -> None:
    """Keep ``peak[0]`` at the target's largest RSS seen; kill it past RSS_LIMIT."""
    while target.alive():
        rss = max(rss_bytes(target.pid), peak_rss_bytes(target.pid))
        peak[0] = max(peak[0], rss)
        if rss > RSS_LIMIT:
            target.kill(f"killed at {rss / 2**30:.1f} GiB resident")
            return
        await asyncio.sleep(0.2)


# ------------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class Plan:
    quick: bool
    warmup: float
    quiet: float
    attacked: float
    idle_attacked: float
    grace: float
    settle: float  # at most this long waiting for other load on the machine to settle before each attack

    @classmethod
    def make(cls, quick: bool) -> Plan:
        if quick:
            return cls(True, 0.5, 2.0, 4.0, 8.0, LOGIN_TIMEOUT_S + 1, 2.0)
        # the idle flood's window is longer: the server accepted 10,000 connections in ~5 s here
        return cls(False, 1.0, 4.0, 6.0, 12.0, LOGIN_TIMEOUT_S + 1, 10.0)


#: ``--quick`` runs these (attack, from many addresses) only.
QUICK = {("describe-groups-empty", False), ("describe-groups-empty", True), ("find-coordinator", False),
         ("describe-transactions", False), ("delete-topics", False), ("delete-topics", True), ("idle", False),
         ("api-versions-tagged", False), ("junk", False)}  # fmt: skip


@dataclass
class Row:
    target: str
    attack: Attack
    sources: int
    connections: int
    seconds: float
    quiet: Latencies
    attacked: Latencies
    logins: dict[str, dict[Phase, Logins]]  # "other" / "same" address
    stats: AttackStats
    quiet_window: Window
    attacked_window: Window
    rss_quiet_mib: float
    rss_peak_mib: float
    killed: str
    other_load: float

    @property
    def ratio(self) -> float:
        return self.attacked.percentile(0.99) / self.quiet.percentile(0.99)

    @property
    def met(self) -> bool:
        return self.ratio <= TARGET_RATIO and self.logins["other"]["attacked"].failed == 0 and not self.killed


def order_for(attack: Attack, many: bool, plan: Plan, cpu: int | None) -> AttackOrder:
    sources = tuple(MANY_SOURCES) if many else (ATTACKER_ADDRESS,)
    connections = attack.connections if attack.kind == "idle" or not many else max(len(sources), attack.connections)
    seconds = plan.idle_attacked if attack.kind == "idle" else plan.attacked
    return AttackOrder(attack, sources, connections, seconds, cpu)


async def measure(plan: Plan, setup: Setup, target_name: str, attack: Attack, many: bool, cpu: int | None) -> Row:
    """One attack on a fresh target: the quiet window, then the attacked one."""
    other_load = wait_for_quiet(plan.settle)
    order = order_for(attack, many, plan, cpu)
    attacker = Attacker(order)
    try:
        target = Target(target_name, setup)
    except BaseException:
        attacker.close()
        raise
    scram = CachedScramClient()
    watchdog = Watchdog(target.port, scram)
    probes = {"other": LoginProbe(OTHER_LOGIN_ADDRESS, target.login_ports, scram),
              "same": LoginProbe(order.sources[0], [target.port], scram)}  # fmt: skip
    tasks: list[asyncio.Task[None]] = []
    peak = [0]

    def phase(name: Phase | None) -> None:
        watchdog.phase = name
        for probe in probes.values():
            probe.phase = name

    try:
        attacker.wait_ready()
        stop = asyncio.Event()
        tasks = [asyncio.create_task(watchdog.run(stop)), *(asyncio.create_task(p.run(stop)) for p in probes.values()),
                 asyncio.create_task(guard_memory(target, peak))]  # fmt: skip
        await asyncio.sleep(plan.warmup)
        rss_quiet = rss_bytes(target.pid)
        meter = Meter(target.pid)
        phase("quiet")
        await asyncio.sleep(plan.quiet)
        phase(None)
        quiet_window = meter.window()
        attacker.go(target.port)
        phase("attacked")
        await asyncio.sleep(order.seconds)
        phase(None)
        attacked_window = meter.window()
        stop.set()
        _done, pending = await asyncio.wait(tasks[:-1], timeout=plan.grace)
        watchdog.censor()
        for task in [*pending, tasks[-1]]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stats = attacker.result(timeout=30)
        if target.alive():
            peak[0] = max(peak[0], peak_rss_bytes(target.pid))
    finally:
        for task in tasks:
            task.cancel()
        watchdog.close()
        target.stop()
        attacker.close()
    return Row(target_name, attack, len(order.sources), order.connections, order.seconds,
               watchdog.phases["quiet"], watchdog.phases["attacked"],
               {name: probe.phases for name, probe in probes.items()}, stats, quiet_window, attacked_window,
               rss_quiet / 2**20, peak[0] / 2**20, target.killed, other_load)  # fmt: skip


async def run_all(plan: Plan, setup: Setup, schedule: Sequence[tuple[str, Attack, bool]], cpu: int | None) -> list[Row]:
    rows = []
    for number, (target, attack, many) in enumerate(schedule, 1):
        where = f"{len(MANY_SOURCES)} addresses" if many else "1 address"
        _say(f"[{number}/{len(schedule)}] {target}: {attack.title}, from {where}")
        row = await measure(plan, setup, target, attack, many, cpu)
        _say(f"  watchdog p50/p99 quiet {_ms(row.quiet.percentile(0.5))} / {_ms(row.quiet.percentile(0.99))}, "
             f"attacked {_ms(row.attacked.percentile(0.5))} / {_ms(row.attacked.percentile(0.99))} "
             f"({row.ratio:,.1f}×), longest {_ms(row.attacked.longest_ms)}; logins from another address "
             f"{_logins(row.logins['other']['attacked'])}; attacker: {_attacker(row)}"
             + (f"; {row.killed}" if row.killed else ""))  # fmt: skip
        rows.append(row)
    return rows


def _say(text: str) -> None:
    print(f"[bench_abuse {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the report


def _ms(value: float) -> str:
    if value != value:
        return "–"
    if value >= 1000:
        return f"{value / 1000:,.1f} s"
    return f"{value:.2f} ms" if value < 10 else f"{value:,.0f} ms"


def _logins(logins: Logins) -> str:
    if not logins.attempts:
        return "none tried"
    text = f"{len(logins.ok_ms)} / {logins.failed}"
    why = [f"{n} {what}" for n, what in ((logins.refused, "refused"), (logins.timed_out, "timed out")) if n]
    if why:
        text += f" ({', '.join(why)})"
    if logins.ok_ms:
        ok = sorted(logins.ok_ms)
        text += f", p50 {_ms(pct(ok, 0.5))}, max {_ms(ok[-1])}"
    return text


def _attacker(row: Row) -> str:
    s = row.stats
    if s.stopped_early:
        return s.stopped_early
    logins = f"{s.logins:,} login{'' if s.logins == 1 else 's'}" + (
        f" ({s.login_failures:,} failed)" if s.login_failures else ""
    )
    rate = s.requests / row.seconds
    per_s = f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.1f}/s"
    failures = f", {s.connect_failures:,} connects failed" if s.connect_failures else ""
    if row.attack.kind == "idle":
        return (f"{s.peak_open:,} open at most (after {s.ramp_s:.1f} s), {s.open_at_end:,} at the end, "
                f"{s.established_at_server:,} of them established at the server; {s.connects:,} connects, "
                f"{s.closed:,} closed by the server{failures}")  # fmt: skip
    if row.attack.kind == "items":
        answer = f" (p50 {_ms(1000 * pct(sorted(s.answer_s), 0.5))})" if s.answer_s else ""
        return (f"{s.requests:,} sent ({per_s}), {s.answered:,} answered{answer}, "
                f"{s.closed:,} connections closed by the server; {logins}{failures}")  # fmt: skip
    return (f"{s.requests:,} sent ({per_s}), {s.answered:,} answered, {s.closed:,} "
            f"connections closed by the server{failures}")  # fmt: skip


def _pct(share: float) -> str:
    return "–" if share != share else f"{100 * share:.0f}%"


def _watchdog(latencies: Latencies) -> str:
    return f"{_ms(latencies.percentile(0.5))} / {_ms(latencies.percentile(0.99))}"


def _longest(latencies: Latencies) -> str:
    text = _ms(latencies.longest_ms)
    notes = []
    if latencies.censored:
        notes.append("still unanswered at the end")
    if latencies.disconnects:
        notes.append(f"{latencies.disconnects} disconnects")
    if latencies.errors:
        notes.append(f"{latencies.errors} error answers")
    return text + (f" ({', '.join(notes)})" if notes else "")


def _row(row: Row) -> str:
    ratio = row.ratio
    verdict = "✓" if row.met else "✗"
    where = f"{row.sources} address{'es' if row.sources > 1 else ''}"
    if row.attack.kind == "idle":
        where += f", up to {row.connections:,} connections"
    else:
        where += f", {row.connections} connection{'s' if row.connections > 1 else ''}"
    q, a = row.quiet_window, row.attacked_window
    target = f"{_pct(q.target_cpu)} → {_pct(a.target_cpu)}, {row.rss_quiet_mib:,.0f} → {row.rss_peak_mib:,.0f} MiB"
    waits = f"{_pct(q.target_wait)} / {_pct(q.client_wait)} → {_pct(a.target_wait)} / {_pct(a.client_wait)}"
    if row.killed:
        target += f"; **{row.killed}**"
    return (f"| {row.attack.title} | {where} | {_watchdog(row.quiet)} | {_watchdog(row.attacked)} | "
            f"**{ratio:,.1f}×** {verdict} | {_longest(row.attacked)} | {_logins(row.logins['other']['attacked'])} | "
            f"{_logins(row.logins['same']['attacked'])} | {_attacker(row)} | {target} | {waits} |")  # fmt: skip


@dataclass(frozen=True)
class Context:
    """How the run was made, for the report."""

    plan: Plan
    affinity: str
    code: str  # which kafkaguard the targets ran
    base: bool  # another src/ (``--server-pythonpath``): the section for the code before a change
    settings: dict[str, str]
    notes: list[str]


def code_label(pythonpath: str | None) -> str:
    if pythonpath:
        return f"`src/` from `{pythonpath}`"
    repo = Path(__file__).resolve().parent.parent
    git = shutil.which("git")
    if git is None:
        return "this tree"
    try:
        head = subprocess.run([git, "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()  # fmt: skip
        dirty = subprocess.run([git, "status", "--porcelain", "src"], cwd=repo, capture_output=True, text=True,
                               check=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "this tree"
    return f"this tree, `{head}`" + (" with uncommitted changes in `src/`" if dirty else "")


def render(rows: Sequence[Row], ctx: Context) -> str:
    plan, affinity, settings = ctx.plan, ctx.affinity, ctx.settings
    title = "Abuse, the code before the change" if ctx.base else "Abuse: what one client takes from the others"
    lines = [
        f"## {title} (`benchmarks/bench_abuse.py`)",
        "",
        f"Code measured: {ctx.code}. Issue 24's attacks against `kafkaguard serve` and against `kafkaguard proxy` "
        f"in front of the Kafka 3.9 test broker ({affinity}). A fresh target process per attack (default settings"
        + (", plus " + ", ".join(f"`{k}: {v}`" for k, v in settings.items()) if settings else "")
        + ", RLIMIT_NOFILE at the hard limit, SASL_PLAINTEXT on 127.0.0.1), measured in two windows: "
        f"{plan.quiet:g} s quiet, then {plan.attacked:g} s under attack ({plan.idle_attacked:g} s for the idle "
        "flood). **Watchdog**: a logged-in client (SCRAM-SHA-256) from 127.0.0.2 sending DescribeAcls of the "
        "cluster's one ACL (its own; both targets answer it themselves, so the broker's pauses stay out of the "
        f"proxy's numbers) every {WATCHDOG_INTERVAL_S * 1000:g} ms, one in "
        "flight; latencies corrected for coordinated omission (an answer after L also counts the sends it held back, "
        f"L − {WATCHDOG_INTERVAL_S * 1000:g} ms, L − {2 * WATCHDOG_INTERVAL_S * 1000:g} ms …, so a p99 is what a "
        "request sent at a random moment waits), and a request still unanswered when the window ends is waited for "
        f"up to {plan.grace:g} s, then counted with the time it waited. **Logins**: connect, ApiVersions, "
        f"SaslHandshake, SaslAuthenticate × 2, close, one every {LOGIN_INTERVAL_S * 1000:g} ms, each given "
        f"{LOGIN_TIMEOUT_S:g} s: from another address (127.0.0.3; on the proxy alternately to its bootstrap port and "
        "its broker port) and from the attacker's address; *ok / failed*. **Attacker**: a process of its own "
        "(`SCHED_IDLE` on this process's core: it runs whenever the watchdog does not), from 127.0.0.10 or from 16 "
        "addresses 127.0.1.1–16; big-item requests come from a logged-in user with "
        "no ACL (it may describe nothing), one in flight per connection, the next sent when the last is answered, a "
        "closed connection opened and logged in again; pre-auth frames are sent the same way without a login; the "
        f"idle flood opens up to {IDLE_CONNECTIONS:,} connections that send nothing, {IDLE_CONNECTS_PER_S:,} a "
        "second (faster bursts overflowed the accept queue of 100 of the code before issue 24 and left connections "
        "only the client believes open: *established at the server* counts them at the server's end), holds them, "
        "and opens more "
        "when the server closes some. *Target*: the server's CPU (share of one core, quiet → attacked) and "
        f"its resident memory (quiet → peak); a target past {RSS_LIMIT / 2**30:g} GiB is killed. *Waiting for a "
        "CPU*: the share of each window the target and this measuring process were runnable while another process "
        "held their core (`/proc/<pid>/task/*/schedstat`, summed over threads, so past 100% when several wait; the "
        "machine is shared), quiet → attacked. Targets (issue "
        "24): attacked p99 ≤ 2× quiet p99, and every login from another address succeeds (✓ when both hold).",
    ]
    for note in ctx.notes:
        lines += ["", f"**{note}**"]
    for target in ("serve", "proxy"):
        mine = [row for row in rows if row.target == target]
        if not mine:
            continue
        met = sum(row.met for row in mine)
        lines += [
            "",
            f"### `kafkaguard {target}`: {met} of {len(mine)} attacks within the targets",
            "",
            "| attack | from | watchdog p50 / p99, quiet | attacked | p99 attacked ÷ quiet | longest wait | logins "
            "from another address | logins from the attacker's address | the attacker | target: CPU, RSS | waiting "
            "for a CPU: target / watchdog |",
            "|---|---|---:|---:|---:|---:|---|---|---|---|---|",
            *(_row(row) for row in mine),
        ]
    loads = ", ".join(f"{row.other_load:.2f}" for row in rows)
    lines += ["", f"Other load on the machine before each attack (cores): {loads}."]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ main


def schedule(plan: Plan, targets: Sequence[str], only: Sequence[str]) -> list[tuple[str, Attack, bool]]:
    out = []
    for target in targets:
        for attack in _attacks():
            if target not in attack.targets or (only and attack.key not in only):
                continue
            for many in (False, True):
                if plan.quick and (attack.key, many) not in QUICK:
                    continue
                out.append((target, attack, many))
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter windows and fewer attacks (a demo, not a result)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--target", choices=["serve", "proxy"], action="append", help="only this target (repeatable)")
    attacks = [*ITEM_ARRAYS, "idle", "idle-hello", *PREAUTH_FRAMES, *FINDINGS]
    parser.add_argument("--only", action="append", default=[], choices=attacks,
                        help="only this attack or issue 36 finding (repeatable)")  # fmt: skip
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a kafkaguard setting for every target process (its config file key)")  # fmt: skip
    parser.add_argument("--kafkaguard", type=Path, help="the kafkaguard executable (default: beside this Python)")
    parser.add_argument(
        "--server-pythonpath",
        metavar="DIR",
        help="another src/ first on the targets' path, e.g. the code before a change "
        "(git archive REV src | tar -x -C DIR; pass DIR/src); writes the section abuse-base",
    )
    parser.add_argument("--label", help="how the report names the code measured (default: the revision or DIR)")
    parser.add_argument("--kafka-tgz", type=Path, help="Kafka tarball (default: KAFKA_TGZ/KAFKA_HOME, ../shared/kafka)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.bench_proxy import kafka_distribution, kafkaguard_executable

    args = parse_args(argv)
    plan = Plan.make(args.quick)
    loopback = ipaddress.ip_network("127.0.0.0/8")
    for address in (HOST, WATCHDOG_ADDRESS, OTHER_LOGIN_ADDRESS, ATTACKER_ADDRESS, *MANY_SOURCES):
        assert ipaddress.ip_address(address) in loopback, f"{address} is not a loopback address"
    settings = dict(item.split("=", 1) for item in args.setting)
    _checked()
    raise_nofile()
    targets = list(dict.fromkeys(args.target or ["serve", "proxy"]))
    cores = sorted(os.sched_getaffinity(0))
    target_cpu, client_cpu = (cores[-1], cores[0]) if len(cores) >= 2 else (None, None)
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})  # before the broker starts: its JVM shares this core, not the target's
        affinity = (f"the target pinned to CPU {target_cpu}; this measuring process, the attacker and the broker's "
                    f"JVM to CPU {client_cpu}")  # fmt: skip
    else:
        affinity = "unpinned: fewer than two usable cores"
    notes: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-abuse-"))
    broker: KafkaBroker | None = None
    try:
        if "proxy" in targets:
            try:
                home = kafka_distribution(tmp / "dist", args.kafka_tgz)
                _say("starting the Kafka broker")
                broker = KafkaBroker(home, tmp / "broker")
                broker.start()
            except (KafkaNotConfigured, RuntimeError, OSError) as e:
                notes.append(f"No Kafka broker ({e}): the proxy half did not run.")
                _say(notes[-1])
                broker = None
                targets.remove("proxy")
        setup = Setup(tmp, target_cpu, kafkaguard_executable(args.kafkaguard), broker, settings,
                      args.server_pythonpath)  # fmt: skip
        only_attacks = [key for key in args.only if key not in FINDINGS]
        only_findings = [key for key in args.only if key in FINDINGS]
        rows: list[Row] = []
        if only_attacks or not only_findings:
            rows = asyncio.run(run_all(plan, setup, schedule(plan, targets, only_attacks), client_cpu))
        finding_rows: list[FindingRow] = []
        before = None
        if not args.server_pythonpath and (only_findings or not only_attacks):
            before = before_tree(tmp)
            finding_rows = run_findings(
                FindingContext(tmp, setup.executable, broker, plan.quick, before), only_findings
            )
    finally:
        if broker is not None:
            broker.stop()
        if cores:
            os.sched_setaffinity(0, set(cores))
        shutil.rmtree(tmp, ignore_errors=True)
    base = bool(args.server_pythonpath)
    context = Context(plan, affinity, args.label or code_label(args.server_pythonpath), base, settings, notes)
    write = not (args.no_write or args.quick or args.only or args.target)
    if rows:
        markdown = render(rows, context)
        print(markdown)
        if write:
            write_section("abuse-base" if base else "abuse", markdown)
    if finding_rows:
        findings = render_findings(finding_rows, before=before)
        print(findings)
        if write or (not args.no_write and not args.quick and only_findings == list(FINDINGS)):
            write_section("abuse-findings", findings)
    return 0


if __name__ == "__main__":
    sys.exit(main())

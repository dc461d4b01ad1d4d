"""Authorizing proxy benchmark: real Kafka clients straight to a real Kafka broker, and through ``kafkaguard proxy``.

Run: ``.venv/bin/python -m benchmarks.bench_proxy [--quick] [--tls] [--soak-seconds N] [--json out.json]`` (or
``scripts/bench proxy``). Needs Java 17+ and a Kafka distribution: ``KAFKA_TGZ`` / ``KAFKA_HOME`` as for the
real-Kafka tests, ``--kafka-tgz``, or else ``../shared/kafka/kafka_*.tgz`` next to the checkout.
``--direct-only`` measures the direct half alone (no proxy). ``--kafkaguard PATH`` runs another kafkaguard
executable; ``--proxy-arg=--log-level --proxy-arg=WARNING`` passes more arguments to ``kafkaguard proxy``;
``--audit-mode all`` runs it with an audit log. Rolling out ACL changes (issue 27): ``--enforcement permissive`` runs
the proxy permissive, ``--shadow-acls`` with a shadow ACL set of the same size as the active one (the bench's ACLs,
the group renamed: the group's requests flip, Produce and Fetch do not); either implies an audit log (``denied``
unless ``--audit-mode`` says otherwise). Compare such a run with a plain one of the same ``--audit-mode``.
``--passthrough`` (issue 38) adds a side: a second ``kafkaguard proxy`` with ``--upstream-authentication
passthrough``, the same data directory contents, in the same rounds (see *passthrough* below); with ``--tls`` too it
runs over SASL_SSL both ways as the service-account proxy does.

One run, one machine, one set of client settings (``benchmarks.kafka_load``: confluent-kafka/librdkafka, SCRAM-SHA-512
over SASL_PLAINTEXT, as the non-super user ``bench``; producer linger.ms=5, batch.size=256 KiB, acks=all, no
compression; the consumer's fetch settings spelled out), the only difference being the bootstrap address:

- *direct*: the Kafka 3.9 test broker (``tests/kafka/broker.py``: KRaft, one node, StandardAuthorizer), where
  ``bench`` has a SCRAM-SHA-512 credential and WRITE, READ, DESCRIBE on the topic and READ on the group, made with
  the Admin API as the broker's super user ``admin``;
- *proxy*: ``kafkaguard proxy`` in front of the same broker (upstream SASL_PLAINTEXT, SCRAM-SHA-512 as ``admin``),
  with ``bench``'s credentials and the same ACLs written into the proxy's data directory before it starts; the
  proxy authorizes every request itself and forwards it as ``admin``;
- *passthrough* (``--passthrough``): a second proxy, the same but with ``upstream_authentication: passthrough``:
  ``bench``'s SCRAM-SHA-512 login is relayed to the broker, and its requests go up on its own connection as
  ``bench`` (the broker's ACLs for ``bench``, made above, apply as well as kafkaguard's). Its results stand next to
  the service-account proxy's of the same rounds.

Measured, each proxy result next to the direct one of the same run (``--rounds`` rounds, the order of direct and
proxy alternating from round to round, after a warm-up both ways):

1. produce throughput: ``--messages`` messages of 1 KiB, from the first ``produce`` to the end of ``flush``;
2. consume throughput: a consumer (subscribe, group without commits, from the earliest offset) reads as many;
   counted from the first batch's arrival; the time to that first batch (group join, first fetch) separately;
3. latency at a fixed rate (5,000 messages/s for ``--latency-seconds`` after a warm-up second): produce → delivery
   report and produce → consumer (a second consumer assigned at the partition's end, in this process);
4. CPU (user + system, ``/proc/<pid>/stat``, as a share of one core over each phase's timed window) of the proxy,
   the broker (JVM) and this process (the clients), and how long each waited for a CPU (``schedstat``); the proxy's
   RSS after each phase and its peak (``VmHWM``);
5. with ``--soak-seconds N``: the fixed-rate load through the proxy for N seconds, the proxy's RSS sampled every
   10 s: first, last, max and the slope of a least-squares line;
6. the newer protocols' consumers (issue 28, ``CASES``), measured as phase 2 in the same rounds: a consumer on the
   KIP-848 protocol (``group.protocol=consumer``: ConsumerGroupHeartbeat instead of JoinGroup/SyncGroup/Heartbeat),
   and a consumer fetching at Fetch v13+ (topic ids; librdkafka 2.4+ fetches at up to v16, KIP-951, and takes the
   highest version both sides offer, so phase 2 itself fetches at v13+ wherever that is offered: this case names
   it and is skipped where it is not). A case runs on a side only when that side's ApiVersions offers the API and
   version it needs (asked before login, as clients ask); otherwise it is skipped with the reason printed and in
   the report, never failed — the proxy offers ConsumerGroupHeartbeat and Fetch v13+ once their handlers exist,
   and the direct broker offers ConsumerGroupHeartbeat only when configured for the consumer protocol
   (``group.coordinator.rebalance.protocols=classic,consumer``).

``--tls`` (issue 39: the production data path) runs every side over SASL_SSL, certificates from a bench CA
(``tests/kafka/pki.py``) checked by every client with its host name: *direct* to the broker's SASL_SSL listener
(``KafkaBroker(tls=…)``); *proxy* with a SASL_SSL listener and SASL_SSL upstream, so it decrypts and encrypts every
byte twice; and, in place of the bare hop, *haproxy*: HAProxy (Debian's, ``HAPROXY_CONFIG``: mode tcp, one thread)
terminating the client's TLS and opening its own to the broker's HOP listener (SASL_SSL then), verifying the broker's
certificate. Its CPU is metered as the proxy's is, from its pid, and the report adds millicores per MB/s (1000 × CPU
seconds per MB of payload, per run) for the process in the middle and for the broker. The broker runs on Kafka's
own JVM settings then (``KAFKA_JVM_OPTIONS``: the fixture's C1-only JIT caps the JDK's TLS at ~35 MB/s). Its section
of docs/benchmarks.md is ``proxy-tls``, beside the plaintext ``proxy``.

The machine is shared: before each phase the run waits (a few seconds at most) for other load to settle, and
reports the load it saw. Prints a markdown section (written to docs/benchmarks.md unless ``--quick``,
``--direct-only`` or ``--no-write``) and writes every number as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding as RdAclBinding
from confluent_kafka.admin._acl import AclOperation as RdAclOperation
from confluent_kafka.admin._acl import AclPermissionType as RdAclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType as RdPatternType
from confluent_kafka.admin._resource import ResourceType as RdResourceType
from confluent_kafka.admin._scram import ScramCredentialInfo, UserScramCredentialUpsertion
from confluent_kafka.admin._scram import ScramMechanism as RdScramMechanism
from confluent_kafka.cimpl import NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.static.primitive import i32, i32Timedelta

from benchmarks.bench_server import wait_for_quiet
from benchmarks.kafka_load import (
    ClientSettings,
    Latency,
    LoadError,
    Throughput,
    broker_addresses,
    consume_throughput,
    fixed_rate,
    pct,
    produce_throughput,
    wait_ready,
)
from benchmarks.report import machine, write_section
from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.bootstrap import build_services
from kafkaguard.config import load_settings
from kafkaguard.proxy.nodes import MAX_NODE_ID, node_port
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.kafka.broker import (
    ADMIN,
    ADMIN_PASSWORD,
    KafkaBroker,
    KafkaNotConfigured,
    ServerCertificate,
    free_port,
    kafka_home,
)
from tests.kafka.pki import CertificateAuthority
from tests.wire import Wire

HOST = "127.0.0.1"
TOPIC = "kafkaguard-bench"
GROUP = "kafkaguard-bench"
#: The KIP-848 consumer's group: a group of its own (a classic group with members cannot take consumer members).
GROUP_KIP848 = "kafkaguard-bench-kip848"
USER, PASSWORD = "bench", "bench-password"
ITERATIONS = 4096
SIZE = 1024
#: node.id of the test broker; the proxy serves upstream node N on its listener port + 1 + N.
NODE_ID = 1
#: The topic keeps at most this much (a soak writes ~5 MB/s; the broker checks retention every 5 minutes).
RETENTION_BYTES = 1024 * 1024 * 1024
SEGMENT_BYTES = 128 * 1024 * 1024
SOAK_SAMPLE_S = 10.0
PROXY_START_TIMEOUT = 60.0
SIDES = ("direct", "hop", "haproxy", "proxy", "passthrough")
#: The sides that are a ``kafkaguard proxy`` (their Metadata must list the proxy's node ports).
PROXY_SIDES = ("proxy", "passthrough")
#: The sides that are a throughput baseline only (phases 1-2: no newer-protocol cases, no latency phase).
BASELINES = ("hop", "haproxy")
#: The bare hop: socat forwarding TCP (no Kafka parsing, 1 MiB buffers, TCP_NODELAY both ways) to the broker's HOP
#: listener, which advertises the forwarder's port, so its clients' every byte crosses one extra loopback hop.
SOCAT = ("socat", "-b", str(1024 * 1024))
#: Under ``--tls`` the bare hop is HAProxy (Debian's), mode tcp, terminating the client's TLS and opening its own to
#: the broker's HOP listener (SASL_SSL there), verifying the broker's certificate: the same two TLS legs as the
#: proxy's, done by a C proxy that parses no Kafka. One thread, as the proxy has one event loop.
HAPROXY_CONFIG = """\
global
    nbthread 1
    maxconn 4096

defaults
    mode tcp
    timeout connect 10s
    timeout client 10m
    timeout server 10m

frontend kafka_tls
    bind {host}:{port} ssl crt {pem}
    default_backend broker_tls

backend broker_tls
    server broker {host}:{upstream} ssl verify required ca-file {ca} verifyhost localhost
"""


@dataclass(frozen=True)
class Case:
    """One of the newer protocols' consumers (module docstring, item 6): phase ``phase``, run on a side only when it
    offers ``api`` at ``version`` or above; the consumer takes ``config`` over ``kafka_load.CONSUMER``."""

    phase: str
    label: str
    api: ApiKey
    version: int
    group: str
    config: dict[str, Any] = field(default_factory=dict)


CASES = (
    Case("consume-kip848", "consume, KIP-848 consumer (group.protocol=consumer)", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0,
         GROUP_KIP848, {"group.protocol": "consumer"}),
    Case("consume-fetch13", "consume, Fetch v13+ (topic ids)", ApiKey.FETCH, 13, GROUP),
)  # fmt: skip


def tls_context(settings: ClientSettings) -> ssl.SSLContext | None:
    """A TLS context trusting ``settings.ssl_cafile`` (host names checked) for a SASL_SSL side; None otherwise."""
    if settings.ssl_cafile is None:
        return None
    return ssl.create_default_context(cafile=settings.ssl_cafile)


def offered_versions(bootstrap: str, tls: ssl.SSLContext | None = None) -> dict[int, tuple[int, int]]:
    """What the broker (or proxy) at ``bootstrap`` offers: its ApiVersions v3 answer, asked before login (as every
    client asks first)."""
    host, port = bootstrap.rsplit(":", 1)
    with Wire((host, int(port)), tls=tls, timeout=30) as wire:
        answer = wire.request(ApiVersionsRequest(client_software_name="kafkaguard-bench", client_software_version="1"))
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}


def why_not(case: Case, offered: dict[int, tuple[int, int]], settings: ClientSettings) -> str | None:
    """Why ``case`` cannot run against a side offering ``offered`` (at ``settings.bootstrap``), or None."""
    found = offered.get(int(case.api))
    if found is None:
        return f"{case.api.api_name} is not offered"
    if found[1] < case.version:
        return f"{case.api.api_name} is offered up to v{found[1]}, the case needs v{case.version}+"
    if case.api is ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return consumer_protocol_refusal(settings)
    return None


def consumer_protocol_refusal(settings: ClientSettings) -> str | None:
    """Why a KIP-848 member cannot join at ``settings.bootstrap``, or None. Kafka 3.9 lists ConsumerGroupHeartbeat in
    ApiVersions whatever its configuration, and its classic group coordinator answers it UNSUPPORTED_VERSION ("The old
    group coordinator does not support ConsumerGroupHeartbeat API", ``GroupCoordinatorAdapter``): so a member with
    an empty subscription (it takes no partition) joins and leaves at once, as ``bench``."""
    host, port = settings.bootstrap.rsplit(":", 1)
    with Wire((host, int(port)), tls=tls_context(settings), timeout=30) as wire:
        wire.login(settings.user, settings.password, settings.mechanism)
        joined = wire.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId(GROUP_KIP848), member_id="", member_epoch=i32(0), rebalance_timeout=i32Timedelta.parse(
                timedelta(seconds=30)), subscribed_topic_names=(), topic_partitions=()))  # fmt: skip
        if joined.error_code != ErrorCode.none:
            said = f": {joined.error_message}" if joined.error_message else ""
            return f"ConsumerGroupHeartbeat is answered {joined.error_code.name}{said} (consumer protocol not enabled)"
        wire.request(ConsumerGroupHeartbeatRequest(group_id=GroupId(GROUP_KIP848), member_id=joined.member_id or "",
                                                   member_epoch=i32(-1), topic_partitions=None))  # fmt: skip  # leaves
    return None


# ------------------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Plan:
    messages: int
    warmup_messages: int
    rate: float
    latency_s: float
    latency_warmup_s: float
    rounds: int
    soak_s: float
    quiet_s: float

    @classmethod
    def make(cls, args: argparse.Namespace) -> Plan:
        quick = bool(args.quick)
        # 1M messages: a consume run of 200k lasted ~0.2 s, too short to measure on this machine's noise
        messages = args.messages or (20_000 if quick else 1_000_000)
        return cls(
            messages=messages,
            warmup_messages=max(1000, min(messages // 10, 50_000)),
            rate=float(args.rate),
            latency_s=float(args.latency_seconds or (5 if quick else 20)),
            latency_warmup_s=1.0,
            rounds=int(args.rounds or (1 if quick else 5)),
            soak_s=float(args.soak_seconds),
            quiet_s=2.0 if quick else 10.0,
        )


# ------------------------------------------------------------------------------------------------ /proc

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat_fields(pid: int) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name (so index 0 is the state, 1 the parent pid)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, as they are now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                children.setdefault(int(_stat_fields(int(entry.name))[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants (0 for processes that are gone)."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat_fields(member)
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def runqueue_waits(pid: int) -> dict[int, int]:
    """Nanoseconds each thread of ``pid`` spent runnable but waiting for a CPU (``/proc/<pid>/task/*/schedstat``)."""
    waits = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            waits[int(stat.parent.name)] = int(stat.read_text().split()[1])
    return waits


def oncpu_ns(pid: int) -> dict[int, int]:
    """Nanoseconds each thread of ``pid`` spent on a CPU (``schedstat``'s first field: exact, where ``/proc/<pid>/stat``
    counts 10 ms ticks)."""
    times = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            times[int(stat.parent.name)] = int(stat.read_text().split()[0])
    return times


def thread_seconds(before: dict[int, int], after: dict[int, int]) -> float:
    """Seconds between two per-thread nanosecond readings, over the threads alive at the end (threads that ended in
    between are lost: an undercount, never negative)."""
    return sum(ns - before.get(tid, 0) for tid, ns in after.items()) / 1e9


def waited_s(before: dict[int, int], after: dict[int, int]) -> float:
    """Seconds waited between two ``runqueue_waits``."""
    return thread_seconds(before, after)


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_bytes(pid: int) -> int:
    """Resident set of ``pid`` and its descendants."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(_stat_fields(member)[21]) * PAGE
    return total


def peak_rss_bytes(pid: int) -> int:
    """``VmHWM`` of ``pid`` (its own peak resident set)."""
    try:
        return _status_kib(pid, "VmHWM") * 1024
    except OSError:
        return 0


@dataclass
class Usage:
    """CPU of one phase as shares of one core; the proxy's memory at its end (MiB). On the ``haproxy`` side the
    ``proxy_*`` fields are HAProxy's: the process in the middle of the side's path."""

    seconds: float = 0.0
    proxy_cpu: float = float("nan")
    broker_cpu: float = float("nan")
    client_cpu: float = float("nan")
    proxy_rss_mib: float = float("nan")
    proxy_peak_mib: float = float("nan")
    other_load: float = float("nan")  # cores busy elsewhere just before the phase
    # shares of the phase each process was runnable but waiting for a CPU (/proc/<pid>/task/*/schedstat)
    proxy_wait: float = float("nan")
    broker_wait: float = float("nan")
    client_wait: float = float("nan")
    #: The proxy's CPU seconds over the phase from ``schedstat`` (ns), over the threads alive at its end.
    proxy_cpu_exact_s: float = float("nan")


@contextlib.contextmanager
def metered(usage: Usage, broker_pid: int, proxy_pid: int | None) -> Iterator[Usage]:
    """Fills ``usage`` with what the processes used between entering and leaving."""
    wall, client = time.perf_counter(), time.process_time()
    broker = cpu_seconds(broker_pid)
    proxy = cpu_seconds(proxy_pid) if proxy_pid is not None else 0.0
    waits = {pid: runqueue_waits(pid) for pid in (os.getpid(), broker_pid, proxy_pid) if pid is not None}
    proxy_ns = oncpu_ns(proxy_pid) if proxy_pid is not None else {}
    yield usage
    usage.seconds = wall = time.perf_counter() - wall
    usage.client_cpu = (time.process_time() - client) / wall
    usage.broker_cpu = (cpu_seconds(broker_pid) - broker) / wall
    usage.client_wait = waited_s(waits[os.getpid()], runqueue_waits(os.getpid())) / wall
    usage.broker_wait = waited_s(waits[broker_pid], runqueue_waits(broker_pid)) / wall
    if proxy_pid is not None:
        usage.proxy_cpu = (cpu_seconds(proxy_pid) - proxy) / wall
        usage.proxy_cpu_exact_s = thread_seconds(proxy_ns, oncpu_ns(proxy_pid))
        usage.proxy_wait = waited_s(waits[proxy_pid], runqueue_waits(proxy_pid)) / wall
        usage.proxy_rss_mib = rss_bytes(proxy_pid) / 2**20
        usage.proxy_peak_mib = peak_rss_bytes(proxy_pid) / 2**20


# ------------------------------------------------------------------------------------------------ setup


def kafka_distribution(unpack_into: Path, tgz: Path | None) -> Path:
    """An unpacked Kafka: ``--kafka-tgz``, else KAFKA_HOME / KAFKA_TGZ, else the shared tarball next to the checkout."""
    if tgz is not None:
        os.environ["KAFKA_TGZ"] = str(tgz)
        os.environ.pop("KAFKA_HOME", None)
    elif not os.environ.get("KAFKA_HOME") and not os.environ.get("KAFKA_TGZ"):
        shared = sorted((Path(__file__).resolve().parents[2] / "shared" / "kafka").glob("kafka_*.tgz"))
        shared += sorted((Path(__file__).resolve().parents[2] / "shared" / "kafka").glob("kafka_*.tar.gz"))
        if shared:
            os.environ["KAFKA_TGZ"] = str(shared[0])
    return kafka_home(unpack_into)


def _bench_acls() -> list[tuple[ResourceType, str, AclOperation]]:
    return [
        (ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
        (ResourceType.TOPIC, TOPIC, AclOperation.READ),
        (ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE),
        (ResourceType.GROUP, GROUP, AclOperation.READ),
        (ResourceType.GROUP, GROUP_KIP848, AclOperation.READ),
    ]


#: An ACL for ``bench`` beyond ``_bench_acls``'s literal ones (a benchmark's own, e.g. a prefix of fresh group ids):
#: resource type, name, operation, pattern type.
ExtraAcl = tuple[ResourceType, str, AclOperation, PatternType]


def _acls(extra: Sequence[ExtraAcl]) -> list[ExtraAcl]:
    return [(kind, name, operation, PatternType.LITERAL) for kind, name, operation in _bench_acls()] + list(extra)


def setup_broker(broker: KafkaBroker, extra_acls: Sequence[ExtraAcl] = ()) -> None:
    """The bench topic, ``bench``'s SCRAM-SHA-512 credential and its ACLs (and ``extra_acls``) on the real broker, as
    ``admin``."""
    admin = AdminClient(ClientSettings(broker.bootstrap, ADMIN, ADMIN_PASSWORD).config(log_level=4))
    config = {"retention.bytes": str(RETENTION_BYTES), "segment.bytes": str(SEGMENT_BYTES)}
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)]).values():
        future.result(60)
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(RdScramMechanism.SCRAM_SHA_512, ITERATIONS), PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(60)
    rd_types = {ResourceType.TOPIC: RdResourceType.TOPIC, ResourceType.GROUP: RdResourceType.GROUP}
    bindings = [
        RdAclBinding(rd_types[kind], name, RdPatternType[pattern.name], f"User:{USER}", "*",
                     RdAclOperation[operation.name], RdAclPermissionType.ALLOW)
        for kind, name, operation, pattern in _acls(extra_acls)
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(60)


def prepare_proxy_data_dir(data_dir: Path, extra_acls: Sequence[ExtraAcl] = ()) -> None:
    """``bench``'s credentials (both mechanisms) and the same ACLs (and ``extra_acls``) in a fresh kafkaguard data
    directory."""
    services = build_services(load_settings(None, data_dir=data_dir, super_users=f"User:{ADMIN}"))
    try:
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            result = services.credentials.upsert_password(USER, mechanism, PASSWORD, ITERATIONS, actor=ACTOR)
            assert result.succeeded, result
        outcomes = services.acls.create_acls(
            [
                AclBinding(
                    ResourcePattern(kind, name, pattern),
                    AccessControlEntry(f"User:{USER}", "*", operation, AclPermissionType.ALLOW),
                )
                for kind, name, operation, pattern in _acls(extra_acls)
            ],
            actor=ACTOR,
        )
        assert all(o.error is None for o in outcomes), outcomes
    finally:
        services.close()


class ProxyFailed(Exception):
    """``kafkaguard proxy`` did not start (or died)."""


def _free_port_pair(offset: int) -> int:
    """A port P such that P and P + ``offset`` are both free on HOST."""
    for _ in range(100):
        port = free_port()
        if port + offset > 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind((HOST, port + offset))
            except OSError:
                continue
        return port
    raise RuntimeError("no free pair of ports")


def free_listener_ports(count: int, offset: int) -> list[int]:
    """``count`` ports as ``_free_port_pair(offset)`` gives them, far enough apart for one proxy to listen on all:
    each listener claims its port and one per node after it (``nodes.check_listeners``, which refuses overlaps). Ports
    picked at random overlapped about one start in five with three listeners."""
    span = node_port(0, MAX_NODE_ID)  # the claimed ports after a listener's own
    chosen: list[int] = []
    for _ in range(1000):
        if len(chosen) == count:
            return chosen
        port = _free_port_pair(offset)
        if port + span <= 65535 and all(abs(port - other) > span for other in chosen):
            chosen.append(port)
    raise RuntimeError(f"no {count} free listener ports {span} apart")


def kafkaguard_executable(given: Path | None) -> str:
    if given is not None:
        return str(given)
    beside = Path(sys.executable).with_name("kafkaguard")
    if beside.is_file():
        return str(beside)
    found = shutil.which("kafkaguard")
    if found is None:
        raise ProxyFailed("no kafkaguard executable beside this Python or on PATH")
    return found


class ProxyProcess:
    """``kafkaguard proxy`` as a child process, its output in files; ``stop`` terminates it, then kills it."""

    def __init__(self, command: list[str], workdir: Path, ports: Sequence[int]) -> None:
        self.command = command
        self.stdout_path = workdir / "proxy.stdout"
        self.stderr_path = workdir / "proxy.stderr"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:  # the child keeps its own
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        deadline = time.monotonic() + PROXY_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ProxyFailed(
                    f"kafkaguard proxy exited with status {self.process.returncode} at start:\n{self.output_tail()}"
                )
            if all(_listening(port) for port in ports):
                return
            time.sleep(0.2)  # polling for the listeners, bounded by the deadline
        self.stop()
        raise ProxyFailed(
            f"kafkaguard proxy did not listen on {', '.join(map(str, ports))} in {PROXY_START_TIMEOUT:g} s"
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output_tail(self, chars: int = 4000) -> str:
        parts = []
        for path in (self.stderr_path, self.stdout_path):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").strip()
                if text:
                    parts.append(f"--- {path.name} (last {chars} characters) ---\n{text[-chars:]}")
        return "\n".join(parts) or "(the proxy wrote nothing)"

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@dataclass
class Hop:
    """socat listening on ``port`` (see ``SOCAT``), forwarding every connection to the broker's HOP listener."""

    port: int
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, port: int, broker_hop_port: int, logs: Path) -> Hop:
        command = [*SOCAT, f"TCP-LISTEN:{port},bind={HOST},reuseaddr,fork,nodelay",
                   f"TCP:{HOST}:{broker_hop_port},nodelay"]  # fmt: skip
        with (logs / "socat.stderr").open("wb") as err:
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 10
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise LoadError(f"socat did not listen on {port}: {' '.join(command)}")
            time.sleep(0.05)  # bounded by the deadline
        return cls(port, process)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass(frozen=True)
class TlsFiles:
    """The ``--tls`` run's certificates (``tests/kafka/pki.py``, EC P-256): one CA, and a server certificate for
    127.0.0.1 and localhost each for the broker, HAProxy and the proxy (no client certificates: SCRAM logs in)."""

    ca: Path
    broker: ServerCertificate
    proxy_cert: Path
    proxy_key: Path
    #: HAProxy's ``crt``: certificate and key in one file.
    haproxy_pem: Path

    @classmethod
    def make(cls, directory: Path) -> TlsFiles:
        ca = CertificateAuthority.create("kafkaguard bench CA")
        hosts = (HOST, "localhost")
        broker = ca.issue("CN=broker", hosts=hosts)
        proxy_cert, proxy_key = ca.issue("CN=kafkaguard-proxy", hosts=hosts).write(directory, "proxy")
        haproxy = ca.issue("CN=haproxy", hosts=hosts)
        haproxy_pem = directory / "haproxy.pem"
        haproxy_pem.write_text(haproxy.certificate_pem + haproxy.key_pem)
        haproxy_pem.chmod(0o600)
        return cls(ca.write(directory), ServerCertificate(broker.certificate_pem, broker.key_pem), proxy_cert,
                   proxy_key, haproxy_pem)  # fmt: skip


@dataclass
class HAProxy:
    """HAProxy (``HAPROXY_CONFIG``) in the foreground on ``port``, re-originating TLS to the broker's HOP listener."""

    port: int
    process: subprocess.Popen[bytes]
    stderr_path: Path

    @classmethod
    def start(cls, port: int, broker_hop_port: int, tls: TlsFiles, workdir: Path) -> HAProxy:
        config = workdir / "haproxy.cfg"
        config.write_text(HAPROXY_CONFIG.format(host=HOST, port=port, pem=tls.haproxy_pem, upstream=broker_hop_port,
                                                ca=tls.ca))  # fmt: skip
        stderr_path = workdir / "haproxy.stderr"
        command = [HAPROXY, "-db", "-f", str(config)]
        with stderr_path.open("wb") as err:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait(timeout=10)
                said = stderr_path.read_text(errors="replace")[-2000:]
                raise LoadError(f"HAProxy did not listen on {port}: {' '.join(command)}\n{said}")
            time.sleep(0.05)  # bounded by the deadline
        return cls(port, process, stderr_path)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


HAPROXY = "haproxy"
#: Kafka's own JVM settings (kafka-server-start.sh's; the same as ``bench_logins``'), for ``--tls``: the test
#: fixture's C1-only JIT (``-XX:TieredStopAtLevel=1``, quick to start) runs the JDK's AES-GCM and GHASH without C2's
#: intrinsics, and held every TLS side at the broker's ~35 MB/s with the broker at 100% of a core.
KAFKA_JVM_OPTIONS = ["-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     "-Djava.awt.headless=true"]  # fmt: skip


class TlsBenchBroker(KafkaBroker):
    """The test broker with Kafka's own JVM settings (``KAFKA_JVM_OPTIONS``), for ``--tls``."""

    def jvm_options(self) -> list[str]:
        return KAFKA_JVM_OPTIONS


def negotiated_tls(bootstrap: str, tls: ssl.SSLContext) -> str:
    """The TLS version and cipher a handshake with ``bootstrap`` settles on (OpenSSL's defaults, as librdkafka's)."""
    host, port = bootstrap.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=30) as raw,
        tls.wrap_socket(raw, server_hostname=host) as s,
    ):
        cipher = s.cipher()
        return f"{s.version()} {cipher[0] if cipher else '?'}"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((HOST, port)) == 0


def proxy_command(
    data_dir: Path,
    port: int,
    broker: KafkaBroker,
    password_file: Path,
    args: argparse.Namespace,
    tls: TlsFiles | None = None,
) -> list[str]:
    """The proxy's command line; with ``tls``, a SASL_SSL listener (the proxy's certificate) and SASL_SSL upstream to
    the broker's TLS listener (its certificate checked against the bench CA)."""
    protocol = "SASL_PLAINTEXT" if tls is None else "SASL_SSL"
    command = [
        kafkaguard_executable(args.kafkaguard), "proxy",
        "--data-dir", str(data_dir),
        "--listener", f"{protocol}://{HOST}:{port}",
        "--advertised-host", HOST,
        "--upstream", broker.bootstrap if tls is None else broker.tls_bootstrap,
        "--upstream-security-protocol", protocol,
        "--upstream-sasl-mechanism", "SCRAM-SHA-512",
        "--upstream-user", ADMIN,
        "--upstream-password-file", str(password_file),
        "--super-users", f"User:{ADMIN}",
    ]  # fmt: skip
    if tls is not None:
        command += ["--ssl-certfile", str(tls.proxy_cert), "--ssl-keyfile", str(tls.proxy_key),
                    "--upstream-ssl-cafile", str(tls.ca)]  # fmt: skip
    audit_mode = args.audit_mode or ("denied" if args.enforcement == "permissive" or args.shadow_acls else None)
    if audit_mode:
        command += ["--audit-log", str(data_dir.parent / "audit.log"), "--audit-mode", audit_mode]
    if args.enforcement == "permissive":
        command += ["--enforcement", "permissive"]
    if args.shadow_acls:
        command += ["--shadow-acls", str(write_shadow_acls(data_dir.parent / "shadow-acls.yaml"))]
    return command + list(args.proxy_arg)


def write_shadow_acls(path: Path) -> Path:
    """A shadow ACL set of the active set's size (``_bench_acls``), in ``kafkaguard apply``'s format: the same ACLs
    with the group renamed, so that only the group's requests (join, heartbeat, offsets) flip."""
    lines = ["principals:", f'  "User:{USER}":', "    acls:"]
    for kind, name, operation in _bench_acls():
        key = "topic" if kind is ResourceType.TOPIC else "group"
        lines += [f"      - {key}: {name if kind is ResourceType.TOPIC else name + '-candidate'}",
                  f"        operations: [{operation.name}]"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class Measured:
    phase: str  # produce, consume, latency, soak
    side: str  # direct, proxy
    round: int
    usage: Usage
    throughput: Throughput | None = None
    latency: Latency | None = None


@dataclass
class Soak:
    seconds: float
    samples: list[tuple[float, float]]  # (seconds since start, proxy RSS MiB)
    measured: Measured

    def slope_mib_per_min(self, since_s: float = 0.0) -> float:
        points = [(t, r) for t, r in self.samples if t >= since_s]
        if len(points) < 2:
            return float("nan")
        return statistics.linear_regression([t for t, _ in points], [r for _, r in points]).slope * 60


@dataclass
class Outcome:
    plan: Plan
    direct_only: bool
    runs: list[Measured] = field(default_factory=list)
    soak: Soak | None = None
    audit_mode: str | None = None
    #: The proxy's rollout variant: "", "permissive", "shadow" or "permissive+shadow".
    rollout: str = ""
    #: The ``CASES`` not run on a side, and why: "phase, side: reason".
    skipped: list[str] = field(default_factory=list)
    #: ``--tls``: per side, the TLS version and cipher a handshake with its bootstrap settled on.
    tls: dict[str, str] = field(default_factory=dict)
    #: ``--tls`` was given (every side SASL_SSL).
    tls_mode: bool = False

    def of(self, phase: str, side: str) -> list[Measured]:
        return [m for m in self.runs if m.phase == phase and m.side == side]


class Bench:
    """The sides (direct, hop or haproxy, proxy, passthrough) and the processes to meter. With ``tls`` every side is
    SASL_SSL: direct to the broker's TLS listener, through HAProxy (``haproxy``) to its HOP listener, through each
    proxy (TLS both ways)."""

    def __init__(
        self,
        plan: Plan,
        broker: KafkaBroker,
        proxy: ProxyProcess | None,
        proxy_port: int,
        hop: Hop | None = None,
        haproxy: HAProxy | None = None,
        tls: TlsFiles | None = None,
        passthrough: tuple[ProxyProcess, int] | None = None,
    ) -> None:
        """``passthrough``: the proxy in passthrough and its listener port, for the passthrough side."""
        self.plan = plan
        self.broker = broker
        self.broker_pid = broker.process.pid if broker.process is not None else 0
        self.proxy = proxy
        self.proxy_port = proxy_port
        self.hop = hop
        self.haproxy = haproxy
        self.proxies: dict[str, tuple[ProxyProcess, int]] = {}

        def side(bootstrap: str) -> ClientSettings:
            if tls is None:
                return ClientSettings(bootstrap, USER, PASSWORD)
            return ClientSettings(bootstrap, USER, PASSWORD, security_protocol="SASL_SSL", ssl_cafile=str(tls.ca))

        self.sides = {"direct": side(broker.bootstrap if tls is None else broker.tls_bootstrap)}
        if hop is not None:
            self.sides["hop"] = side(f"{HOST}:{hop.port}")
        if haproxy is not None:
            self.sides["haproxy"] = side(f"{HOST}:{haproxy.port}")
        if proxy is not None:
            self.sides["proxy"] = side(f"{HOST}:{proxy_port}")
            self.proxies["proxy"] = (proxy, proxy_port)
        if passthrough is not None:
            self.sides["passthrough"] = side(f"{HOST}:{passthrough[1]}")
            self.proxies["passthrough"] = passthrough

    def meter(self, side: str = "proxy") -> tuple[Usage, contextlib.AbstractContextManager[Usage]]:
        """Wait (a little) for the machine to quiet down; a Usage and the meter filling it (entered by the load
        function with its clock). Its ``proxy_*`` fields meter the process in the middle of the side's path: HAProxy
        on the haproxy side, the passthrough proxy on the passthrough side, else the service account's proxy."""
        usage = Usage(other_load=wait_for_quiet(self.plan.quiet_s))
        metered_proxy = self.proxies.get("passthrough" if side == "passthrough" else "proxy")
        middle = metered_proxy[0].pid if metered_proxy is not None else None
        if side == "haproxy" and self.haproxy is not None:
            middle = self.haproxy.pid
        return usage, metered(usage, self.broker_pid, middle)

    def check_hop(self) -> None:
        if self.hop is not None and self.hop.process.poll() is not None:
            raise LoadError(f"socat (the bare hop) exited with status {self.hop.process.returncode}")
        if self.haproxy is not None and self.haproxy.process.poll() is not None:
            raise LoadError(f"HAProxy exited with status {self.haproxy.process.returncode}")

    def check_proxy(self) -> None:
        for side, (process, _port) in self.proxies.items():
            if process.process.poll() is not None:
                raise LoadError(f"the {side} proxy exited with status {process.process.returncode}")

    def order(self, round_: int) -> list[str]:
        sides = [side for side in SIDES if side in self.sides]
        return sides if round_ % 2 == 0 else sides[::-1]

    def cases(self, outcome: Outcome) -> dict[str, list[Case]]:
        """Per side (not the bare hop: a throughput baseline of phases 1-2 only), the ``CASES`` it can run; the
        others are recorded in ``outcome.skipped`` and said."""
        runnable: dict[str, list[Case]] = {}
        for side, settings in self.sides.items():
            if side in BASELINES:
                continue
            offered = offered_versions(settings.bootstrap, tls_context(settings))
            for case in CASES:
                reason = why_not(case, offered, settings)
                if reason is None:
                    runnable.setdefault(side, []).append(case)
                else:
                    outcome.skipped.append(f"{case.phase}, {side}: {reason}")
                    _say(f"skipping {case.phase} on the {side} side: {reason}")
        return runnable

    def run(self, outcome: Outcome) -> None:
        plan = self.plan
        for side, settings in self.sides.items():
            _say(f"{side}: waiting for {USER}'s metadata through {settings.bootstrap}")
            wait_ready(settings, TOPIC)
        cases = self.cases(outcome)
        for side, (_process, port) in self.proxies.items():  # the clients reach the broker through it, never around
            brokers = broker_addresses(self.sides[side])
            expected = {NODE_ID: f"{HOST}:{port + 1 + NODE_ID}"}
            if brokers != expected:
                raise LoadError(f"the {side} proxy's Metadata lists brokers {brokers}, expected {expected}")
        for baseline in (self.hop, self.haproxy):  # the same for the bare hop: its clients must not go around it
            if baseline is not None:
                name = "hop" if baseline is self.hop else "haproxy"
                brokers = broker_addresses(self.sides[name])
                if brokers != {NODE_ID: f"{HOST}:{baseline.port}"}:
                    raise LoadError(f"Metadata through the {name} side lists brokers {brokers}, not its port")
        for side, settings in self.sides.items():
            ctx = tls_context(settings)
            if ctx is not None:
                outcome.tls[side] = negotiated_tls(settings.bootstrap, ctx)
                _say(f"{side}: TLS {outcome.tls[side]}")
        for side, settings in self.sides.items():
            _say(f"{side}: warm-up ({plan.warmup_messages:,} messages produced and consumed)")
            produce_throughput(settings, TOPIC, plan.warmup_messages, SIZE)
            consume_throughput(settings, TOPIC, GROUP, plan.warmup_messages)
        for round_ in range(plan.rounds):
            for side in self.order(round_):
                _say(f"round {round_ + 1}/{plan.rounds}: produce {plan.messages:,} × {SIZE} B, {side}")
                usage, window = self.meter(side)
                result = produce_throughput(self.sides[side], TOPIC, plan.messages, SIZE, window)
                outcome.runs.append(Measured("produce", side, round_, usage, throughput=result))
                self.check_proxy()
                self.check_hop()
                _say(f"  {result.msgs_per_s:,.0f} msgs/s, {result.mb_per_s:.1f} MB/s")
            for side in self.order(round_):
                _say(f"round {round_ + 1}/{plan.rounds}: consume {plan.messages:,}, {side}")
                usage, window = self.meter(side)
                result = consume_throughput(self.sides[side], TOPIC, GROUP, plan.messages, window)
                outcome.runs.append(Measured("consume", side, round_, usage, throughput=result))
                self.check_proxy()
                self.check_hop()
                _say(f"  {result.msgs_per_s:,.0f} msgs/s, {result.mb_per_s:.1f} MB/s")
            for side in self.order(round_):
                for case in cases.get(side, []):
                    _say(f"round {round_ + 1}/{plan.rounds}: {case.phase} {plan.messages:,}, {side}")
                    usage, window = self.meter(side)
                    result = consume_throughput(self.sides[side], TOPIC, case.group, plan.messages, window,
                                                extra=case.config)  # fmt: skip
                    outcome.runs.append(Measured(case.phase, side, round_, usage, throughput=result))
                    self.check_proxy()
                    _say(f"  {result.msgs_per_s:,.0f} msgs/s, {result.mb_per_s:.1f} MB/s")
            for side in self.order(round_):
                if side in BASELINES:
                    continue  # the bare hop is a throughput baseline only
                _say(f"round {round_ + 1}/{plan.rounds}: {plan.rate:,.0f} msgs/s for {plan.latency_s:g} s, {side}")
                usage, window = self.meter(side)
                latency = fixed_rate(self.sides[side], TOPIC, plan.rate, plan.latency_s, plan.latency_warmup_s, SIZE,
                                     GROUP, window=window)  # fmt: skip
                outcome.runs.append(Measured("latency", side, round_, usage, latency=latency))
                self.check_proxy()
                s = latency.summary()
                _say(f"  ack p50 {s['ack_p50_ms']:.2f} ms p99 {s['ack_p99_ms']:.2f} ms; "
                     f"e2e p50 {s['e2e_p50_ms']:.2f} ms p99 {s['e2e_p99_ms']:.2f} ms")  # fmt: skip
        if plan.soak_s > 0 and self.proxy is not None:
            outcome.soak = self.soak()
            self.check_proxy()

    def soak(self) -> Soak:
        assert self.proxy is not None
        plan, pid = self.plan, self.proxy.pid
        _say(f"soak: {plan.rate:,.0f} msgs/s through the proxy for {plan.soak_s:g} s, RSS every {SOAK_SAMPLE_S:g} s")
        samples: list[tuple[float, float]] = []
        done = threading.Event()
        start = time.monotonic()

        def sample() -> None:
            while True:
                samples.append((time.monotonic() - start, rss_bytes(pid) / 2**20))
                if done.wait(SOAK_SAMPLE_S):
                    return

        usage, window = self.meter()
        sampler = threading.Thread(target=sample, name="bench-rss-sampler", daemon=True)
        sampler.start()
        try:
            latency = fixed_rate(self.sides["proxy"], TOPIC, plan.rate, plan.soak_s, plan.latency_warmup_s, SIZE,
                                 GROUP, keep_every=10, window=window)  # fmt: skip
        finally:
            done.set()
            sampler.join(SOAK_SAMPLE_S + 5)
        samples.append((time.monotonic() - start, rss_bytes(pid) / 2**20))  # at the end of the load
        return Soak(plan.soak_s, samples, Measured("soak", "proxy", 0, usage, latency=latency))


def _say(text: str) -> None:
    print(f"[bench_proxy {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the report


def _median(values: Sequence[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


def _mean(values: Sequence[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.fmean(clean) if clean else float("nan")


def _pooled(runs: Sequence[Measured], attr: str) -> list[float]:
    return sorted(x for m in runs if m.latency is not None for x in getattr(m.latency, attr))


def summarize(o: Outcome) -> dict[str, Any]:
    """Per phase and side: throughput medians over rounds, latency percentiles over the pooled rounds, mean CPU."""
    out: dict[str, Any] = {}
    for side in SIDES:
        s: dict[str, float] = {}
        for phase in ("produce", "consume", *CASE_PHASES):
            runs = o.of(phase, side)
            if not runs:
                continue
            tps = [m.throughput for m in runs if m.throughput is not None]
            s[f"{phase}_msgs_per_s"] = _median([t.msgs_per_s for t in tps])
            s[f"{phase}_mb_per_s"] = _median([t.mb_per_s for t in tps])
            if phase != "produce":
                s[f"{phase}_startup_s"] = _median([t.startup_s for t in tps])
            # CPU per MB/s: millicores of the process in the middle (proxy, HAProxy) and of the broker, per MB/s
            # of payload, each run over its own timed window (= 1000 × CPU seconds per MB), median over rounds
            for key, attr in (("mid", "proxy_cpu"), ("broker", "broker_cpu")):
                s[f"{phase}_{key}_mcores_per_mbps"] = _median([
                    1000 * getattr(m.usage, attr) / m.throughput.mb_per_s
                    for m in runs if m.throughput is not None and m.throughput.mb_per_s > 0
                ])  # fmt: skip
        runs = o.of("latency", side)
        if runs:
            ack, e2e = _pooled(runs, "ack_ms"), _pooled(runs, "e2e_ms")
            s |= {"ack_p50_ms": pct(ack, 0.5), "ack_p99_ms": pct(ack, 0.99), "ack_p999_ms": pct(ack, 0.999),
                  "e2e_p50_ms": pct(e2e, 0.5), "e2e_p99_ms": pct(e2e, 0.99), "e2e_p999_ms": pct(e2e, 0.999),
                  "latency_achieved_rate": _mean([m.latency.achieved_rate for m in runs if m.latency is not None]),
                  "latency_errors": float(sum(m.latency.errors for m in runs if m.latency is not None))}  # fmt: skip
        for phase in ("produce", "consume", *CASE_PHASES, "latency"):
            runs = o.of(phase, side)
            for key in ("proxy_cpu", "broker_cpu", "client_cpu", "proxy_rss_mib", "proxy_peak_mib", "proxy_wait",
                        "broker_wait", "client_wait"):  # fmt: skip
                if runs:
                    s[f"{phase}_{key}"] = _mean([getattr(m.usage, key) for m in runs])
        if s:
            out[side] = s
    d, p = out.get("direct"), out.get("proxy")
    if d is not None and p is not None:
        out["proxy_vs_direct"] = {
            **{f"{key}_ratio": p[key] / d[key] for key in THROUGHPUTS if key in d and key in p and d[key]},
            **{f"{key.removesuffix('_ms')}_added_ms": p[key] - d[key] for key in LATENCIES if key in d and key in p},
        }
    t = out.get("passthrough")
    if p is not None and t is not None:
        out["passthrough_vs_proxy"] = {
            **{f"{key}_ratio": t[key] / p[key] for key in THROUGHPUTS if key in p and key in t and p[key]},
            **{f"{key.removesuffix('_ms')}_added_ms": t[key] - p[key] for key in LATENCIES if key in p and key in t},
        }
    for baseline in BASELINES:
        h = out.get(baseline)
        if d is not None and h is not None:
            out[f"{baseline}_vs_direct"] = {
                f"{key}_ratio": h[key] / d[key] for key in THROUGHPUTS if key in d and key in h and d[key]
            }
    h = out.get("haproxy")
    if p is not None and h is not None:
        out["proxy_vs_haproxy"] = {
            f"{key}_ratio": p[key] / h[key] for key in (*THROUGHPUTS, *MCORES) if key in p and key in h and h[key]
        }
    return out


CASE_PHASES = tuple(case.phase for case in CASES)
THROUGHPUTS = ("produce_msgs_per_s", "produce_mb_per_s", "consume_msgs_per_s", "consume_mb_per_s",
               *(f"{phase}_{unit}" for phase in CASE_PHASES for unit in ("msgs_per_s", "mb_per_s")))  # fmt: skip
MCORES = tuple(f"{phase}_mid_mcores_per_mbps" for phase in ("produce", "consume"))
LATENCIES = ("ack_p50_ms", "ack_p99_ms", "ack_p999_ms", "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms")


def _f(value: float, fmt: str = ",.0f", unit: str = "") -> str:
    return "–" if value != value else f"{value:{fmt}}{unit}"


#: The throughput rows of the report's tables: label, summary key, number format, unit.
THROUGHPUT_ROWS = (
    ("produce, messages/s", "produce_msgs_per_s", ",.0f", ""),
    ("produce, MB/s", "produce_mb_per_s", ",.1f", ""),
    ("consume, messages/s", "consume_msgs_per_s", ",.0f", ""),
    ("consume, MB/s", "consume_mb_per_s", ",.1f", ""),
)


def _ratio(proxy: float, direct: float, digits: int = 2) -> str:
    return "–" if proxy != proxy or direct != direct or not direct else f"{proxy / direct:.{digits}f}×"


def _added(proxy: float, direct: float) -> str:
    return "–" if proxy != proxy or direct != direct else f"{proxy - direct:+.2f} ms"


def _pct(share: float) -> str:
    return "–" if share != share else f"{100 * share:.0f}%"


def render(o: Outcome) -> str:
    plan, summary = o.plan, summarize(o)
    d, p = summary.get("direct", {}), summary.get("proxy", {})
    nan = float("nan")

    def both(key: str) -> tuple[float, float]:
        return d.get(key, nan), p.get(key, nan)

    rows = []
    for label, key, fmt, unit in THROUGHPUT_ROWS:
        direct, proxy = both(key)
        rows.append(f"| {label} | {_f(direct, fmt, unit)} | {_f(proxy, fmt, unit)} | {_ratio(proxy, direct)} |")
    direct, proxy = both("consume_startup_s")
    rows.append(f"| consume, subscribe → first batch | {_f(direct, '.2f', ' s')} | {_f(proxy, '.2f', ' s')} | "
                f"{_f(proxy - direct, '+.2f', ' s')} |")  # fmt: skip
    for case in CASES:  # a side that skipped the case shows "–"
        direct, proxy = both(f"{case.phase}_msgs_per_s")
        if direct != direct and proxy != proxy:
            continue
        rows.append(f"| {case.label}, messages/s | {_f(direct)} | {_f(proxy)} | {_ratio(proxy, direct)} |")
        direct, proxy = both(f"{case.phase}_startup_s")
        rows.append(f"| {case.label}, subscribe → first batch | {_f(direct, '.2f', ' s')} | "
                    f"{_f(proxy, '.2f', ' s')} | {_f(proxy - direct, '+.2f', ' s')} |")  # fmt: skip
    for label, key in (
        ("produce → ack, p50", "ack_p50_ms"),
        ("produce → ack, p99", "ack_p99_ms"),
        ("produce → ack, p99.9", "ack_p999_ms"),
        ("produce → consume, p50", "e2e_p50_ms"),
        ("produce → consume, p99", "e2e_p99_ms"),
        ("produce → consume, p99.9", "e2e_p999_ms"),
    ):
        direct, proxy = both(key)
        rows.append(f"| {label} at {plan.rate:,.0f} msgs/s | {_f(direct, '.2f', ' ms')} | {_f(proxy, '.2f', ' ms')} "
                    f"| {_added(proxy, direct)} |")  # fmt: skip
    cpu_rows = []
    for phase in ("produce", "consume", *CASE_PHASES, "latency"):
        if f"{phase}_broker_cpu" not in d and f"{phase}_broker_cpu" not in p:
            continue
        cpu_rows.append(
            f"| {phase} | {_pct(p.get(f'{phase}_proxy_cpu', nan))} | "
            f"{_pct(d.get(f'{phase}_broker_cpu', nan))} / {_pct(p.get(f'{phase}_broker_cpu', nan))} | "
            f"{_pct(d.get(f'{phase}_client_cpu', nan))} / {_pct(p.get(f'{phase}_client_cpu', nan))} | "
            f"{_f(p.get(f'{phase}_proxy_rss_mib', nan), '.0f', ' MiB')} / "
            f"{_f(p.get(f'{phase}_proxy_peak_mib', nan), '.0f', ' MiB')} | "
            f"{_pct(d.get(f'{phase}_broker_wait', nan))} / {_pct(d.get(f'{phase}_client_wait', nan))} | "
            f"{_pct(p.get(f'{phase}_proxy_wait', nan))} / {_pct(p.get(f'{phase}_broker_wait', nan))} / "
            f"{_pct(p.get(f'{phase}_client_wait', nan))} |"
        )
    h = summary.get("hop", {})
    hop_rows = []
    for label, key in (("produce, messages/s", "produce_msgs_per_s"), ("consume, messages/s", "consume_msgs_per_s")):
        direct, proxy = both(key)
        hop = h.get(key, nan)
        hop_rows.append(f"| {label} | {_f(direct)} | {_f(hop)} | {_f(proxy)} | {_ratio(hop, direct)} | "
                        f"{_ratio(proxy, direct)} | {_ratio(proxy, hop)} |")  # fmt: skip
    t = summary.get("passthrough", {})
    passthrough_rows = []
    for label, key, fmt, unit in (
        *THROUGHPUT_ROWS,
        *((f"{case.label}, messages/s", f"{case.phase}_msgs_per_s", ",.0f", "") for case in CASES),
    ):
        direct, proxy = both(key)
        through = t.get(key, nan)
        if through != through and proxy != proxy:
            continue
        # the ratio beside it has three digits: 0.9495 printed as 0.95× read as met beside "not met"
        met = "" if through != through or proxy != proxy else ("**met**" if through >= 0.95 * proxy else "**not met**")
        passthrough_rows.append(f"| {label} | {_f(direct, fmt, unit)} | {_f(proxy, fmt, unit)} | "
                                f"{_f(through, fmt, unit)} | {_ratio(through, proxy, 3)} | {_ratio(through, direct)} "
                                f"| {met} |")  # fmt: skip
    for label, key in (("produce → ack, p50", "ack_p50_ms"), ("produce → ack, p99", "ack_p99_ms"),
                       ("produce → consume, p50", "e2e_p50_ms"), ("produce → consume, p99", "e2e_p99_ms")):  # fmt: skip
        direct, proxy = both(key)
        through = t.get(key, nan)
        passthrough_rows.append(f"| {label} at {plan.rate:,.0f} msgs/s | {_f(direct, '.2f', ' ms')} | "
                                f"{_f(proxy, '.2f', ' ms')} | {_f(through, '.2f', ' ms')} | "
                                f"{_added(through, proxy)} | {_added(through, direct)} | |")  # fmt: skip
    for phase in ("produce", "consume"):
        if f"{phase}_proxy_cpu" in t:
            passthrough_rows.append(
                f"| {phase}: proxy CPU / broker CPU | – | {_pct(p.get(f'{phase}_proxy_cpu', nan))} / "
                f"{_pct(p.get(f'{phase}_broker_cpu', nan))} | {_pct(t.get(f'{phase}_proxy_cpu', nan))} / "
                f"{_pct(t.get(f'{phase}_broker_cpu', nan))} | | | |"
            )
    hx = summary.get("haproxy", {})
    tls_rows = []
    for label, key, fmt in (
        ("produce, MB/s", "produce_mb_per_s", ",.1f"),
        ("consume, MB/s", "consume_mb_per_s", ",.1f"),
        ("produce, messages/s", "produce_msgs_per_s", ",.0f"),
        ("consume, messages/s", "consume_msgs_per_s", ",.0f"),
    ):
        direct, proxy = both(key)
        ha = hx.get(key, nan)
        tls_rows.append(f"| {label} | {_f(direct, fmt)} | {_f(ha, fmt)} | {_f(proxy, fmt)} | {_ratio(ha, direct)} | "
                        f"{_ratio(proxy, direct)} | {_ratio(proxy, ha)} |")  # fmt: skip
    for phase in ("produce", "consume"):
        ha, proxy = hx.get(f"{phase}_proxy_cpu", nan), p.get(f"{phase}_proxy_cpu", nan)
        tls_rows.append(f"| {phase}: CPU of the process in the middle, share of a core | – | {_pct(ha)} | "
                        f"{_pct(proxy)} | | | {_ratio(proxy, ha)} |")  # fmt: skip
        key = f"{phase}_mid_mcores_per_mbps"
        ha, proxy = hx.get(key, nan), p.get(key, nan)
        tls_rows.append(f"| {phase}: **millicores per MB/s**, process in the middle | – | {_f(ha, '.1f')} | "
                        f"{_f(proxy, '.1f')} | | | {_ratio(proxy, ha)} |")  # fmt: skip
        key = f"{phase}_broker_mcores_per_mbps"
        direct, ha, proxy = d.get(key, nan), hx.get(key, nan), p.get(key, nan)
        tls_rows.append(f"| {phase}: millicores per MB/s, broker | {_f(direct, '.1f')} | {_f(ha, '.1f')} | "
                        f"{_f(proxy, '.1f')} | {_ratio(ha, direct)} | {_ratio(proxy, direct)} | "
                        f"{_ratio(proxy, ha)} |")  # fmt: skip
    loads = [m.usage.other_load for m in o.runs if m.usage.other_load == m.usage.other_load]
    audit = f", audit log `--audit-mode {o.audit_mode}`" if o.audit_mode else ", no audit log"
    if o.rollout:
        audit += f", rollout variant `{o.rollout}`"
    protocol = "SASL_SSL" if o.tls_mode else "SASL_PLAINTEXT"
    upstream = (
        "SASL_SSL to the broker's SASL_SSL listener, verifying its certificate" if o.tls_mode else "SASL_PLAINTEXT"
    )
    tls_said = ""
    if o.tls_mode:
        seen = "; ".join(f"{side}: {what}" for side, what in o.tls.items()) or "not probed"
        tls_said = (
            "TLS everywhere: one bench CA (EC P-256 certificates, `tests/kafka/pki.py`), every client checking its "
            "server's certificate and host name; the broker's TLS is the JDK's, the proxy's Python's `ssl` (OpenSSL), "
            f"the clients' and HAProxy's OpenSSL. A handshake with each side's bootstrap settled on: {seen}. "
        )
    lines = [
        "## Authorizing proxy over TLS (`benchmarks/bench_proxy.py --tls`)"
        if o.tls_mode
        else "## Authorizing proxy (`benchmarks/bench_proxy.py`)",
        "",
        f"confluent-kafka (librdkafka) clients as the non-super user `bench` (SCRAM-SHA-512 over {protocol}) "
        "straight to a Kafka 3.9 broker (KRaft, one node, StandardAuthorizer, `tests/kafka/broker.py`) and through "
        f"`kafkaguard proxy` in front of it (same user and ACLs in the proxy's data directory{audit}; upstream as "
        f"`admin`, SCRAM-SHA-512 over {upstream}), same client settings both ways: producer linger.ms=5, "
        "batch.size=256 KiB, "
        "acks=all, no compression; consumer fetch.wait.max.ms=100, fetch.min.bytes=1, 1 MiB per partition, "
        "fetch.queue.backoff.ms=10. "
        f"{tls_said}Messages of {SIZE} B to one partition. Broker, proxy and clients share the machine's "
        f"{os.cpu_count()} cores. {plan.rounds} round(s), the order of the sides alternating, after a warm-up "
        f"both ways of {plan.warmup_messages:,} messages. Throughput: median over rounds; produce "
        f"{plan.messages:,} messages from the first `produce` to the end of `flush`; consume as many (subscribe, "
        "from the earliest offset), counted from the first batch's arrival. Latency: "
        f"{plan.rate:,.0f} messages/s for {plan.latency_s:g} s per round after {plan.latency_warmup_s:g} s "
        "of warm-up, percentiles over all rounds; produce → ack ends when the delivery report is served, "
        "produce → consume when a consumer in the same process (assigned at the partition's end) returns the "
        "message. MB = 10^6 bytes of payload.",
        "",
        "| measurement | direct to Kafka | through the proxy | proxy vs direct |",
        "|---|---:|---:|---:|",
        *rows,
        *(
            [
                "",
                "The extra hop alone: the same clients, in the same rounds, through a bare TCP forwarder (socat "
                "1.7, 1 MiB buffers, TCP_NODELAY; it parses nothing, authorizes nothing) to a second listener of the "
                "same broker that advertises the forwarder's port, so every byte crosses one more loopback "
                "connection, as through the proxy. Medians over the same rounds.",
                "",
                "| measurement | direct to Kafka | bare TCP forwarder | through the proxy | forwarder vs direct "
                "| proxy vs direct | proxy vs forwarder |",
                "|---|---:|---:|---:|---:|---:|---:|",
                *hop_rows,
            ]
            if h
            else []
        ),
        *(
            [
                "",
                "The same TLS hop done by a C proxy: HAProxy (Debian's, one thread, mode tcp) terminating the "
                "client's TLS (`bind … ssl crt …`) and opening its own to a second SASL_SSL listener of the same "
                "broker (`server … ssl verify required ca-file …`) that advertises HAProxy's port, so every byte "
                "is decrypted and encrypted again as through the proxy, with no Kafka parsed. Same clients, same "
                "rounds, medians; CPU per MB/s: the process's user + system CPU over each run's timed window "
                "divided by that run's MB/s (1000 × CPU seconds per MB of payload), median over rounds. "
                "Kroxylicious (a Java Kafka proxy) publishes a sizing of about 25 millicores per MB/s: a figure "
                "from elsewhere, not measured here.",
                "",
                "| measurement | direct to Kafka (TLS) | HAProxy (TLS hop) | through the proxy | HAProxy vs direct "
                "| proxy vs direct | proxy vs HAProxy |",
                "|---|---:|---:|---:|---:|---:|---:|",
                *tls_rows,
            ]
            if o.tls_mode
            else []
        ),
        *(
            [
                "",
                "### Passthrough (issue 38): each client upstream as itself",
                "",
                "A second `kafkaguard proxy`, the same data directory contents, with `upstream_authentication: "
                "passthrough`: `bench`'s SCRAM-SHA-512 login relayed to the broker, its requests sent up on its own "
                "connection as `bench` (the broker's ACLs for `bench` apply too), in the same rounds as the "
                "service-account proxy (which sends every client's requests up as `admin`). Target (issue 38): "
                "passthrough throughput ≥ 95% of the service-account mode's.",
                "",
                "| measurement | direct to Kafka | proxy, service account | proxy, passthrough "
                "| passthrough vs service account | passthrough vs direct | target |",
                "|---|---:|---:|---:|---:|---:|---|",
                *passthrough_rows,
            ]
            if t
            else []
        ),
        "",
        "CPU as a share of one core over each phase's timed window (user + system from `/proc/<pid>/stat`, in "
        "10 ms ticks, so short windows are coarse; means over rounds); the proxy's RSS at the end of the phase and "
        "its peak (`VmHWM`); waiting for a CPU: the share of the phase a process was runnable while other processes "
        "held the cores (`/proc/<pid>/task/*/schedstat`; broker, proxy and clients compete for the same cores, and "
        "so does other work on this machine).",
        "",
        "| phase | proxy CPU | broker CPU: direct / proxy | clients' CPU: direct / proxy | proxy RSS / peak "
        "| waiting for a CPU, direct: broker / clients | waiting for a CPU, proxy: proxy / broker / clients |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *cpu_rows,
        "",
        "Other load on the machine just before the phases: "
        + (", ".join(f"{x:.2f}" for x in loads) + " cores." if loads else "not measured."),
    ]
    warnings = [
        f"{m.side} {m.phase} round {m.round + 1}: {m.latency.errors} messages failed, achieved "
        f"{m.latency.achieved_rate:,.0f}/s of {m.latency.rate:,.0f}/s, sender up to {m.latency.behind_s * 1000:.0f} ms "
        "behind schedule"
        for m in [*o.runs, *([o.soak.measured] if o.soak is not None else [])]
        if m.latency is not None
        and (m.latency.errors or m.latency.achieved_rate < 0.98 * m.latency.rate or m.latency.behind_s > 0.05)
    ]
    if warnings:
        lines += ["", "**Fixed-rate runs that did not hold their rate:** " + "; ".join(warnings) + "."]
    if o.skipped:
        lines += [
            "",
            "**Cases not run** (the side does not offer or serve what they need): " + "; ".join(o.skipped) + ".",
        ]
    if o.direct_only:
        lines += ["", "**Direct half only (`--direct-only`): no proxy was started.**"]
    if o.soak is not None:
        soak = o.soak
        rss = [r for _, r in soak.samples]
        lat = soak.measured.latency
        s = lat.summary() if lat is not None else {}
        lines += [
            "",
            f"### Soak: {plan.rate:,.0f} messages/s through the proxy for {soak.seconds:g} s",
            "",
            "| proxy RSS first | last | max | slope, whole run | slope, after the first minute | proxy CPU | "
            "produce → ack p99 | produce → consume p99 |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {rss[0]:.1f} MiB | {rss[-1]:.1f} MiB | {max(rss):.1f} MiB | "
            f"{_f(soak.slope_mib_per_min(), '+.3f', ' MiB/min')} | "
            f"{_f(soak.slope_mib_per_min(60.0), '+.3f', ' MiB/min')} | {_pct(soak.measured.usage.proxy_cpu)} | "
            f"{_f(s.get('ack_p99_ms', nan), '.2f', ' ms')} | {_f(s.get('e2e_p99_ms', nan), '.2f', ' ms')} |",
            "",
            f"RSS sampled every {SOAK_SAMPLE_S:g} s ({len(rss)} samples); latency from every 10th message.",
        ]
    return "\n".join(lines)


def to_json(o: Outcome) -> dict[str, Any]:
    runs = []
    for m in o.runs:
        entry: dict[str, Any] = {"phase": m.phase, "side": m.side, "round": m.round, "usage": asdict(m.usage)}
        if m.throughput is not None:
            t = m.throughput
            entry["throughput"] = {
                "count": t.count,
                "payload_bytes": t.payload_bytes,
                "seconds": t.seconds,
                "msgs_per_s": t.msgs_per_s,
                "mb_per_s": t.mb_per_s,
                "startup_s": t.startup_s,
            }
        if m.latency is not None:
            entry["latency"] = _latency_json(m.latency)
        runs.append(entry)
    soak = None
    if o.soak is not None:
        rss = [r for _, r in o.soak.samples]
        soak = {"seconds": o.soak.seconds, "rss_samples_mib": o.soak.samples, "rss_first_mib": rss[0],
                "rss_last_mib": rss[-1], "rss_max_mib": max(rss), "slope_mib_per_min": o.soak.slope_mib_per_min(),
                "slope_after_first_minute_mib_per_min": o.soak.slope_mib_per_min(60.0),
                "usage": asdict(o.soak.measured.usage),
                "latency": _latency_json(o.soak.measured.latency) if o.soak.measured.latency else None}  # fmt: skip
    return {
        "benchmark": "proxy",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "plan": asdict(o.plan),
        "message_bytes": SIZE,
        "direct_only": o.direct_only,
        "audit_mode": o.audit_mode,
        "rollout": o.rollout,
        "skipped": o.skipped,
        "tls": o.tls if o.tls_mode else None,
        "summary": summarize(o),
        "runs": runs,
        "soak": soak,
    }


def _latency_json(latency: Latency) -> dict[str, Any]:
    return {"rate": latency.rate, "seconds": latency.seconds, "sent": latency.sent,
            "achieved_rate": latency.achieved_rate, "errors": latency.errors, "behind_s": latency.behind_s,
            **latency.summary()}  # fmt: skip


def _clean_nan(value: Any) -> Any:
    """NaN → None, so the JSON is standard."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _clean_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_nan(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20k messages, 5 s of latency, one round (a demo)")
    parser.add_argument("--direct-only", action="store_true", help="measure straight to Kafka only; no proxy")
    parser.add_argument("--no-hop", action="store_true", help="no bare TCP forwarder (socat; HAProxy with --tls)")
    parser.add_argument("--tls", action="store_true",
                        help="every side SASL_SSL (proxy: TLS both ways); HAProxy doing the same TLS hop as baseline",
                        )  # fmt: skip
    parser.add_argument("--soak-seconds", type=float, default=0.0, help="then a fixed-rate soak through the proxy")
    parser.add_argument("--json", type=Path, help="write every number to this JSON file")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--messages", type=int, help="messages per throughput run (default 1M, --quick 20k)")
    parser.add_argument("--rate", type=float, default=5000.0, help="messages/s of the latency runs (default 5000)")
    parser.add_argument("--latency-seconds", type=float, help="measured seconds per latency run (default 20, quick 5)")
    parser.add_argument("--rounds", type=int, help="rounds of every phase, every side (default 5, --quick 1)")
    parser.add_argument("--audit-mode", choices=["denied", "all"], help="run the proxy with an audit log")
    parser.add_argument("--enforcement", choices=["enforcing", "permissive"], default="enforcing",
                        help="run the proxy permissive (implies an audit log)")  # fmt: skip
    parser.add_argument("--shadow-acls", action="store_true",
                        help="run the proxy with a shadow ACL set of the active set's size (implies an audit log)",
                        )  # fmt: skip
    parser.add_argument("--proxy-arg", action="append", default=[], help="one more argument for kafkaguard proxy")
    parser.add_argument("--passthrough", action="store_true",
                        help="also a proxy in passthrough (upstream as each client), in the same rounds")  # fmt: skip
    parser.add_argument("--kafkaguard", type=Path, help="the kafkaguard executable (default: beside this Python)")
    parser.add_argument("--kafka-tgz", type=Path, help="Kafka tarball (default: KAFKA_TGZ/KAFKA_HOME, ../shared/kafka)")
    return parser.parse_args(argv)


def _proxy_post_mortem(proxy: ProxyProcess | None, name: str = "proxy") -> None:
    if proxy is None:
        return
    state = "still running" if proxy.process.poll() is None else f"exited with status {proxy.process.returncode}"
    print(f"bench_proxy: the {name} is {state}; its output:\n{proxy.output_tail()}", file=sys.stderr)


def start_passthrough(
    tmp: Path, broker: KafkaBroker, password_file: Path, args: argparse.Namespace, tls: TlsFiles | None = None
) -> tuple[ProxyProcess, int]:
    """The passthrough side's proxy (``--passthrough``): the same data directory contents and arguments as the
    service-account proxy's (with ``tls``, its SASL_SSL listener and upstream too), with
    ``--upstream-authentication passthrough``; it and its port."""
    workdir = tmp / "passthrough"
    workdir.mkdir()
    prepare_proxy_data_dir(workdir / "data")
    port = _free_port_pair(1 + NODE_ID)
    command = [*proxy_command(workdir / "data", port, broker, password_file, args, tls),
               "--upstream-authentication", "passthrough"]  # fmt: skip
    _say(f"starting the passthrough proxy: {' '.join(command)}")
    return ProxyProcess(command, workdir, [port, port + 1 + NODE_ID]), port


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = Plan.make(args)
    if args.direct_only and plan.soak_s > 0:
        _say("--soak-seconds needs the proxy; no soak with --direct-only")
    rollout = "+".join(part for part, on in (("permissive", args.enforcement == "permissive"),
                                             ("shadow", args.shadow_acls)) if on)  # fmt: skip
    audit_mode = args.audit_mode or ("denied" if rollout else None)
    outcome = Outcome(plan, direct_only=bool(args.direct_only), audit_mode=audit_mode, rollout=rollout,
                      tls_mode=bool(args.tls))  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-proxy-"))
    broker: KafkaBroker | None = None
    proxy: ProxyProcess | None = None
    passthrough: tuple[ProxyProcess, int] | None = None
    hop: Hop | None = None
    haproxy: HAProxy | None = None
    tls = TlsFiles.make(tmp / "tls") if args.tls else None
    try:
        try:
            home = kafka_distribution(tmp / "dist", args.kafka_tgz)
        except KafkaNotConfigured as e:
            print(f"bench_proxy: no Kafka distribution: {e}", file=sys.stderr)
            return 2
        _say("starting the Kafka broker")
        forwarder, what = (HAPROXY, "HAProxy") if tls is not None else (SOCAT[0], "socat")
        with_hop = not args.direct_only and not args.no_hop and shutil.which(forwarder) is not None
        if not args.direct_only and not args.no_hop and not with_hop:
            _say(f"{what} is not installed (scripts/setup installs it): no {what} baseline in this run")
        hop_port = free_port() if with_hop else None
        kind = KafkaBroker if tls is None else TlsBenchBroker
        broker = kind(home, tmp / "broker", hop_port=free_port() if with_hop else None,
                      hop_advertised_port=hop_port, tls=tls.broker if tls is not None else None)  # fmt: skip
        broker.start()
        setup_broker(broker)
        if hop_port is not None and broker.hop_port is not None:
            if tls is not None:
                haproxy = HAProxy.start(hop_port, broker.hop_port, tls, tmp)
            else:
                hop = Hop.start(hop_port, broker.hop_port, tmp)
        port = 0
        if not args.direct_only:
            prepare_proxy_data_dir(tmp / "proxy-data")
            password_file = tmp / "upstream-password"
            password_file.write_text(ADMIN_PASSWORD)
            password_file.chmod(0o600)
            port = _free_port_pair(1 + NODE_ID)
            command = proxy_command(tmp / "proxy-data", port, broker, password_file, args, tls)
            _say(f"starting the proxy: {' '.join(command)}")
            try:
                proxy = ProxyProcess(command, tmp, [port, port + 1 + NODE_ID])
            except ProxyFailed as e:
                tail = ""
                with contextlib.suppress(OSError):
                    tail = (tmp / "proxy.stderr").read_text(errors="replace")[-4000:]
                print(f"bench_proxy: {e}\ncommand: {' '.join(command)}\n--- its stderr ---\n{tail}", file=sys.stderr)
                return 3
            if args.passthrough:
                try:
                    passthrough = start_passthrough(tmp, broker, password_file, args, tls)
                except ProxyFailed as e:
                    tail = ""
                    with contextlib.suppress(OSError):
                        tail = (tmp / "passthrough" / "proxy.stderr").read_text(errors="replace")[-4000:]
                    print(f"bench_proxy: the passthrough proxy: {e}\n--- its stderr ---\n{tail}", file=sys.stderr)
                    return 3
        try:
            Bench(plan, broker, proxy, port, hop, haproxy, tls, passthrough).run(outcome)
        except LoadError as e:
            print(f"bench_proxy: a run failed: {e}", file=sys.stderr)
            _proxy_post_mortem(proxy)
            _proxy_post_mortem(passthrough[0] if passthrough is not None else None, "passthrough proxy")
            return 1
        except BaseException:
            _proxy_post_mortem(proxy)
            _proxy_post_mortem(passthrough[0] if passthrough is not None else None, "passthrough proxy")
            raise
    finally:
        if proxy is not None:
            proxy.stop()
        if passthrough is not None:
            passthrough[0].stop()
        if hop is not None:
            hop.stop()
        if haproxy is not None:
            haproxy.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    markdown = render(outcome)
    print(markdown)
    if args.json is not None:
        args.json.write_text(json.dumps(_clean_nan(to_json(outcome)), indent=2) + "\n")
        _say(f"JSON written to {args.json}")
    if not (args.no_write or args.quick or args.direct_only or rollout):  # a variant does not replace the section
        write_section("proxy-tls" if args.tls else "proxy", markdown)  # the TLS run has its own section
    return 0


if __name__ == "__main__":
    sys.exit(main())

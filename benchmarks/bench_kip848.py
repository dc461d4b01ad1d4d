"""Does a consumer on the KIP-848 protocol and Fetch v13+ pay for it through the proxy (issue 28)? Java's own
``KafkaConsumer`` through the proxy before issue 28, through this tree's proxy, and straight to the broker, measured
in the same rounds.

Run: ``scripts/bench kip848`` (or ``.venv/bin/python -m benchmarks.bench_kip848 [--base REV] [--quick]
[--messages N] [--rounds N] [--no-write]``). Needs what ``benchmarks.bench_upgrade`` needs (a JDK 17 with javac, a
Kafka distribution, git).

Why Java, and why a benchmark of its own: the pinned confluent-kafka (librdkafka 2.16) cannot join a Kafka 3.9
broker with ``group.protocol=consumer`` (it needs ConsumerGroupHeartbeat v1, Kafka 4.0), so ``bench_upgrade`` (whose
clients are confluent-kafka) cannot measure it. The load here is ``benchmarks/ConsumeLoad.java``
(``benchmarks.java_load``): the kafka-clients 3.9 jar of the same Kafka distribution, one JVM per run, its consume
loop timed inside Java (JVM start, login, group join and first fetch excluded). It needs a direct side as well
(no proxy at all), which ``bench_upgrade``'s proxies-only rounds have no place for.

One broker (``tests/kafka/broker.py``: it serves the consumer protocol, ``group.coordinator.rebalance.protocols=
classic,consumer``), its topic filled once with ``--messages`` messages of 1 KiB by ``kafka_load``'s producer
(straight to the broker), and two ``kafkaguard proxy`` processes in front of it with the same command line, as in
``bench_upgrade``: ``before`` (``--base``, by default the last commit before issue 28: no ConsumerGroupHeartbeat,
Fetch up to v12) and ``after`` (this tree). The runs (``RUNS``), each reading the whole topic from its earliest
offset, each with a fresh group id (``bench`` may READ groups with the prefix ``GROUP_PREFIX``):

- ``classic@before``: ``group.protocol=classic`` through ``before``, the baseline — what a Java client got from the
  proxy before issue 28 (the proxy offered no KIP-848 and Fetch up to v12, so the client used JoinGroup and Fetch
  v12);
- ``consumer@after``: ``group.protocol=consumer`` through ``after``, the new thing (ConsumerGroupHeartbeat, Fetch
  v17);
- ``classic@after``: ``group.protocol=classic`` through ``after``: the same tree, the protocol's own cost isolated;
- ``consumer@direct`` and ``classic@direct``: each protocol straight to the broker, references (no proxy, no proxy
  CPU): their ratio is the client's own cost of the consumer protocol, to read ``consumer@after`` against
  ``classic@after`` by.

After a warm-up run of each (traced: the versions the client really sent are read from its own log), ``--rounds``
rounds of every run, the order reversed every other round. Measured as ``bench_audit`` measures (its ``Outcome``,
ratios and capacity): messages/s, the ratio to ``classic@before`` in the same rounds (and the range of the per-round
ratios), the proxy's exact CPU (``schedstat``) per 10,000 messages over the timed loop, and the capacity ratio
(messages per proxy CPU second over the baseline's in the same round: what the shared cores hide). Target (issue
28): ``consumer@after`` no regression against ``classic@before``, read against 95%.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_audit import (
    BenchFailed,
    Outcome,
    Plan,
    Run,
    Variant,
    _median,
    capacity,
    capacity_ratios,
    cpu_per_10k,
    other_load,
    proxies_before_a_broker,
    ratio,
    round_ratios,
)
from benchmarks.bench_proxy import HOST, NODE_ID, PASSWORD, SIZE, TOPIC, USER, Usage, metered
from benchmarks.bench_server import wait_for_quiet
from benchmarks.bench_upgrade import DEFAULT_BASE, launcher
from benchmarks.java_load import JavaConsumer, JavaRun
from benchmarks.kafka_load import ClientSettings, LoadError, broker_addresses, produce_throughput, wait_ready
from benchmarks.report import write_section
from kafkaguard import AclOperation, PatternType, ResourceType
from tests.kafka.broker import KafkaBroker

ROOT = Path(__file__).resolve().parent.parent
PHASE = "consume"
TARGET = 0.95
#: Every run's group id starts with this (a fresh id per run); ``bench`` may READ such groups (PREFIXED).
GROUP_PREFIX = "kafkaguard-bench-java-"
EXTRA_ACLS = [(ResourceType.GROUP, GROUP_PREFIX, AclOperation.READ, PatternType.PREFIXED)]
DIRECT = "direct"


@dataclass(frozen=True)
class Spec:
    """One kind of run: the client's ``group.protocol`` through a proxy (its name) or ``direct``."""

    protocol: str
    via: str
    label: str


#: Run name → what it is; the first is the baseline.
RUNS = {
    "classic@before": Spec("classic", "before", "baseline: what Java clients got before issue 28"),
    "consumer@after": Spec("consumer", "after", "the new protocol through this tree"),
    "classic@after": Spec("classic", "after", "the same client on this tree: the protocol's own cost"),
    "consumer@direct": Spec("consumer", DIRECT, "reference: no proxy"),
    "classic@direct": Spec("classic", DIRECT, "reference: no proxy, the client's own protocol cost"),
}
BASELINE = "classic@before"
NEW = "consumer@after"


def _say(text: str) -> None:
    print(f"[bench_kip848 {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def make_plan(args: argparse.Namespace) -> Plan:
    """Sizes that finish the whole run in about four minutes on a 2-core machine: each run starts a JVM (~1.5 s
    with the group join) besides the timed loop, so rounds cost more than the messages they read."""
    quick = bool(args.quick)
    messages = args.messages or (20_000 if quick else 500_000)
    return Plan(
        messages=messages,
        warmup_messages=min(messages, 5_000 if quick else 50_000),
        rounds=int(args.rounds or (1 if quick else 7)),
        quiet_s=1.0 if quick else 3.0,
    )


def base_sources(base: str, into: Path) -> Path:
    """The ``src`` tree of revision ``base`` (``git archive``: the repository is only read, no worktree is added).

    :raises BenchFailed: no git, or no such revision (status 2).
    """
    git = shutil.which("git")
    if git is None:
        raise BenchFailed("git is not on PATH (the base revision's sources are read with it)", 2)
    archive = into / "base.tar"
    done = subprocess.run([git, "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), base, "src"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise BenchFailed(f"cannot read revision {base}: {done.stderr.strip()}", 2)
    tree = into / "base"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


class KipBench:
    def __init__(self, plan: Plan, broker: KafkaBroker, variants: Sequence[Variant], java: JavaConsumer) -> None:
        self.plan = plan
        self.broker = broker
        self.broker_pid = broker.process.pid if broker.process is not None else 0
        self.proxies = {v.name: v for v in variants}
        self.java = java
        #: Run name → API name → versions the client sent, from its traced warm-up.
        self.seen: dict[str, dict[str, set[int]]] = {}

    def settings(self, name: str) -> ClientSettings:
        via = RUNS[name].via
        bootstrap = self.broker.bootstrap if via == DIRECT else self.proxies[via].settings.bootstrap
        return ClientSettings(bootstrap, USER, PASSWORD)

    def consume(self, name: str, count: int, label: str, usage: Usage | None = None, trace: bool = False) -> JavaRun:
        spec = RUNS[name]
        proxy = self.proxies[spec.via].proxy.pid if spec.via != DIRECT else None
        group = f"{GROUP_PREFIX}{name.replace('@', '-')}-{label}-{uuid.uuid4().hex[:8]}"
        window = metered(usage, self.broker_pid, proxy) if usage is not None else None
        return self.java.consume(self.settings(name), TOPIC, group, spec.protocol, count, window, trace=trace)

    def check(self) -> None:
        for v in self.proxies.values():
            if v.proxy.process.poll() is not None:
                raise LoadError(f"the proxy {v.name} exited with status {v.proxy.process.returncode}")

    def run(self, outcome: Outcome) -> None:
        plan = self.plan
        for v in self.proxies.values():
            _say(f"{v.name}: waiting for {USER}'s metadata through {v.settings.bootstrap}")
            wait_ready(v.settings, TOPIC)
            brokers = broker_addresses(v.settings)
            if brokers != {NODE_ID: f"{HOST}:{v.port + 1 + NODE_ID}"}:
                raise LoadError(f"the proxy {v.name}'s Metadata lists brokers {brokers}")
        _say(f"filling {TOPIC} with {plan.messages:,} messages of {SIZE} B (straight to the broker)")
        produce_throughput(ClientSettings(self.broker.bootstrap, USER, PASSWORD), TOPIC, plan.messages, SIZE)
        for name in RUNS:
            _say(f"{name}: warm-up ({plan.warmup_messages:,} messages, requests traced)")
            self.seen[name] = self.consume(name, plan.warmup_messages, "warmup", trace=True).requests
            _say(f"  sent: {described(self.seen[name])}")
        names = list(RUNS)
        for round_ in range(plan.rounds):
            for name in names if round_ % 2 == 0 else names[::-1]:
                _say(f"round {round_ + 1}/{plan.rounds}: {name}, {plan.messages:,} × {SIZE} B")
                load = wait_for_quiet(plan.quiet_s)
                outcome.loads.append(load)
                usage = Usage(other_load=load)
                result = self.consume(name, plan.messages, f"r{round_ + 1}", usage)
                run = Run(PHASE, name, round_, result.throughput, usage)
                outcome.runs.append(run)
                self.check()
                _say(f"  {result.throughput.msgs_per_s:,.0f} msgs/s, proxy {run.proxy_cpu_s:.2f} CPU s, "
                     f"{result.throughput.startup_s:.2f} s to the first batch")  # fmt: skip


#: The requests the report names: the fetch and the group protocol's own.
SHOWN = ("FETCH", "CONSUMER_GROUP_HEARTBEAT", "JOIN_GROUP", "SYNC_GROUP", "HEARTBEAT")


def described(requests: dict[str, set[int]]) -> str:
    names = {"FETCH": "Fetch", "CONSUMER_GROUP_HEARTBEAT": "ConsumerGroupHeartbeat", "JOIN_GROUP": "JoinGroup",
             "SYNC_GROUP": "SyncGroup", "HEARTBEAT": "Heartbeat"}  # fmt: skip
    shown = [f"{names[api]} v{'/'.join(str(v) for v in sorted(requests[api]))}" for api in SHOWN if api in requests]
    return ", ".join(shown) or "–"


def render(o: Outcome, command: str, base: str, seen: dict[str, dict[str, set[int]]]) -> str:
    rows = []
    for name, spec in RUNS.items():
        runs = o.of(PHASE, name)
        if not runs:
            continue
        per_round = round_ratios(o, PHASE, name, BASELINE)
        cap = capacity_ratios(o, PHASE, name, BASELINE)
        spread = f" ({min(per_round):.2f}–{max(per_round):.2f})" if name != BASELINE and per_round else ""
        cap_spread = f" ({min(cap):.2f}–{max(cap):.2f})" if name != BASELINE and cap else ""
        direct = spec.via == DIRECT
        cpu = "–" if direct else f"{cpu_per_10k(o, PHASE, name) * 1000:.2f} ms"
        capacity_cell = "–" if direct else f"{capacity(o, PHASE, name, BASELINE):.3f}×{cap_spread}"
        via = "none (straight to the broker)" if direct else f"`{spec.via}`"
        rows.append(
            f"| `{name}` ({spec.label}) | `{spec.protocol}` | {via} | {described(seen.get(name, {}))} | "
            f"{_median([r.throughput.msgs_per_s for r in runs]):,.0f} | "
            f"{ratio(o, PHASE, name, BASELINE):.3f}×{spread} | {cpu} | {capacity_cell} | "
            f"{_median([r.throughput.startup_s for r in runs]):.2f} s |"
        )
    plan = o.plan
    verdict = (
        f"`{NEW}` {ratio(o, PHASE, NEW, BASELINE):.1%} of `{BASELINE}`'s messages/s, capacity "
        f"{capacity(o, PHASE, NEW, BASELINE):.1%}"
    )
    return "\n".join([
        "## Java's KIP-848 consumer through the proxy (`benchmarks/bench_kip848.py`, issue 28)",
        "",
        f"Run: `{command}`.",
        "",
        "One Kafka 3.9 broker serving the consumer protocol (`group.coordinator.rebalance.protocols=classic,consumer`) "
        f"and two `kafkaguard proxy` processes in front of it with the same command line: `before` (revision "
        f"`{base}`: no ConsumerGroupHeartbeat, Fetch up to v12) and `after` (this tree), no audit trail. The client "
        "is Java's own `KafkaConsumer` (`benchmarks/ConsumeLoad.java`, the kafka-clients 3.9 jar of the same Kafka "
        "distribution, compiled at run time; SCRAM-SHA-512 over SASL_PLAINTEXT as `bench`; byte-array deserializers, "
        "fetch.max.wait.ms=100, max.partition.fetch.bytes=1 MiB, max.poll.records=1000, check.crcs=false; serial GC, "
        f"512 MiB heap), one JVM per run, each run a fresh group id. The topic (one partition) holds {plan.messages:,} "
        f"messages of {SIZE} B, produced once straight to the broker; every run reads all of them from the earliest "
        "offset. Timed inside Java from the first batch to the last record (the JVM start, login, group join and "
        "first fetch are not in messages/s; *to first batch* is that part, from subscribe). The baseline "
        f"`{BASELINE}` is what a Java client got through the proxy before issue 28: it offered no KIP-848 and Fetch "
        f"up to v12, so the client ran the classic protocol at Fetch v12. After a warm-up run of each "
        f"({plan.warmup_messages:,} messages, with the client logging its requests: *requests sent* are the versions "
        f"it used), {plan.rounds} round(s) of every run, the order reversed every other round. Medians over the "
        f"rounds; in brackets the range of the per-round ratios to `{BASELINE}`; proxy CPU exact (`schedstat`) over "
        "the timed loop; capacity: messages per proxy CPU second over the baseline's in the same round (the "
        "throughput ratio of proxies that each had a core to themselves, which the shared cores' noise hides).",
        "",
        "| run | `group.protocol` | proxy | requests sent | messages/s | vs baseline | proxy CPU per 10k messages | "
        "capacity vs baseline | to first batch |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Target (issue 28, \"no regression against today's figures in the same run\", read against {TARGET:.0%}): "
        f"{verdict}.",
        "",
        other_load(o),
    ])  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"git revision to compare with (default {DEFAULT_BASE})")
    parser.add_argument("--quick", action="store_true", help="20k messages, one round (a demo, not a result)")
    parser.add_argument("--messages", type=int, help="messages in the topic, read by every run (default 500k)")
    parser.add_argument("--rounds", type=int, help="rounds (default 7, --quick 1)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--kafka-tgz", type=Path, help="Kafka tarball (default: KAFKA_TGZ/KAFKA_HOME, ../shared/kafka)")
    args = parser.parse_args(argv)
    if args.messages is not None and args.messages < 1000:
        parser.error("--messages must be at least 1000 (the first batch, up to 1000 records, is not timed)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = make_plan(args)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join([".venv/bin/python -m benchmarks.bench_kip848", *given]) if given else "scripts/bench kip848"
    outcome = Outcome(plan)
    seen: dict[str, dict[str, set[int]]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-kip848-"))
    try:
        trees = {"before": base_sources(args.base, tmp), "after": ROOT}
        specs = [(name, launcher(tree, tmp, name), (None, False)) for name, tree in trees.items()]
        with proxies_before_a_broker(tmp, args.kafka_tgz, specs, EXTRA_ACLS) as (broker, variants):
            try:
                java = JavaConsumer(broker.home, tmp / "java")
                bench = KipBench(plan, broker, variants, java)
                seen = bench.seen
                bench.run(outcome)
            except LoadError as e:
                tails = "\n".join(f"--- proxy {v.name} ---\n{v.proxy.output_tail()}" for v in variants)
                raise BenchFailed(f"a run failed: {e}\n{tails}", 1) from e
    except BenchFailed as e:
        print(f"bench_kip848: {e}", file=sys.stderr)
        return e.status
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    markdown = render(outcome, command, args.base, seen)
    print(markdown)
    if not (args.no_write or args.quick):
        write_section("kip848-issue-28", markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

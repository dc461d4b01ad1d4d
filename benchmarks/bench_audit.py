"""What the audit trail costs the proxy (issue 27): one broker, five ``kafkaguard proxy`` processes in front of it
that differ only in their audit trail, measured in the same rounds.

Run: ``scripts/bench audit`` (or ``.venv/bin/python -m benchmarks.bench_audit [--quick] [--messages N]
[--rounds N] [--no-write]``). Needs what ``benchmarks.bench_proxy`` needs (Java 17+, a Kafka distribution).

The variants (each its own process, data directory and ports, all started before the first round and running
until the last):

- ``none``: no audit trail at all (the baseline);
- ``none-again``: a second proxy exactly like ``none`` (an A/A control): its ratio to ``none`` is what two identical
  proxies differ by on this machine, the noise floor every other ratio must be read against;
- ``usage``: ``--audit-log`` with ``--audit-mode usage`` (the default mode: allowed decisions counted per access and
  window, repeated denials collapsed);
- ``usage+shadow``: ``usage`` plus ``--shadow-acls``, a candidate ACL set of the active set's size
  (``bench_proxy.write_shadow_acls``: the group renamed, so the group's requests flip and are recorded; Produce and
  Fetch are decided twice and do not flip);
- ``all``: ``--audit-mode all``, one record per decision.

The broker, the user, the ACLs and the proxies' command lines are ``benchmarks.bench_proxy``'s (``setup_broker``,
``prepare_proxy_data_dir``, ``proxy_command``, ``ProxyProcess``); the load is ``benchmarks.kafka_load``'s
(``produce_throughput``, ``consume_throughput``: the same message count and size for every variant). After a
warm-up through every proxy, each round produces through every variant, then consumes through every variant, the
order of the variants reversed every other round. Reported per variant: the median over rounds of messages/s and
MB/s, its ratio to ``none``'s median over the same rounds (and the range of the per-round ratios), the proxy's CPU
seconds per 10,000 messages (``/proc/<pid>/stat`` over the timed window), and the size of its audit log at the end
(after the proxies were stopped, so usage windows still open are flushed). The issue's target: ``usage`` and
``usage+shadow`` at ≥ 95% of ``none``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_proxy import (
    GROUP,
    HOST,
    NODE_ID,
    PASSWORD,
    SIZE,
    TOPIC,
    USER,
    ExtraAcl,
    ProxyFailed,
    ProxyProcess,
    Usage,
    _free_port_pair,
    kafka_distribution,
    metered,
    prepare_proxy_data_dir,
    proxy_command,
    setup_broker,
)
from benchmarks.bench_server import wait_for_quiet
from benchmarks.kafka_load import (
    ClientSettings,
    LoadError,
    Throughput,
    broker_addresses,
    consume_throughput,
    produce_throughput,
    wait_ready,
)
from benchmarks.report import write_section
from tests.kafka.broker import ADMIN_PASSWORD, KafkaBroker, KafkaNotConfigured

#: Variant name → (``--audit-mode``, with a shadow ACL set); ``none`` runs without ``--audit-log``.
VARIANTS: dict[str, tuple[str | None, bool]] = {
    "none": (None, False),
    "none-again": (None, False),
    "usage": ("usage", False),
    "usage+shadow": ("usage", True),
    "all": ("all", False),
}
#: The variants the issue holds to ≥ TARGET of ``none``.
HELD = ("usage", "usage+shadow")
TARGET = 0.95
PHASES = ("produce", "consume")


@dataclass(frozen=True)
class Plan:
    messages: int
    warmup_messages: int
    rounds: int
    quiet_s: float

    @classmethod
    def make(cls, args: argparse.Namespace) -> Plan:
        quick = bool(args.quick)
        # 1M as in bench_proxy: a consume run of 200k lasts ~0.2 s, too short for this machine's noise
        messages = args.messages or (20_000 if quick else 1_000_000)
        return cls(
            messages=messages,
            warmup_messages=max(1000, min(messages // 10, 50_000)),
            rounds=int(args.rounds or (1 if quick else 5)),
            quiet_s=2.0 if quick else 10.0,
        )


@dataclass
class Variant:
    name: str
    workdir: Path
    port: int
    proxy: ProxyProcess
    audit_log: Path | None

    @property
    def settings(self) -> ClientSettings:
        return ClientSettings(f"{HOST}:{self.port}", USER, PASSWORD)

    def audit_bytes(self) -> int:
        """Bytes of the audit log and its rotated backups."""
        if self.audit_log is None:
            return 0
        return sum(p.stat().st_size for p in self.audit_log.parent.glob(self.audit_log.name + "*") if p.is_file())

    def audit_lines(self) -> int:
        if self.audit_log is None:
            return 0
        total = 0
        for p in self.audit_log.parent.glob(self.audit_log.name + "*"):
            with p.open("rb") as f:
                while chunk := f.read(1 << 20):
                    total += chunk.count(b"\n")
        return total


@dataclass
class Run:
    phase: str
    variant: str
    round: int
    throughput: Throughput
    usage: Usage

    @property
    def proxy_cpu_s(self) -> float:
        """Exact (``schedstat``) where the kernel keeps it, else from ``/proc/<pid>/stat``'s 10 ms ticks."""
        exact = self.usage.proxy_cpu_exact_s
        return exact if exact == exact else self.usage.proxy_cpu * self.usage.seconds


@dataclass
class Outcome:
    plan: Plan
    runs: list[Run] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    audit: dict[str, tuple[int, int]] = field(default_factory=dict)  # variant → (bytes, lines) at the end
    commands: dict[str, list[str]] = field(default_factory=dict)

    def of(self, phase: str, variant: str) -> list[Run]:
        return [r for r in self.runs if r.phase == phase and r.variant == variant]


def _say(text: str) -> None:
    print(f"[{Path(sys.argv[0]).stem or 'bench'} {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the run


def start_variant(name: str, tmp: Path, broker: KafkaBroker, password_file: Path, kafkaguard: Path | None,
                  audit: tuple[str | None, bool], extra_acls: Sequence[ExtraAcl] = ()) -> Variant:  # fmt: skip
    """One proxy of the variant ``name`` in ``tmp/name``: bench_proxy's command line with ``audit`` (``--audit-mode``
    or None for no audit trail, with a shadow ACL set), its data directory holding bench_proxy's ACLs and
    ``extra_acls``."""
    audit_mode, shadow = audit
    workdir = tmp / name.replace("+", "-")
    workdir.mkdir()
    prepare_proxy_data_dir(workdir / "proxy-data", extra_acls)
    port = _free_port_pair(1 + NODE_ID)
    args = argparse.Namespace(audit_mode=audit_mode, enforcement="enforcing", shadow_acls=shadow,
                              kafkaguard=kafkaguard, proxy_arg=[])  # fmt: skip
    command = proxy_command(workdir / "proxy-data", port, broker, password_file, args)
    _say(f"starting the proxy {name}: {' '.join(command)}")
    proxy = ProxyProcess(command, workdir, [port, port + 1 + NODE_ID])
    return Variant(name, workdir, port, proxy, workdir / "audit.log" if audit_mode else None)


class BenchFailed(Exception):
    """A run that cannot go on: the message says why, ``status`` is the command's exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


#: One proxy to start: its variant name, its ``kafkaguard`` executable (None: beside this Python) and its audit trail
#: (``--audit-mode`` or None for none, with a shadow ACL set).
ProxySpec = tuple[str, Path | None, tuple[str | None, bool]]


@contextlib.contextmanager
def proxies_before_a_broker(
    tmp: Path, kafka_tgz: Path | None, specs: Sequence[ProxySpec], extra_acls: Sequence[ExtraAcl] = ()
) -> Iterator[tuple[KafkaBroker, list[Variant]]]:
    """One Kafka broker set up as ``bench_proxy`` sets it up (user, topic, ACLs, and ``extra_acls`` on the broker and
    in every proxy) and one proxy per spec in front of it, all in ``tmp``; every proxy and the broker are stopped when
    the block ends, however it ends.

    :raises BenchFailed: no Kafka distribution (status 2), or a proxy that did not start (3, with its output).
    """
    broker: KafkaBroker | None = None
    variants: list[Variant] = []
    try:
        try:
            home = kafka_distribution(tmp / "dist", kafka_tgz)
        except KafkaNotConfigured as e:
            raise BenchFailed(f"no Kafka distribution: {e}", 2) from e
        _say("starting the Kafka broker")
        broker = KafkaBroker(home, tmp / "broker")
        broker.start()
        setup_broker(broker, extra_acls)
        password_file = tmp / "upstream-password"
        password_file.write_text(ADMIN_PASSWORD)
        password_file.chmod(0o600)
        try:
            for name, executable, audit in specs:
                variants.append(start_variant(name, tmp, broker, password_file, executable, audit, extra_acls))
        except ProxyFailed as e:
            raise BenchFailed(f"{e}\n" + "\n".join(v.proxy.output_tail() for v in variants), 3) from e
        yield broker, variants
    finally:
        for v in variants:
            with contextlib.suppress(Exception):
                v.proxy.stop()
        if broker is not None:
            broker.stop()


def run_rounds(plan: Plan, broker: KafkaBroker, variants: Sequence[Variant], outcome: Outcome) -> None:
    """``Bench.run``; a load that fails is a ``BenchFailed`` (status 1) with every proxy's output."""
    try:
        Bench(plan, broker, variants).run(outcome)
    except LoadError as e:
        tails = "\n".join(f"--- proxy {v.name} ---\n{v.proxy.output_tail()}" for v in variants)
        raise BenchFailed(f"a run failed: {e}\n{tails}", 1) from e


class Bench:
    def __init__(self, plan: Plan, broker: KafkaBroker, variants: Sequence[Variant]) -> None:
        self.plan = plan
        self.broker_pid = broker.process.pid if broker.process is not None else 0
        self.variants = {v.name: v for v in variants}

    def check(self) -> None:
        for v in self.variants.values():
            if v.proxy.process.poll() is not None:
                raise LoadError(f"the proxy {v.name} exited with status {v.proxy.process.returncode}")

    def order(self, round_: int) -> list[str]:
        names = list(self.variants)
        return names if round_ % 2 == 0 else names[::-1]

    def run(self, outcome: Outcome) -> None:
        plan = self.plan
        for v in self.variants.values():
            _say(f"{v.name}: waiting for {USER}'s metadata through {v.settings.bootstrap}")
            wait_ready(v.settings, TOPIC)
            brokers = broker_addresses(v.settings)  # the clients must reach the broker through the proxy
            if brokers != {NODE_ID: f"{HOST}:{v.port + 1 + NODE_ID}"}:
                raise LoadError(f"the proxy {v.name}'s Metadata lists brokers {brokers}")
        for v in self.variants.values():
            _say(f"{v.name}: warm-up ({plan.warmup_messages:,} messages produced and consumed)")
            produce_throughput(v.settings, TOPIC, plan.warmup_messages, SIZE)
            consume_throughput(v.settings, TOPIC, GROUP, plan.warmup_messages)
        for round_ in range(plan.rounds):
            for phase in PHASES:
                for name in self.order(round_):
                    v = self.variants[name]
                    _say(f"round {round_ + 1}/{plan.rounds}: {phase} {plan.messages:,} × {SIZE} B, {name}")
                    load = wait_for_quiet(plan.quiet_s)
                    outcome.loads.append(load)
                    usage = Usage(other_load=load)
                    window = metered(usage, self.broker_pid, v.proxy.pid)
                    if phase == "produce":
                        result = produce_throughput(v.settings, TOPIC, plan.messages, SIZE, window)
                    else:
                        result = consume_throughput(v.settings, TOPIC, GROUP, plan.messages, window)
                    run = Run(phase, name, round_, result, usage)
                    outcome.runs.append(run)
                    self.check()
                    _say(f"  {result.msgs_per_s:,.0f} msgs/s, {result.mb_per_s:.1f} MB/s, proxy "
                         f"{run.proxy_cpu_s:.2f} CPU s, audit log {v.audit_bytes():,} B")  # fmt: skip


# ------------------------------------------------------------------------------------------------ the report


def _median(values: Sequence[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


def round_ratios(o: Outcome, phase: str, name: str, baseline: str = "none") -> list[float]:
    """Per round, the variant's messages/s over the baseline's in the same round."""
    base = {r.round: r.throughput.msgs_per_s for r in o.of(phase, baseline)}
    return [r.throughput.msgs_per_s / base[r.round] for r in o.of(phase, name) if base.get(r.round)]


def ratio(o: Outcome, phase: str, name: str, baseline: str = "none") -> float:
    """The variant's median messages/s over the baseline's median over the same rounds."""
    base = _median([r.throughput.msgs_per_s for r in o.of(phase, baseline)])
    return _median([r.throughput.msgs_per_s for r in o.of(phase, name)]) / base


def cpu_per_10k(o: Outcome, phase: str, name: str) -> float:
    return _median([r.proxy_cpu_s / r.throughput.count * 10_000 for r in o.of(phase, name)])


def capacity_ratios(o: Outcome, phase: str, name: str, baseline: str = "none") -> list[float]:
    """Per round, messages per proxy CPU second of the variant over ``none``'s in the same round: the throughput
    ratio of two proxies that each had a core to themselves (what the shared cores' noise hides)."""
    base = {r.round: r.proxy_cpu_s / r.throughput.count for r in o.of(phase, baseline)}
    return [base[r.round] / (r.proxy_cpu_s / r.throughput.count) for r in o.of(phase, name)
            if base.get(r.round) and r.proxy_cpu_s > 0]  # fmt: skip


def capacity(o: Outcome, phase: str, name: str, baseline: str = "none") -> float:
    return _median(capacity_ratios(o, phase, name, baseline))


def verdicts(o: Outcome) -> dict[str, bool]:
    return {name: all(ratio(o, phase, name) >= TARGET for phase in PHASES) for name in HELD}


def capacity_verdicts(o: Outcome) -> dict[str, bool]:
    return {name: all(capacity(o, phase, name) >= TARGET for phase in PHASES) for name in HELD}


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n} B"


def render(o: Outcome, command: str) -> str:
    plan = o.plan
    rows = []
    for phase in PHASES:
        for name in VARIANTS:
            runs = o.of(phase, name)
            if not runs:
                continue
            per_round = round_ratios(o, phase, name)
            spread = f" ({min(per_round):.2f}–{max(per_round):.2f})" if name != "none" and per_round else ""
            cap = capacity_ratios(o, phase, name)
            cap_spread = f" ({min(cap):.2f}–{max(cap):.2f})" if name != "none" and cap else ""
            rows.append(
                f"| {phase} | `{name}` | {_median([r.throughput.msgs_per_s for r in runs]):,.0f} | "
                f"{_median([r.throughput.mb_per_s for r in runs]):.1f} | {ratio(o, phase, name):.3f}×{spread} | "
                f"{cpu_per_10k(o, phase, name) * 1000:.2f} ms | {capacity(o, phase, name):.3f}×{cap_spread} | "
                f"{_median([r.usage.proxy_cpu for r in runs]) * 100:.0f}% |"
            )
    audit_rows = []
    for name in VARIANTS:
        size, lines = o.audit.get(name, (0, 0))
        audit_rows.append(f"| `{name}` | {_size(size)} | {lines:,} |" if VARIANTS[name][0] else f"| `{name}` | – | – |")
    met = verdicts(o)
    verdict = "; ".join(
        f"`{name}`: produce {ratio(o, 'produce', name):.1%}, consume {ratio(o, 'consume', name):.1%} of `none` — "
        + ("**met**" if ok else "**not met**")
        for name, ok in met.items()
    )
    cap_verdict = "; ".join(
        f"`{name}`: produce {capacity(o, 'produce', name):.1%}, consume {capacity(o, 'consume', name):.1%} — "
        + ("**met**" if ok else "**not met**")
        for name, ok in capacity_verdicts(o).items()
    )
    return "\n".join([
        "## What the audit trail costs the proxy (`benchmarks/bench_audit.py`, issue 27)",
        "",
        f"Run: `{command}`.",
        "",
        "One Kafka 3.9 broker (KRaft, one node, `tests/kafka/broker.py`) and five `kafkaguard proxy` processes in "
        "front of it, all running for the whole run, each with its own data directory (the same user `bench` and "
        "ACLs as `bench_proxy`) and ports, differing only in their audit trail: `none` (no `--audit-log`), "
        "`none-again` (the same as `none`: an A/A control, whose ratio is this machine's noise floor), `usage` "
        "(`--audit-log … --audit-mode usage`, the default mode, 60 s windows), `usage+shadow` (the same plus "
        "`--shadow-acls` with a candidate set of the active set's size, 4 ACLs, the group renamed so the group's "
        "requests flip) and `all` (`--audit-mode all`). The clients and their settings are `bench_proxy`'s "
        "(confluent-kafka, SCRAM-SHA-512 over SASL_PLAINTEXT as `bench`; producer linger.ms=5, batch.size=256 KiB, "
        f"acks=all; messages of {SIZE} B to one partition). Broker, proxies and clients share the machine's "
        f"cores. After a warm-up of {plan.warmup_messages:,} messages through every proxy, {plan.rounds} round(s): "
        f"produce {plan.messages:,} messages through each variant (first `produce` to the end of `flush`), then "
        "consume as many through each (subscribe from the earliest offset, counted from the first batch), the "
        "order of the variants reversed every other round. Medians over the rounds; ratio: the variant's median "
        "over `none`'s median of the same rounds (in brackets the range of the per-round ratios); proxy CPU: user + "
        "system of the variant's proxy over the timed window, per 10,000 messages (exact: the ns of each thread's "
        "`/proc/<pid>/task/*/schedstat`) and as a share of one core; capacity: messages per proxy CPU second over "
        "`none`'s in the same round (median, range in brackets), the throughput ratio of two proxies that each had "
        "a core of their own, which the shared cores' noise hides from the first ratio. MB = 10^6 bytes of payload.",
        "",
        "| phase | variant | messages/s | MB/s | vs `none` | proxy CPU per 10k messages | capacity vs `none` | "
        "proxy CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Target (issue 27): `usage` and `usage+shadow` ≥ {TARGET:.0%} of `none`. Throughput: {verdict}. "
        f"Capacity (proxy CPU per message): {cap_verdict}.",
        "",
        f"Audit logs at the end of the run (after the proxies stopped and flushed their open windows), for "
        f"{plan.rounds * 2 + 2} × ~{plan.messages:,} messages through each proxy:",
        "",
        "| variant | audit log size | lines |",
        "|---|---:|---:|",
        *audit_rows,
        "",
        other_load(o),
    ])  # fmt: skip


# ------------------------------------------------------------------------------------------------ main


def other_load(o: Outcome) -> str:
    """The report's line on what else ran on the machine just before the runs (``wait_for_quiet``'s samples)."""
    spread = f"{min(o.loads):.2f}–{max(o.loads):.2f} cores (median {_median(o.loads):.2f})." if o.loads else "–"
    return f"Other load on the machine just before the runs: {spread}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20k messages, one round (a demo, not a result)")
    parser.add_argument("--messages", type=int, help="messages per throughput run (default 1M, --quick 20k)")
    parser.add_argument("--rounds", type=int, help="rounds (default 5, --quick 1)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--kafkaguard", type=Path, help="the kafkaguard executable (default: beside this Python)")
    parser.add_argument("--kafka-tgz", type=Path, help="Kafka tarball (default: KAFKA_TGZ/KAFKA_HOME, ../shared/kafka)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = Plan.make(args)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join([".venv/bin/python -m benchmarks.bench_audit", *given]) if given else "scripts/bench audit"
    outcome = Outcome(plan)
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-audit-"))
    specs = [(name, args.kafkaguard, audit) for name, audit in VARIANTS.items()]
    try:
        with proxies_before_a_broker(tmp, args.kafka_tgz, specs) as (broker, variants):
            outcome.commands = {v.name: v.proxy.command for v in variants}
            run_rounds(plan, broker, variants, outcome)
            for v in variants:  # SIGTERM: the proxy flushes its open usage windows before it exits
                v.proxy.stop()
                outcome.audit[v.name] = (v.audit_bytes(), v.audit_lines())
    except BenchFailed as e:
        print(f"bench_audit: {e}", file=sys.stderr)
        return e.status
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    markdown = render(outcome, command)
    print(markdown)
    if not (args.no_write or args.quick):
        write_section("audit-issue-27", markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Did offering the Kafka 4-era versions (issue 28) slow the proxy down? The proxy of a base revision and the proxy of
this tree in front of one broker, measured in the same rounds.

Run: ``scripts/bench upgrade`` (or ``.venv/bin/python -m benchmarks.bench_upgrade [--base REV] [--quick]
[--messages N] [--rounds N] [--no-write]``). Needs what ``benchmarks.bench_proxy`` needs (Java 17+, a Kafka
distribution) and git (the base revision is checked out into a temporary worktree).

Two ``kafkaguard proxy`` processes, each started from its own tree's ``src`` with the same command line
(``bench_proxy.proxy_command``, no audit trail): ``before`` (``--base``, by default the last commit before issue 28,
whose proxy offered Produce up to v9 and Fetch up to v12) and ``after`` (this tree: Produce v10–v11 with their answers
held and walked for ``node_endpoints``, Fetch v16–v17 at their own version, their answers walked as they stream). The
clients are ``bench_proxy``'s (confluent-kafka), which use the highest versions each proxy offers that librdkafka knows
(Produce v10, Fetch v16 from ``after``); the report says what each proxy offered. The rounds, the alternation and the
measures are ``bench_audit``'s (``Bench``): messages/s, the ratio to ``before`` in the same rounds, the proxy's exact
CPU per 10,000 messages and the capacity ratio. Target (issue 28): ``after`` no slower than ``before`` beyond this
machine's noise, read against 95%.

The KIP-848 consumer is not measured here: the pinned librdkafka (2.16) speaks the consumer protocol only with
ConsumerGroupHeartbeat v1 (Kafka 4.0), which a 3.9 broker does not serve. ``benchmarks.bench_kip848`` measures it with
Java's own ``KafkaConsumer``, against these two proxies' revisions.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.bench_audit import (
    PHASES,
    BenchFailed,
    Outcome,
    Plan,
    Variant,
    _median,
    capacity,
    capacity_ratios,
    cpu_per_10k,
    other_load,
    proxies_before_a_broker,
    ratio,
    round_ratios,
    run_rounds,
)
from benchmarks.bench_proxy import HOST, PASSWORD, USER
from benchmarks.report import write_section
from tests.wire import Wire

ROOT = Path(__file__).resolve().parent.parent
#: The last commit before issue 28's changes: the proxy with Produce ≤ v9, Fetch ≤ v12, no KIP-848.
DEFAULT_BASE = "648fef0"
TARGET = 0.95
#: The APIs whose offered versions the report names (Produce, Fetch).
SHOWN = {0: "Produce", 1: "Fetch"}


def _say(text: str) -> None:
    print(f"[bench_upgrade] {text}", file=sys.stderr, flush=True)


def launcher(tree: Path, directory: Path, name: str) -> Path:
    """An executable that runs ``kafkaguard`` from ``tree``'s sources with this interpreter."""
    path = directory / f"kafkaguard-{name}"
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{tree / "src"}" exec "{sys.executable}" -m kafkaguard.cli.main "$@"\n')
    path.chmod(0o755)
    return path


def offered(variant: Variant) -> dict[str, int]:
    """The highest Produce and Fetch versions the proxy offers ``bench``."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with Wire((HOST, variant.port)) as wire:
        wire.login(USER, PASSWORD)
        answer = wire.request(ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
    return {SHOWN[k.api_key]: int(k.max_version) for k in answer.api_keys if k.api_key in SHOWN}


def render(o: Outcome, command: str, base: str, versions: dict[str, dict[str, int]]) -> str:
    rows = []
    for phase in PHASES:
        for name in ("before", "after"):
            runs = o.of(phase, name)
            if not runs:
                continue
            per_round = round_ratios(o, phase, name, "before")
            cap = capacity_ratios(o, phase, name, "before")
            spread = f" ({min(per_round):.2f}–{max(per_round):.2f})" if name != "before" else ""
            cap_spread = f" ({min(cap):.2f}–{max(cap):.2f})" if name != "before" and cap else ""
            rows.append(
                f"| {phase} | `{name}` | {_median([r.throughput.msgs_per_s for r in runs]):,.0f} | "
                f"{ratio(o, phase, name, 'before'):.3f}×{spread} | {cpu_per_10k(o, phase, name) * 1000:.2f} ms | "
                f"{capacity(o, phase, name, 'before'):.3f}×{cap_spread} |"
            )
    shown = "; ".join(
        f"`{n}`: " + ", ".join(f"{api} v{v}" for api, v in sorted(vs.items())) for n, vs in versions.items()
    )
    verdict = ", ".join(
        f"{phase} {ratio(o, phase, 'after', 'before'):.1%} (capacity {capacity(o, phase, 'after', 'before'):.1%})"
        for phase in PHASES
    )
    return "\n".join([
        "## The proxy before and after the Kafka 4-era versions (`benchmarks/bench_upgrade.py`, issue 28)",
        "",
        f"Run: `{command}`.",
        "",
        f"One Kafka 3.9 broker and two `kafkaguard proxy` processes in front of it with the same command line: "
        f"`before` (revision `{base}`) and `after` (this tree), no audit trail. The clients are `bench_proxy`'s "
        f"(confluent-kafka, SCRAM-SHA-512 over SASL_PLAINTEXT; producer linger.ms=5, batch.size=256 KiB, acks=all; "
        f"1 KiB messages to one partition). The proxies offer {shown}; the clients use the highest of those they know "
        f"(librdkafka 2.16: Produce up to v10, Fetch up to v16, as `tests/kafka/proxy/test_proxy_client_versions.py` "
        f"reads from its protocol log). Fetch v16+ goes upstream at its own version from `after`, its answer walked as "
        f"it streams. After a warm-up, "
        f"{o.plan.rounds} round(s) of "
        f"{o.plan.messages:,} messages produced, then consumed, through each proxy, the order alternating. Medians "
        "over the rounds; in brackets the range of the per-round ratios; proxy CPU exact (`schedstat`); capacity: "
        "messages per proxy CPU second over `before`'s in the same round.",
        "",
        "| phase | proxy | messages/s | vs `before` | proxy CPU per 10k messages | capacity vs `before` |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"Target (issue 28): no regression (read against {TARGET:.0%}): `after` {verdict} of `before`.",
        "",
        other_load(o),
    ])  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"git revision to compare with (default {DEFAULT_BASE})")
    parser.add_argument("--quick", action="store_true", help="20k messages, one round (a demo, not a result)")
    parser.add_argument("--messages", type=int, help="messages per throughput run (default 1M, --quick 20k)")
    parser.add_argument("--rounds", type=int, help="rounds (default 5, --quick 1)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--kafka-tgz", type=Path, help="Kafka tarball (default: KAFKA_TGZ/KAFKA_HOME, ../shared/kafka)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = Plan.make(args)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join([".venv/bin/python -m benchmarks.bench_upgrade", *given]) if given else "scripts/bench upgrade"
    outcome = Outcome(plan)
    git = shutil.which("git")
    if git is None:
        print("bench_upgrade: git is not on PATH (the base revision is checked out with it)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-upgrade-"))
    base_tree = tmp / "base"
    try:
        added = subprocess.run([git, "-C", str(ROOT), "worktree", "add", "--detach", str(base_tree), args.base],
                               capture_output=True, text=True, check=False)  # fmt: skip
        if added.returncode != 0:
            print(f"bench_upgrade: cannot check out {args.base}: {added.stderr.strip()}", file=sys.stderr)
            return 2
        trees = {"before": base_tree, "after": ROOT}
        specs = [(name, launcher(tree, tmp, name), (None, False)) for name, tree in trees.items()]
        with proxies_before_a_broker(tmp, args.kafka_tgz, specs) as (broker, variants):
            versions = {v.name: offered(v) for v in variants}
            run_rounds(plan, broker, variants, outcome)
    except BenchFailed as e:
        print(f"bench_upgrade: {e}", file=sys.stderr)
        return e.status
    finally:
        subprocess.run([git, "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(tmp, ignore_errors=True)
    markdown = render(outcome, command, args.base, versions)
    print(markdown)
    if not (args.no_write or args.quick):
        write_section("upgrade-issue-28", markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

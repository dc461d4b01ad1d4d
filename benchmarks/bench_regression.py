"""Did a change make the server slower? SCRAM logins/s and DescribeAcls/s of a base revision and of this working
tree, measured in the same run, interleaved (base, new, base, new, …) so that the machine's drift hits both.

Run: ``scripts/bench regression`` (or ``.venv/bin/python -m benchmarks.bench_regression [--base REV] [--rounds N]``).

The base revision is checked out into a temporary git worktree; each round runs this module's ``--child`` in a
fresh interpreter whose ``kafkaguard`` is imported from that tree's ``src`` (the load generator is always this
tree's ``benchmarks.bench_server``, so both sides get the same client). The child measures, with
``bench_server``'s own functions and settings (server pinned to one core, the load generator to the other):
SCRAM-SHA-256 logins over fresh connections at 50 concurrent, and DescribeAcls with a small result at 50
connections × 1 in flight, each next to its protocol baseline (connect + ApiVersions; ApiVersions). The table
reports the median of the rounds per side and the ratio new ÷ base. Target (issue 11): no regression beyond 5%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The last commit before the security issue's changes (issue 11): what the new request path is compared with.
DEFAULT_BASE = "6d323e0"
#: What the bases the README and docs/benchmarks.md name were, said after the revision in the report.
BASE_NOTES = {
    DEFAULT_BASE: " (before issue 11: no length checks, no pre-authentication gate, no per-request snapshot)",
    "17f4e24": " (before issue 24: no item budget, no connection limits by address, sessions outliving their user; "
    "and before ApiVersions was answered from a memo, `codec.constant_response`: the two baselines, which ask "
    "ApiVersions, gain that. Without it the connection path measured 85–95% of base, with today's accept path "
    "88–99%)",
}
METRICS = (
    ("login_baseline", "baseline: connect + ApiVersions + close, 50 concurrent, /s"),
    ("login", "SCRAM-SHA-256 login (connect + ApiVersions + SASL), 50 concurrent, /s"),
    ("small_baseline", "baseline: ApiVersions, 50 connections × 1 in flight, req/s"),
    ("small", "DescribeAcls (2 ACLs), 50 connections × 1 in flight, req/s"),
)


async def _measure(seconds: float) -> dict[str, float]:
    from benchmarks import bench_server as b
    from kafkaguard.model import PatternType, ResourceType
    from kafkaguard.scram import ScramMechanism

    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-regression-"))
    cores = sorted(os.sched_getaffinity(0))
    server_cpu = cores[-1] if len(cores) >= 2 else None
    b.prepare_data_dir(tmp / "server").close()
    server = b.ServerProcess(tmp / "server", server_cpu)
    if server_cpu is not None:
        os.sched_setaffinity(0, {cores[0]})
    try:
        scram = b.CachedScramClient()
        login_base = await b.logins(server, scram, None, 50, seconds, "baseline")
        login = await b.logins(server, scram, ScramMechanism.SCRAM_SHA_256, 50, seconds, "login")
        conns = await b.open_authenticated(server.port, 50, scram)
        template = b.Template(b.describe_request(ResourceType.TOPIC, b.SMALL_TOPIC, PatternType.LITERAL))
        small_base = await b.closed_loop(server, conns, b.Template(b.api_versions_request()), 1, 1.0, seconds, "base")
        small = await b.closed_loop(server, conns, template, 1, 1.0, seconds, "small")
        for conn in conns:
            conn.close()
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "login_baseline": login_base.rate,
        "login": login.rate,
        "small_baseline": small_base.rate,
        "small": small.rate,
    }


def _child(out: Path, seconds: float) -> None:
    out.write_text(json.dumps(asyncio.run(_measure(seconds))))


def _run_side(src: Path, seconds: float) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
    command = [sys.executable, "-m", "benchmarks.bench_regression", "--child", str(out), "--seconds", str(seconds)]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=600)
    result: dict[str, float] = json.loads(out.read_text())
    out.unlink()
    return result


def render(base: str, rounds: int, seconds: float, sides: dict[str, list[dict[str, float]]]) -> str:
    lines = [
        "## Regression check: server request path (`benchmarks/bench_regression.py`)",
        "",
        f"Base revision `{base}`{BASE_NOTES.get(base, '')} against this tree, {rounds} interleaved rounds of "
        f"{seconds:g} s per measurement, same load "
        "generator (`bench_server`'s), server pinned to one core. Medians of the rounds; target: new ≥ 95% of base.",
        "",
        "| measurement | base | new | new ÷ base |",
        "|---|---|---|---|",
    ]
    for key, label in METRICS:
        old = statistics.median(r[key] for r in sides["base"])
        new = statistics.median(r[key] for r in sides["new"])
        lines.append(f"| {label} | {old:,.0f} | {new:,.0f} | {new / old:.1%} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"git revision to compare with (default {DEFAULT_BASE})")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child, args.seconds)
        return
    worktree = Path(tempfile.mkdtemp(prefix="kafkaguard-base-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.base], cwd=ROOT, check=True)  # noqa: S607
    sides: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    try:
        for round_number in range(args.rounds):
            for side, src in (("base", worktree / "src"), ("new", ROOT / "src")):
                result = _run_side(src, args.seconds)
                sides[side].append(result)
                print(f"round {round_number + 1} {side}: " + ", ".join(f"{k} {v:,.0f}" for k, v in result.items()))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)  # noqa: S607
    markdown = render(args.base, args.rounds, args.seconds, sides)
    print(markdown)
    if not args.no_write:
        from benchmarks.report import write_section

        write_section("regression", markdown)


if __name__ == "__main__":
    main()

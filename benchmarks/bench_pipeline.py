"""Audit pipeline benchmark: ``simulate`` on synthetic Zipf logs vs a naive per-row Python UDF and the JVM floor.

Synthetic data (seeded): 2,000 service principals with Zipf-distributed activity, each reading/writing/describing
a Zipf-distributed handful of "home" topics from one host (plus 2% random noise accesses); 10,000 ACLs (literal
and prefixed allows per service, wildcard and prefixed denies, ~6% deny); a proposed set that drops 5% of the
ACLs and adds 300. Records are kafkaguard audit records written as Parquet (8 files per size).

Measured in one session (session start excluded):

* floor: read the same files and count every column (what any job must at least do);
* reference: read the same files and group them by the access key (principal, host, operation, resource type and
  name) with counts and first/last seen: the JVM aggregation any such job needs, without validation or decisions;
* simulate: ``kafkaguard.pipeline.jobs.simulate.run`` end to end (JVM aggregation, ``mapInArrow`` decisions of
  the distinct accesses under both ACL sets, flips written as Parquet, HTML report);
* naive UDF: a per-row Python UDF deciding every raw record under both sets (the design the pipeline avoids).

Run: ``.venv/bin/python -m benchmarks.bench_pipeline`` (1M and 10M; the UDF on 1M only, it is too slow for 10M),
or ``--quick`` (100k records).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.report import write_section
from kafkaguard.pipeline.acls import AclSet, acl_set_from_text
from kafkaguard.pipeline.jobs import simulate
from kafkaguard.pipeline.jobs.common import JobRun
from kafkaguard.pipeline.session import start_spark

PRINCIPALS = 2000
TOPICS = 20000
HOSTS = 64
HOME = 30  # topics per principal
OPS = np.array(["READ", "WRITE", "DESCRIBE"])
T0_MS = 1_741_910_400_000  # 2025-03-14T00:00:00Z


def principal_name(i: int) -> str:
    return f"User:svc-{i:04d}"


def topic_name(t: int) -> str:
    return f"fam{t // 100:03d}.topic-{t % 100:02d}"


def home_topic(p: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.asarray((p * 37 + k * 101) % TOPICS)


def home_name(i: int, k: int) -> str:
    return topic_name(int(home_topic(np.array(i), np.array(k))))


def make_records(n: int, rng: np.random.Generator) -> pa.Table:
    p = (rng.zipf(1.3, n) - 1) % PRINCIPALS
    k = (rng.zipf(1.5, n) - 1) % HOME
    topic = home_topic(p, k)
    op = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    noise = rng.random(n) < 0.02
    topic = np.where(noise, rng.integers(0, TOPICS, n), topic)
    p = np.where(noise & (rng.random(n) < 0.5), rng.integers(0, PRINCIPALS, n), p)
    host = p % HOSTS
    principals = pa.array([principal_name(i) for i in range(PRINCIPALS)])
    topics = pa.array([topic_name(t) for t in range(TOPICS)])
    hosts = pa.array([f"10.1.{h // 256}.{h % 256}" for h in range(HOSTS)])

    def dictionary(indices: np.ndarray, values: pa.Array) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), values)

    def constant(value: str) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value]))

    millis = T0_MS + np.sort(rng.integers(0, 86_400_000, n))
    return pa.table(
        {
            "version": pa.array(np.ones(n, dtype=np.int64)),
            "time": pa.array(millis, pa.timestamp("ms", tz="UTC")),
            "principal": dictionary(p, principals),
            "host": dictionary(host, hosts),
            "api": constant("Fetch"),
            "operation": dictionary(op, pa.array(OPS)),
            "resource_type": constant("TOPIC"),
            "pattern_type": constant("LITERAL"),
            "resource_name": dictionary(topic, topics),
            # The logged decision is a function of the access (as in a real log under stable ACLs): ~10% denied.
            "decision": dictionary((p * 7 + topic * 13 + op) % 10 == 0, pa.array(["ALLOWED", "DENIED"])),
            "rule": constant("DefaultDeny"),
        }
    )


def acl(principal: str, name: str, pattern: str, op: str, perm: str = "ALLOW") -> dict[str, str]:
    return {
        "principal": principal,
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": name,
        "pattern_type": pattern,
        "operation": op,
        "permission_type": perm,
    }


def make_acls(rng: np.random.Generator) -> tuple[AclSet, AclSet]:
    rows: list[dict[str, str]] = []
    for i in range(PRINCIPALS):
        for k in range(4):  # literal READ on the most used home topics
            rows.append(acl(principal_name(i), home_name(i, k), "LITERAL", "READ"))
        rows.append(acl(principal_name(i), home_name(i, 0), "LITERAL", "WRITE"))
    for f in range(200):  # family prefixes for a sample of principals
        rows.append(acl(principal_name(int(rng.integers(0, PRINCIPALS))), f"fam{f:03d}.", "PREFIXED", "READ"))
    rows.append(acl("User:*", "fam000.topic-0", "PREFIXED", "DESCRIBE"))
    deny_count = 10_000 - len(rows)
    for _ in range(deny_count):
        t = int(rng.integers(0, TOPICS))
        rows.append(acl(principal_name(int(rng.integers(0, PRINCIPALS))), topic_name(t), "LITERAL", "WRITE", "DENY"))
    current = [dict(r, id=f"c{i}") for i, r in enumerate(rows[:10_000])]
    keep = [r for r in current if rng.random() >= 0.05]
    added = [
        dict(
            acl(
                principal_name(int(rng.integers(0, PRINCIPALS))),
                f"fam{int(rng.integers(0, 200)):03d}.",
                "PREFIXED",
                "WRITE",
            ),
            id=f"n{i}",
        )
        for i in range(300)
    ]
    return (
        acl_set_from_text(json.dumps({"acls": current}), "current", "current"),
        acl_set_from_text(json.dumps({"acls": keep + added}), "proposed", "proposed"),
    )


def write_log(root: Path, n: int, rng: np.random.Generator) -> str:
    path = root / f"records-{n}"
    path.mkdir()
    per_file = -(-n // 8)
    for i in range(8):
        size = min(per_file, n - i * per_file)
        if size > 0:
            pq.write_table(make_records(size, rng), path / f"part-{i}.parquet")
    return str(path)


def floor(spark, path: str) -> float:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path)
    start = time.perf_counter()
    df.agg(*[F.count(c) for c in df.columns]).collect()
    return time.perf_counter() - start


def group_by_key(spark, path: str) -> float:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path)
    key = ["principal", "host", "operation", "resource_type", "resource_name"]
    start = time.perf_counter()
    df.groupBy(*key).agg(F.count(F.lit(1)), F.min("time"), F.max("time")).agg(F.count(F.lit(1))).collect()
    return time.perf_counter() - start


def naive_udf(spark, path: str, current: AclSet, proposed: AclSet) -> float:
    from pyspark.sql import functions as F

    from kafkaguard import AclOperation, Action, RequestContext, ResourcePattern, ResourceType, StandardAuthorizer

    payloads = (spark.sparkContext.broadcast(current.to_payload()), spark.sparkContext.broadcast(proposed.to_payload()))
    state: dict[str, tuple[StandardAuthorizer, StandardAuthorizer]] = {}

    def flips(principal, host, operation, resource_type, name):  # untyped: typed UDFs are taken for pandas UDFs
        if "a" not in state:
            state["a"] = (
                AclSet.from_payload(payloads[0].value).authorizer(),
                AclSet.from_payload(payloads[1].value).authorizer(),
            )
        a, b = state["a"]
        context = RequestContext(principal, host)
        action = Action(AclOperation[operation], ResourcePattern(ResourceType[resource_type], name))
        return bool(a.authorize_one(context, action) != b.authorize_one(context, action))

    udf = F.udf(flips, "boolean")
    df = spark.read.parquet(path)
    start = time.perf_counter()
    df.where(udf("principal", "host", "operation", "resource_type", "resource_name")).count()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100k records only")
    args = parser.parse_args()
    sizes = [100_000] if args.quick else [1_000_000, 10_000_000]
    udf_sizes = {sizes[0]}
    rng = np.random.default_rng(7)
    root = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-"))
    try:
        current, proposed = make_acls(rng)
        logs = {n: write_log(root, n, rng) for n in sizes}
        started = time.perf_counter()
        spark = start_spark("kafkaguard-bench")
        print(f"session start {time.perf_counter() - started:.1f}s")
        # Warm-up, not measured: the first SQL job and the first Python workers (one-time costs of a session).
        warm = write_log(root, 10_000, rng)
        simulate.run(spark, [warm], current, proposed, str(root / "warm"), run_=JobRun("simulate", str(root / "warm")))
        rows = []
        for n in sizes:
            f = min(floor(spark, logs[n]) for _ in range(2))
            g = min(group_by_key(spark, logs[n]) for _ in range(2))
            times = []
            for _ in range(2):
                start = time.perf_counter()
                result = simulate.run(
                    spark,
                    [logs[n]],
                    current,
                    proposed,
                    str(root / f"out-{n}"),
                    run_=JobRun("simulate", str(root / f"out-{n}")),
                )
                times.append(time.perf_counter() - start)
            s = min(times)
            u = naive_udf(spark, logs[n], current, proposed) if n in udf_sizes else None
            distinct = int(result.summary["distinct_accesses"])
            flips = int(result.summary["newly_denied"]) + int(result.summary["newly_allowed"])
            rows.append((n, f, g, s, max(times), u, distinct, flips))
            print(
                f"{n:,}: floor {f:.1f}s, group-by {g:.1f}s, simulate {s:.1f}–{max(times):.1f}s, "
                f"udf {'-' if u is None else round(u, 1)}s, "
                f"distinct {distinct:,}, flips {flips:,}"
            )
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = [
        "## Audit pipeline: `simulate` (current vs proposed ACL set)",
        "",
        f"Synthetic Zipf logs (Parquet, kafkaguard audit records), {PRINCIPALS:,} principals, {TOPICS:,} topics, "
        f"10,000 ACLs (current) vs {len(proposed.acls):,} (proposed). Session start excluded; local[*].",
        "",
        "| records | distinct accesses | flips | floor: read + count, rec/s | reference: read + group-by key, rec/s "
        "(% of floor) | simulate, rec/s (s, 2 runs) | % of floor | naive per-row UDF, rec/s | simulate ÷ UDF |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    udf_rate = next(n / u for n, _, _, _, _, u, _, _ in rows if u)
    ratios = sorted({f"{g / f:.1f}" for _, f, g, _, _, _, _, _ in rows}, key=float)
    for n, f, g, s, s_max, u, distinct, flips in rows:
        udf_text = f"{n / u:,.0f}" if u else f"not run (too slow); {udf_rate:,.0f} at {sizes[0]:,}"
        ratio = f"{(n / s) / (n / u):.1f}×" if u else f"{(n / s) / udf_rate:.1f}× (vs the UDF rate at {sizes[0]:,})"
        cells = [f"{n:,}", f"{distinct:,}", f"{flips:,}", f"{n / f:,.0f}", f"{n / g:,.0f} ({100 * f / g:.0f}%)"]
        cells += [f"{n / s:,.0f} ({s:.1f}–{s_max:.1f})", f"{100 * f / s:.0f}%", udf_text, ratio]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Targets (2-core machine): simulate ≥ 50% of the floor's throughput, ≥ 5× the per-row UDF, "
        "10M records through simulate in < 60 s after session start. The simulate time includes writing the flips "
        "table and the HTML report. The naive UDF runs on the smallest size only (at its rate 10M would take "
        "about a minute); the 10M ratio uses its 1M rate. The floor reads Parquet column chunks without decoding "
        "them into rows, so it is far cheaper than any grouping: the reference column (a bare group-by of the five "
        f"access-key strings: no validation, no decisions) alone takes {'–'.join(ratios[:1] + ratios[1:][-1:])}× the "
        "floor's time in this run, of the 2× that 50% of the floor allows. On top of it simulate validates every "
        "record, also counts per hour (grouping sets), decides each distinct access under both ACL sets in Python "
        "(~2.5 µs per decision per core, batched per principal and host) and writes its outputs, and each run "
        "pays ~1–2 s of fixed costs (broadcasting and building two 10k-ACL authorizers in each Python worker, a "
        "handful of Spark jobs), which dominate at 1M records.",
    ]
    write_section("pipeline", "\n".join(lines))


if __name__ == "__main__":
    main()

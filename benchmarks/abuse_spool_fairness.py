"""Issue 36, finding 4 (``spool-fairness``): one client could push everyone out of the audit topic.

Per code (the code before issue 36, and this tree), a fresh ``kafkaguard serve`` (``bench_abuse.Target``) sends its
audit trail to the file and to a Kafka topic at a closed port: the cluster is unreachable, every record stays in the
spool (``audit_spool_max_bytes`` 1 MiB, ``audit_mode: all``). The attacker (no ACL: each topic it names is a DENIED
event) sends ``FLOOD`` (3,000) Metadata requests, each naming a new topic, with a 32 KiB client id: the finding's
load, whose 1,500 requests filled the spool, and 1,500 more that overflow it. The quiet principal (``bench``) sends
one Metadata request every ``QUIET_EVERY`` of them and ``QUIET_AFTER`` more after the flood. Once the file holds the
last quiet event the target is stopped (SIGTERM) and its spool is read with this tree's reader (it reads both frame
formats): an event of the file that is not in the spool was dropped.

Rows: the quiet principal's events lost (goal: 0); the attacker's drops (goal: its own oldest, its newest kept);
and the spool's append rate into a full spool, records/s, in a child process per code (``append_rate``: the same
1 MiB spool, 700-byte records in batches of 50, 2% of them a quiet principal's; default segments, fsync each
second): goal at least 5 times the rate at which the flood made events in the same run, so the audit writer
keeps up with a flood even while it evicts (each eviction step fsyncs the segments it rewrote: the rate follows the
disk).

Run: ``.venv/bin/python -m benchmarks.bench_abuse --only spool-fairness --no-write`` (``--quick``: fewer appends).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.abuse_findings import FindingContext, FindingRow
from benchmarks.bench_abuse import ATTACKER, ATTACKER_PASSWORD, HOST, PASSWORD, USER, Setup, Target, free_port_pair
from tests.wire import Wire, metadata

FINDING = "spool-fairness"
SPOOL_BYTES = 1024 * 1024
#: The finding's 1,500 requests filled the 1 MiB spool; twice as many overflow it by as much again.
FLOOD = 3000
QUIET_EVERY = 50
QUIET_AFTER = 20
#: As long as a Kafka request header allows (an int16 length).
BIG_CLIENT_ID = "c" * 32767
#: The append benchmark: records appended into the full spool, their frame size, and per append call.
APPEND_RECORDS = 60_000
APPEND_FRAME_BYTES = 700
APPEND_BATCH = 50
#: The margin the audit writer needs over one flooding client's event rate (the rate is fsync-bound: it varies
#: with the disk and its other load from run to run).
RATE_FACTOR = 5
STOP_SECONDS = 30.0


@dataclass(frozen=True)
class Outage:
    """What one code's spool kept of the flood."""

    quiet_events: int
    quiet_lost: int
    noisy_events: int
    noisy_lost: int
    #: The attacker's events (in the order recorded) kept before its first dropped one (in flight when the
    #: outage began: the sender's batch is never evicted), after its last dropped one (its newest), and between.
    noisy_kept_first: int
    noisy_kept_newest: int
    noisy_kept_between: int
    flood_events_per_s: float


def principal_of(envelope: dict[str, Any]) -> str:
    data = envelope["data"]
    if envelope["type"].startswith("io.kafkaguard.authentication."):
        return str(envelope["subject"])
    if envelope["type"].startswith("io.kafkaguard.management."):
        return str(data["actor"]["principal"])
    return str(data.get("principal"))


def file_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.startswith('{"specversion"')]


def _spool_module() -> Any:
    """The spool module of the code this process runs: ``kafkaguard.audit.records.spool``, or
    ``kafkaguard.audit.spool`` before issue 37 moved it (this module is imported by the code before too, so it
    imports neither at its top)."""
    for name in ("kafkaguard.audit.records.spool", "kafkaguard.audit.spool"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(name)
    raise ImportError("no kafkaguard audit spool module in this tree")


def spool_ids(directory: Path, copy: Path) -> set[str]:
    """The events still in a spool's segments (read from a copy, with this tree's reader)."""
    from kafkaguard.audit.records.spool import Spool

    shutil.copytree(directory, copy)
    reader = Spool(copy, max_bytes=1 << 40)
    reader.open()
    try:
        return {json.loads(item.value)["id"] for _, item in reader.read(10_000_000, max_bytes=1 << 40)}
    finally:
        reader.close()


def outage(context: FindingContext, name: str, pythonpath: str | None, flood: int) -> Outage:
    workdir = context.workdir / f"spool-fairness-{name}"
    workdir.mkdir()
    audit_log, spool_dir = workdir / "audit.log", workdir / "spool"
    settings = {
        "audit_mode": "all", "audit_log": str(audit_log), "audit_spool_dir": str(spool_dir),
        "audit_spool_max_bytes": str(SPOOL_BYTES), "audit_kafka_topic": "audit",
        "audit_kafka_bootstrap_servers": f"{HOST}:{free_port_pair(0)}",  # nothing listens there
        "audit_kafka_delivery_timeout_seconds": "3.0",
    }  # fmt: skip
    target = Target("serve", Setup(workdir, None, context.executable, None, settings, pythonpath))
    try:
        with Wire((HOST, target.port)) as noisy, Wire((HOST, target.port)) as quiet:
            quiet.login(USER, PASSWORD)
            noisy.login(ATTACKER, ATTACKER_PASSWORD)
            started = time.perf_counter()
            for index in range(flood):
                noisy.request(metadata_request(f"flood-{index}"), client_id=BIG_CLIENT_ID)
                if index % QUIET_EVERY == QUIET_EVERY // 2:
                    metadata(quiet, [f"quiet-during-{index}"], allow_auto_topic_creation=False)
            flood_seconds = time.perf_counter() - started
            for index in range(QUIET_AFTER):
                metadata(quiet, [f"quiet-after-{index}"], allow_auto_topic_creation=False)
        last_subject = f"TOPIC:quiet-after-{QUIET_AFTER - 1}"
        deadline = time.monotonic() + 60
        while not any(e["subject"] == last_subject for e in file_events(audit_log)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {name} target never wrote its last event; its log:\n{target.tail()}")
            time.sleep(0.2)  # polling the file, bounded by the deadline
        time.sleep(1.0)  # the Kafka sink appends right after the file: let it
    finally:
        target.process.terminate()
        try:
            target.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            target.stop()
    events = file_events(audit_log)
    kept = spool_ids(spool_dir, workdir / "spool-copy")
    quiet_ids = [e["id"] for e in events if principal_of(e) == f"User:{USER}"]
    noisy_ids = [e["id"] for e in events if principal_of(e) == f"User:{ATTACKER}"]
    lost = [index for index, i in enumerate(noisy_ids) if i not in kept]
    first, last = (lost[0], lost[-1]) if lost else (len(noisy_ids), len(noisy_ids) - 1)
    return Outage(
        quiet_events=len(quiet_ids),
        quiet_lost=sum(1 for i in quiet_ids if i not in kept),
        noisy_events=len(noisy_ids),
        noisy_lost=len(lost),
        noisy_kept_first=first,
        noisy_kept_newest=len(noisy_ids) - 1 - last,
        noisy_kept_between=(last - first + 1) - len(lost),
        flood_events_per_s=flood / flood_seconds,
    )


def metadata_request(topic: str) -> Any:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName

    return MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip


def append_rate(directory: str, records: int) -> dict[str, float]:
    """In a child process running one code's spool: fill a ``SPOOL_BYTES`` spool (nothing leaves it), then append
    ``records`` more in batches of ``APPEND_BATCH`` and time them. Works with the spool before owners too."""
    spool_module = _spool_module()
    spool_class, item_class = spool_module.Spool, spool_module.SpoolItem

    owned = "principal" in item_class.__dataclass_fields__

    def item(n: int) -> Any:
        principal = "User:quiet" if n % 50 == 0 else "User:noisy"
        fields: dict[str, Any] = {"principal": principal, "category": "authorization"} if owned else {}
        value = f"{n:010d}".encode().ljust(APPEND_FRAME_BYTES - 70, b".")
        return item_class("audit", b"TOPIC:t", value, **fields)

    spool = spool_class(Path(directory), max_bytes=SPOOL_BYTES)
    spool.open()
    n = 0
    while spool.size_bytes + APPEND_FRAME_BYTES < SPOOL_BYTES:
        spool.append([item(n)])
        n += 1
    batches = [[item(n + b * APPEND_BATCH + i) for i in range(APPEND_BATCH)] for b in range(records // APPEND_BATCH)]
    started = time.perf_counter()
    for batch in batches:
        spool.append(batch)
    elapsed = time.perf_counter() - started
    spool.close()
    return {"records_per_s": len(batches) * APPEND_BATCH / elapsed, "frame_bytes": float(len(item(0).frame())),
            "compactions": float(getattr(spool, "compactions", 0))}  # fmt: skip


def measure_append(context: FindingContext, name: str, pythonpath: str | None, records: int) -> dict[str, float]:
    repo = Path(__file__).resolve().parent.parent
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(repo)) if p)
    directory = context.workdir / f"spool-append-{name}"
    code = (
        "import json, sys; from benchmarks.abuse_spool_fairness import append_rate; "
        "print(json.dumps(append_rate(sys.argv[1], int(sys.argv[2]))))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(directory), str(records)], env=env, cwd=repo,
                          capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
    measured: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def run(context: FindingContext) -> list[FindingRow]:
    flood = FLOOD  # a few seconds: the same in a quick run
    records = APPEND_RECORDS // 6 if context.quick else APPEND_RECORDS
    after = outage(context, "after", None, flood)
    before = outage(context, "before", context.before_pythonpath, flood) if context.before_pythonpath else None
    append_after = measure_append(context, "after", None, records)
    append_before = measure_append(context, "before", context.before_pythonpath, records) if before else None
    absent = "not measured: no tree of the code before"

    def quiet(o: Outage) -> str:
        return f"{o.quiet_lost} of {o.quiet_events} lost"

    def noisy(o: Outage) -> str:
        return (f"{o.noisy_lost} of {o.noisy_events} dropped; kept: its first {o.noisy_kept_first}, its newest "
                f"{o.noisy_kept_newest}, {o.noisy_kept_between} between")  # fmt: skip

    def rate(measured: dict[str, float]) -> str:
        return f"{measured['records_per_s']:,.0f} records/s ({measured['compactions']:.0f} compactions)"

    target = f"serve, {SPOOL_BYTES // 1024} KiB spool, cluster unreachable, {flood} Metadata × 32 KiB client id"
    needed = RATE_FACTOR * after.flood_events_per_s
    return [
        FindingRow(FINDING, target, quiet(before) if before else absent, quiet(after),
                   "the quiet principal loses 0", after.quiet_lost == 0 and after.quiet_events > 0),
        FindingRow(FINDING, target, noisy(before) if before else absent, noisy(after),
                   "the attacker loses its own oldest first (but the sender's in-flight first ones), its newest kept",
                   after.noisy_lost > 0 and after.noisy_kept_newest > 0 and after.noisy_kept_between == 0),
        FindingRow(FINDING, f"spool append, full {SPOOL_BYTES // 1024} KiB spool, "
                   f"{append_after['frame_bytes']:.0f}-byte records × {APPEND_BATCH}",
                   rate(append_before) if append_before else absent, rate(append_after),
                   f"≥ {RATE_FACTOR}× the flood's {after.flood_events_per_s:,.0f} events/s (≥ {needed:,.0f})",
                   append_after["records_per_s"] >= needed),
    ]  # fmt: skip

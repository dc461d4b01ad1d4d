"""``audit_mode: usage`` on real traffic: the same requests recorded by a usage log and by an ``all`` log give
``kafkaguard audit usage`` exactly the same hits per ACL.

The proxy runs with ``audit_mode: usage`` (its settings, 10 s windows: the traffic spans more than one, and a
refused consumer's retries fall several to a window) in front of the real broker; a second ``AuditLog`` in
``all`` mode is fed every decision the proxy queues (its
``record_later`` calls, the very ``make`` functions), so both logs hold the same decisions of the same traffic —
two proxies would see different traffic (a consumer's Fetch and Metadata counts depend on timing). Traffic: allowed
produce, a consumer group reading, a produce to a topic without WRITE (denied), a consumer refused its group
(denied, retried: identical denials). The Spark job (``python -m kafkaguard.pipeline.jobs usage``, its own JVM)
then reads each log.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer

from kafkaguard.audit.records import AuditRecord, from_json_line
from kafkaguard.audit.records.record import NOT_A_RECORD
from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.model import AclOperation, ResourceType
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import start_proxy
from tests.kafka.proxy.test_proxy_clients import (
    PASSWORD,
    consume,
    create_topics,
    grant,
    produce,
    proxy_bootstrap,
    sasl,
    unique,
    user,
)
from tests.serving import ServerHandle

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def usage_proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerHandle, Path]]:
    """A proxy with ``audit_mode: usage`` (10 s windows), and the path of an ``all`` log fed the same decisions."""
    directory = tmp_path_factory.mktemp("usage-proxy")
    handle = start_proxy(directory, kafka, audit_mode="usage", audit_usage_window_seconds=10.0)
    audit = handle.server.audit
    assert audit is not None and audit.usage is not None
    everything = AuditLog(directory / "all.log", mode="all", flush_interval=0.05)

    async def start() -> None:
        everything.start()

    handle.run(start())
    record_later, stop = audit.record_later, audit.stop

    def both(make: Callable[[], Sequence[AuditRecord | Mapping[str, Any]]]) -> None:
        record_later(make)
        everything.record_later(make)

    async def stop_both() -> None:
        await stop()
        await everything.stop()

    audit.record_later = both  # type: ignore[method-assign]  # the same calls reach both logs
    audit.stop = stop_both  # type: ignore[method-assign]
    try:
        yield handle, directory / "all.log"
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


def denied_group(proxy: ServerHandle, name: str, topic: str, group: str) -> None:
    """A consumer refused its group: it retries FindCoordinator/JoinGroup while polling (4 s: several identical
    denials, at least two within one 10 s window)."""
    consumer = Consumer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"group.id": group,
                        "auto.offset.reset": "earliest"}))  # fmt: skip
    consumer.subscribe([topic])
    try:
        for _ in range(4):
            consumer.poll(1.0)
    finally:
        consumer.close()


def run_usage(log: Path, acls: Path, out: Path) -> dict[tuple[str, ...], tuple[int, int, str]]:
    result = subprocess.run(
        [sys.executable, "-m", "kafkaguard.pipeline.jobs", "usage", "--log", str(log), "--acls", str(acls),
         "--out", str(out), "--master", "local[1]"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert re.search(r"unparseable_lines\s+0\n", result.stdout), result.stdout
    rows = pq.read_table(str(out / "acl_usage")).to_pylist()
    return {
        (r["principal"], r["operation"], r["resource_type"], r["resource_name"]): (
            int(r["matched_requests"]),
            int(r["decisive_requests"]),
            str(r["status"]),
        )
        for r in rows
    }


def test_usage_mode_gives_the_hits_per_acl_of_all_mode(
    usage_proxy: tuple[ServerHandle, Path], kafka: KafkaBroker, tmp_path: Path
) -> None:
    proxy, all_log = usage_proxy
    topic, secret, group, other_group = unique("usage"), unique("usage-secret"), unique("usage-g"), unique("usage-x")
    create_topics(kafka, topic, secret)
    name = user(proxy)
    principal = f"User:{name}"
    grant(proxy, principal, ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    grant(proxy, principal, ResourceType.GROUP, group, AclOperation.READ)
    grant(proxy, principal, ResourceType.TOPIC, unique("never-used"), AclOperation.READ)
    for _ in range(3):
        assert produce(proxy, name, topic, 5) == [None] * 5
    assert len(consume(proxy, name, topic, group, 15)) == 15
    produce(proxy, name, secret, 1, **{"message.timeout.ms": 3_000})
    denied_group(proxy, name, topic, other_group)
    acls = tmp_path / "acls.json"
    acls.write_text(proxy.services.acls.export_json(with_ids=True))
    audit = proxy.server.audit
    assert audit is not None
    proxy.run(audit.stop())  # what the proxy's stop does: the open window is written

    usage_log = proxy.audit_path
    # The usage log also holds the trail's other events (logins, the test's own grants): not records.
    folded = [r for r in map(from_json_line, usage_log.read_text("utf-8").splitlines()) if r is not NOT_A_RECORD]
    individual = [from_json_line(line) for line in all_log.read_text("utf-8").splitlines()]
    assert all(isinstance(r, AuditRecord) for r in folded + individual)
    assert sum(r.count for r in folded if isinstance(r, AuditRecord)) == len(individual)
    assert len(folded) < len(individual)
    assert any(isinstance(r, AuditRecord) and r.count > 1 and r.decision.name == "DENIED" for r in folded)

    hits_all = run_usage(all_log, acls, tmp_path / "usage-all")
    hits_usage = run_usage(usage_log, acls, tmp_path / "usage-usage")
    assert hits_usage == hits_all
    mine = {key: value for key, value in hits_usage.items() if key[0] == principal}
    assert mine[(principal, "WRITE", "TOPIC", topic)][2] == "USED"
    assert mine[(principal, "READ", "TOPIC", topic)][2] == "USED"
    assert mine[(principal, "READ", "GROUP", group)][2] == "USED"
    assert [v[2] for k, v in mine.items() if k[3].startswith("never-used")] == ["UNUSED"]

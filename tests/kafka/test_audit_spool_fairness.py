"""Issue 36's finding 4 against real processes: one client cannot push everyone else out of the audit topic.

A ``kafkaguard serve`` process sends its trail to a cluster that is not there (a closed port) through a 64 KiB
spool. A low-privilege client floods it with Metadata requests carrying 32 KiB client ids, each naming a topic it
may not describe (a DENIED event each), while another low-privilege principal makes a few requests before, during
and after the flood. Then the server is restarted with the sink pointed at a real broker: the spool survives, its
backlog is sent, and the topic is read. Every quiet event is there; the noisy principal's newest are there and its
oldest were dropped; the drops are counted per principal and category (the console's ``/metrics`` and the sink's
WARNING). On the code before (a1dee34) the spool kept the flood's oldest and dropped everything after it: the quiet
principal's later events and the noisy's newest never reached the topic.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.kafka.broker import KafkaCluster, free_port
from tests.kafka.test_audit_topic_sink import (
    KAFKAGUARD,
    consume_until,
    create_topic,
    file_envelopes,
    has_ids,
    launch,
    spool_frames,
)
from tests.wire import Wire, metadata

SPOOL_BYTES = 64 * 1024
FLOOD = 600
#: The client id of the flood's requests: as long as a Kafka header allows (int16 length).
BIG_CLIENT_ID = "c" * 32767


def principal_of(envelope: dict[str, Any]) -> str:
    """Who caused an event, read from its envelope as a reader of the topic would."""
    data = envelope["data"]
    if envelope["type"].startswith("io.kafkaguard.authentication."):
        return str(envelope["subject"])
    if envelope["type"].startswith("io.kafkaguard.management."):
        return str(data["actor"]["principal"])
    return str(data.get("principal"))


def dropped_in(warning: str) -> int:
    """The count of one of the sink's "the spool is full" WARNINGs."""
    found = re.search(r": (\d+) record\(s\) dropped", warning)
    assert found is not None, warning
    return int(found.group(1))


def scrape(port: int) -> dict[tuple[str, ...], float]:
    """The console's ``/metrics``: the audit series, keyed by (name, label values...)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    series: dict[tuple[str, ...], float] = {}
    for line in text.splitlines():
        found = re.match(r"^(kafkaguard_audit_\w+)\{(.*)\} (\S+)$", line)
        if found:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', found.group(2))))
            series[(found.group(1), *(f"{k}={v}" for k, v in labels))] = float(found.group(3))
    return series


def spool_drops(series: dict[tuple[str, ...], float]) -> dict[tuple[str, str], int]:
    return {
        (key[2].removeprefix("principal="), key[1].removeprefix("category=")): int(value)
        for key, value in series.items()
        if key[0] == "kafkaguard_audit_spool_dropped_records_total"
    }


def kafka_dropped(series: dict[tuple[str, ...], float]) -> int:
    return int(series.get(("kafkaguard_audit_records_total", "outcome=dropped", "sink=kafka"), 0))


def metadata_of(topic: str) -> MetadataRequest:
    """Metadata v12 for one topic, not to be created (sent with the flood's client id)."""
    return MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip


def envelopes(path: Path) -> list[dict[str, Any]]:
    return file_envelopes(path) if path.exists() else []


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)  # polling the process's counters, bounded by the deadline


def test_a_flooding_client_loses_its_own_oldest_events_and_a_quiet_one_loses_none(
    kafka_cluster: KafkaCluster, tmp_path: Path
):
    topic = create_topic(kafka_cluster)
    data_dir, spool_dir, audit_log = tmp_path / "data", tmp_path / "spool", tmp_path / "audit.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAGUARD_")}
    for user in ("noisy", "quiet"):
        subprocess.run([str(KAFKAGUARD), "users", "add", user, "--password", f"{user}-secret", "--data-dir",
                        str(data_dir)], check=True, capture_output=True, timeout=60, env=env)  # fmt: skip
    port, http_port, closed = free_port(), free_port(), free_port()  # nothing listens on ``closed``
    settings = {
        "data_dir": str(data_dir), "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"], "audit_mode": "all",
        "audit_log": str(audit_log), "audit_kafka_topic": topic, "audit_kafka_delivery_timeout_seconds": 3.0,
        "audit_spool_dir": str(spool_dir), "audit_spool_max_bytes": SPOOL_BYTES,
        "http_listener": f"127.0.0.1:{http_port}",
    }  # fmt: skip

    def start(bootstrap: str, name: str) -> subprocess.Popen[bytes]:
        config = tmp_path / f"{name}.yaml"
        config.write_text(json.dumps({**settings, "audit_kafka_bootstrap_servers": bootstrap}))  # JSON is YAML
        return launch("serve", config, env, port, tmp_path / f"{name}.log")

    process = start(f"127.0.0.1:{closed}", "outage")
    try:
        with Wire(("127.0.0.1", port)) as flooding, Wire(("127.0.0.1", port)) as calm:
            calm.login("quiet", "quiet-secret")
            flooding.login("noisy", "noisy-secret")
            metadata(calm, ["quiet-before"], allow_auto_topic_creation=False)
            for index in range(FLOOD):
                flooding.request(metadata_of(f"noisy-{index}"), client_id=BIG_CLIENT_ID)
                if index % 150 == 75:
                    metadata(calm, [f"quiet-during-{index}"], allow_auto_topic_creation=False)
            for index in range(3):
                metadata(calm, [f"quiet-after-{index}"], allow_auto_topic_creation=False)
        wait_for(lambda: any(e["subject"] == "TOPIC:quiet-after-2" for e in envelopes(audit_log)))
        stable: list[int] = []

        def settled() -> bool:  # the sink counts in the writer thread right after the file: two equal scrapes
            stable.append(kafka_dropped(scrape(http_port)))
            return len(stable) >= 2 and stable[-1] == stable[-2] > 0

        wait_for(settled)
        series = scrape(http_port)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    outage_log = (tmp_path / "outage.log").read_text(errors="replace")
    assert "Traceback" not in outage_log, outage_log[-3000:]

    in_file = file_envelopes(audit_log)
    spooled = {json.loads(frame.value)["id"] for frame in spool_frames(spool_dir, tmp_path / "copy")}
    process = start(kafka_cluster.bootstrap, "back")  # the spool survives: its backlog is sent first
    try:
        records = consume_until(kafka_cluster, topic, has_ids(spooled))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    in_topic = [r["value"]["id"] for r in records]
    assert spooled <= set(in_topic)

    quiet = [e["id"] for e in in_file if principal_of(e) == "User:quiet"]
    noisy = [e["id"] for e in in_file if principal_of(e) == "User:noisy"]
    assert len(quiet) == 1 + 1 + 4 + 3  # the login, before, during, after
    assert len(noisy) == 1 + FLOOD
    assert set(quiet) <= set(in_topic), "every event of the quiet principal reached the topic"
    missing = [index for index, event_id in enumerate(noisy) if event_id not in set(in_topic)]
    assert len(missing) > FLOOD // 2, "the flood did not fill the spool"
    assert set(noisy[-40:]) <= set(in_topic), "the noisy principal's newest events are in the topic"
    kept_before_last_loss = [i for i in range(missing[-1]) if noisy[i] in set(in_topic)]
    assert len(kept_before_last_loss) <= 40  # only what was in flight when the outage began: its oldest went first
    # the order of the topic is the order recorded
    first_run = [i for i in dict.fromkeys(in_topic) if i in {e["id"] for e in in_file}]
    assert first_run == [e["id"] for e in in_file if e["id"] in set(first_run)]

    drops = spool_drops(series)
    assert drops == {("User:noisy", "authorization"): len(missing)} or drops == {
        ("User:noisy", "authorization"): len(missing) - 1,
        ("User:noisy", "authentication"): 1,
    }, drops
    assert kafka_dropped(series) == len(missing)
    warnings = [line for line in outage_log.splitlines() if "the spool is full" in line]
    assert warnings and all("lost the most: User:noisy" in line for line in warnings)
    assert sum(dropped_in(w) for w in warnings) == len(missing)
    assert "User:quiet" not in "".join(warnings)

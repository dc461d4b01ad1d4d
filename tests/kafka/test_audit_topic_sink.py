"""The audit trail's Kafka topic sink against a real Kafka cluster (one broker of its own, so that it can be stopped):
envelopes arrive in the topic keyed by subject and routed; with the broker down they wait in the spool and arrive in
order, exactly as spooled, once it is back; and after a SIGKILL of the server during traffic plus a broker restart,
every event that had reached the spool or the topic ends in the topic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkaguard.audit.records.spool import Spool
from kafkaguard.audit.records.trail_statistics import SENT, SPOOLED
from kafkaguard.pipeline import collect_files
from kafkaguard.pipeline.collect_plan import overlaps
from tests.kafka.broker import ADMIN_PASSWORD as KAFKA_ADMIN_PASSWORD
from tests.kafka.broker import KafkaBroker, KafkaCluster, free_port
from tests.kafka.proxy.conftest import free_port_range
from tests.kafka.test_audit_collect import env as collect_env
from tests.kafka.test_audit_collect import run_and_kill
from tests.server.test_cli_serve import wait_until_listening
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle, TlsFiles, start_server
from tests.wire import Wire, metadata

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "audit-event.schema.json").read_text("utf-8"))
KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")


@pytest.fixture(scope="module")
def audit_cluster(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A cluster of one broker that tests stop and start again (each starts it again before it ends)."""
    cluster = KafkaCluster(kafka_dist, tmp_path_factory.mktemp("audit-cluster"), brokers=1, listener="PLAINTEXT",
                           authorizer=False)  # fmt: skip
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def create_topic(cluster: KafkaCluster, partitions: int = 1) -> str:
    name = f"audit-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(cluster.client_config())
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def consume_until(cluster: KafkaCluster, topic: str, done: Callable[[list[dict[str, Any]]], bool],
                  timeout: float = 120.0) -> list[dict[str, Any]]:  # fmt: skip
    """Every record of ``topic`` from the start, as {"key", "value" (the decoded envelope), "offset"}, read until
    ``done`` says so (or ``timeout``)."""
    consumer = Consumer({**cluster.client_config(), "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not done(records):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            key = message.key()
            records.append({"key": key.decode() if key is not None else None,
                            "value": json.loads(message.value() or b"null"), "offset": message.offset()})  # fmt: skip
    finally:
        consumer.close()
    return records


def file_envelopes(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def has_ids(wanted: set[str]) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda records: wanted <= {r["value"]["id"] for r in records}


def sink_server(tmp_path: Path, cluster: KafkaCluster, topic: str, **overrides: Any) -> ServerHandle:
    tls_files = TlsFiles(tmp_path / "unused.pem", tmp_path / "unused.key")
    return start_server(
        tmp_path / "data", tls_files,
        listeners=["SASL_PLAINTEXT://127.0.0.1:0"], ssl_certfile=None, ssl_keyfile=None,
        audit_kafka_bootstrap_servers=cluster.bootstrap, audit_kafka_topic=topic,
        audit_kafka_delivery_timeout_seconds=3.0, audit_spool_dir=tmp_path / "spool", **overrides,
    )  # fmt: skip


def traffic(handle: ServerHandle, prefix: str, count: int) -> None:
    """One login and ``count`` Metadata requests naming one new topic each: one authorization event each."""
    with Wire(handle.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        for index in range(count):
            metadata(wire, [f"{prefix}-{index}"], allow_auto_topic_creation=False)


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)  # polling a counter, bounded by the deadline


def launch(command: str, config: Path, env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """``kafkaguard <command> --config config``, listening on ``port``; its stderr appended to ``log_path``."""
    with log_path.open("ab") as log:  # the child keeps its own descriptor
        process = subprocess.Popen([str(KAFKAGUARD), command, "--config", str(config)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=log)  # fmt: skip
    wait_until_listening(process, port, timeout=30.0)
    return process


def metadata_traffic(port: int, user: str, password: str, prefix: str, stop: threading.Event) -> None:
    """Metadata requests naming a new topic each (``prefix-N``), one authorization event each, until ``stop``;
    logging in again whenever the connection breaks (the server is being killed: ``stop`` follows)."""
    index = 0
    while not stop.is_set():
        try:
            with Wire(("127.0.0.1", port)) as wire:
                wire.login(user, password)
                while not stop.is_set():
                    metadata(wire, [f"{prefix}-{index}"], allow_auto_topic_creation=False)
                    index += 1
                    time.sleep(0.005)
        except (OSError, AssertionError):
            time.sleep(0.05)


def kill_during_outage(cluster: KafkaCluster, process: subprocess.Popen[bytes], port: int,
                       clients: list[tuple[str, str, str]]) -> None:  # fmt: skip
    """Traffic from ``clients`` (user, password, topic prefix) against ``process``: 2 s with the audit cluster up
    (records go through the spool to the topic), 5 s with its broker stopped (records stay in the spool: delivery
    timeout 3 s), then SIGKILL of ``process``; the traffic stopped and the broker started again in any case."""
    stop = threading.Event()
    threads = [threading.Thread(target=metadata_traffic, args=(port, *client, stop), daemon=True) for client in clients]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2.0)
        cluster.stop_broker(1)
        time.sleep(5.0)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        if process.poll() is None:
            process.kill()
            process.wait(10)
        cluster.start_broker(1)


def test_envelopes_arrive_in_the_topic_keyed_by_subject_and_routed(audit_cluster: KafkaCluster, tmp_path: Path):
    topic = create_topic(audit_cluster)
    routes = [{"category": "authorization", "resource": "TOPIC:noise-", "topic": "drop"}]
    handle = sink_server(tmp_path, audit_cluster, topic, audit_kafka_routes=routes)
    try:
        traffic(handle, "visible", 3)
        traffic(handle, "noise", 2)
        in_file = handle.audit_envelopes()
        expected = {e["id"] for e in in_file if not e["subject"].startswith("TOPIC:noise-")}
        records = consume_until(audit_cluster, topic, has_ids(expected))
    finally:
        handle.stop()
    assert handle.errors == []
    assert {r["value"]["id"] for r in records} == expected  # the noise went to the file only
    subjects = {r["value"]["subject"] for r in records}
    assert {"TOPIC:visible-0", "TOPIC:visible-2", f"User:{ADMIN}"} <= subjects
    assert not any(s.startswith("TOPIC:noise-") for s in subjects)
    check = jsonschema_rs.Draft202012Validator(SCHEMA)
    for record in records:
        assert record["key"] == record["value"]["subject"]
        assert [e.message for e in check.iter_errors(record["value"])] == []
    statistics = handle.services.audit_trail
    assert statistics.get("kafka", SENT) == len(expected)
    assert statistics.get("kafka", "routed_drop") == 2


def test_with_the_broker_down_records_spool_and_arrive_in_order_once_it_is_back(
    audit_cluster: KafkaCluster, tmp_path: Path
):
    topic = create_topic(audit_cluster)
    handle = sink_server(tmp_path, audit_cluster, topic)
    statistics = handle.services.audit_trail
    try:
        traffic(handle, "before", 5)
        before = len(handle.audit_envelopes())  # the traffic's, and the management events of the test's setup
        wait_for(lambda: statistics.get("kafka", SENT) == before)
        audit_cluster.stop_broker(1)
        try:
            traffic(handle, "during", 40)
            handle.audit_envelopes()
            wait_for(lambda: statistics.get("kafka", SPOOLED) > 0)
            audit = handle.server.audit
            assert audit is not None
            spool_bytes = statistics.spool_bytes
            assert spool_bytes is not None and spool_bytes > 0
        finally:
            audit_cluster.start_broker(1)
        traffic(handle, "after", 5)
        in_file = handle.audit_envelopes()
        records = consume_until(audit_cluster, topic, has_ids({e["id"] for e in in_file}))
    finally:
        handle.stop()
    assert handle.errors == []
    # one partition: the topic's order is the order the events were recorded, each exactly once
    assert [r["value"]["id"] for r in records] == [e["id"] for e in in_file]
    assert statistics.get("kafka", SENT) == len(in_file)
    assert statistics.get("kafka", "dropped") == 0


def test_a_killed_server_and_a_restarted_broker_lose_nothing_that_reached_the_spool_or_the_topic(
    audit_cluster: KafkaCluster, tmp_path: Path
):
    """The issue's proof: SIGKILL of the server during traffic, with the broker restarted around it."""
    topic = create_topic(audit_cluster)
    port = free_port()
    spool_dir = tmp_path / "spool"
    config = tmp_path / "kafkaguard.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "data_dir": str(tmp_path / "data"), "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"],
        "super_users": f"User:{ADMIN}", "admin_user": ADMIN, "audit_mode": "all",
        "audit_log": str(tmp_path / "audit.log"),
        "audit_kafka_bootstrap_servers": audit_cluster.bootstrap, "audit_kafka_topic": topic,
        "audit_kafka_delivery_timeout_seconds": 3.0, "audit_spool_dir": str(spool_dir),
        "audit_spool_fsync_seconds": 0.2,
    }))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAGUARD_")}
    env["KAFKAGUARD_ADMIN_PASSWORD"] = ADMIN_PASSWORD

    def start() -> subprocess.Popen[bytes]:
        return launch("serve", config, env, port, tmp_path / "serve.log")

    process = start()
    kill_during_outage(audit_cluster, process, port, [(ADMIN, ADMIN_PASSWORD, "killed")])

    # What reached the spool before the kill: every frame of its segments (those wholly acknowledged are deleted:
    # their records are in the topic, and the consumer below sees them there).
    spooled = [json.loads(frame.value) for frame in spool_frames(spool_dir, tmp_path / "copy-all")]
    pending = spool_frames(spool_dir, tmp_path / "copy-pending", committed=True)
    in_file = file_envelopes(tmp_path / "audit.log")
    assert len(pending) > 10, "the broker's outage left unacknowledged records in the spool"

    process = start()  # the restarted server sends the spool's backlog first
    try:
        records = consume_until(audit_cluster, topic, has_ids({e["id"] for e in spooled}))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    in_topic = [r["value"]["id"] for r in records]
    assert {e["id"] for e in spooled} <= set(in_topic)
    # in the order they were spooled (first occurrences: a record acknowledged but not yet committed at the kill is
    # sent again after the restart, with its id)
    first_seen = list(dict.fromkeys(in_topic))
    spooled_ids = [e["id"] for e in spooled]
    assert [i for i in first_seen if i in set(spooled_ids)] == spooled_ids
    # everything the server wrote to its file before the kill is in the topic, but the last batch, if the kill cut
    # it between the file and the spool (the file is written first): never a gap in the middle
    file_ids = [e["id"] for e in in_file]
    missing = [i for i in file_ids if i not in set(in_topic)]
    assert missing == file_ids[len(file_ids) - len(missing) :]
    sys.stderr.write(
        f"kill test: {len(in_file)} in the file, {len(spooled)} in the spool at the kill ({len(pending)} not "
        f"acknowledged), {len(in_topic)} records "
        f"in the topic ({len(in_topic) - len(set(in_topic))} duplicates), {len(missing)} in the file only\n"
    )


def spool_frames(directory: Path, copy: Path, *, committed: bool = False) -> list[Any]:
    """The records of the spool's segments, read as the sink reads them, from a copy (the restarted server owns the
    spool): from their first byte, or (``committed``) after the last acknowledged one."""
    copy.mkdir()
    for path in directory.iterdir():
        if path.suffix == ".seg" or (committed and path.name == "committed"):
            (copy / path.name).write_bytes(path.read_bytes())
    reader = Spool(copy, max_bytes=1 << 30)
    reader.open()
    frames = [item for _, item in reader.read(1_000_000, max_bytes=1 << 30)]
    reader.close()
    return frames


def test_a_killed_proxys_events_reach_the_parquet_dataset_once_through_a_killed_collect(
    audit_cluster: KafkaCluster, kafka: KafkaBroker, tmp_path: Path
):
    """The issue's whole chain: ``kafkaguard proxy`` (in front of the session's broker) sends its trail to another
    cluster, whose broker is stopped during traffic; the proxy is SIGKILLed with records unacknowledged in its
    spool; the restarted proxy drains the spool; ``audit collect`` is SIGKILLed twice mid-run and finishes with
    ``--until-idle``. Every event the proxy recorded before the kill that reached its spool or the topic is in the
    Parquet dataset exactly once, and a further run writes nothing."""
    topic = create_topic(audit_cluster, partitions=3)
    data_dir, spool_dir, port = tmp_path / "data", tmp_path / "spool", free_port_range()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAGUARD_")}
    subprocess.run([str(KAFKAGUARD), "users", "add", "eve", "--password", "eve-secret", "--data-dir", str(data_dir)],
                   check=True, capture_output=True, timeout=60, env=env)  # fmt: skip
    config = tmp_path / "kafkaguard.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "data_dir": str(data_dir), "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"],
        "upstream": kafka.bootstrap, "upstream_security_protocol": "SASL_PLAINTEXT", "upstream_user": ADMIN,
        "super_users": f"User:{ADMIN}", "admin_user": ADMIN, "audit_mode": "all",
        "audit_log": str(tmp_path / "audit.log"),
        "audit_kafka_bootstrap_servers": audit_cluster.bootstrap, "audit_kafka_topic": topic,
        "audit_kafka_delivery_timeout_seconds": 3.0, "audit_spool_dir": str(spool_dir),
        "audit_spool_fsync_seconds": 0.2,
    }))  # fmt: skip
    env |= {"KAFKAGUARD_ADMIN_PASSWORD": ADMIN_PASSWORD, "KAFKAGUARD_UPSTREAM_PASSWORD": KAFKA_ADMIN_PASSWORD}

    def start() -> subprocess.Popen[bytes]:
        return launch("proxy", config, env, port, tmp_path / "proxy.log")

    process = start()  # the admin's Metadata requests are allowed, eve's denied: an event each
    kill_during_outage(
        audit_cluster, process, port, [(ADMIN, ADMIN_PASSWORD, "chain"), ("eve", "eve-secret", "denied")]
    )

    spooled = [json.loads(frame.value)["id"] for frame in spool_frames(spool_dir, tmp_path / "copy-all")]
    pending = spool_frames(spool_dir, tmp_path / "copy-pending", committed=True)
    in_file = [e["id"] for e in file_envelopes(tmp_path / "audit.log")]
    assert len(pending) > 10, "the outage left unacknowledged records in the spool"
    denied = [e for e in file_envelopes(tmp_path / "audit.log") if e["data"].get("decision") == "DENIED"]
    assert denied, "eve's denials are part of the trail"

    process = start()  # the restarted proxy sends the spool's backlog first
    try:
        consume_until(audit_cluster, topic, has_ids(set(spooled)))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    in_topic = [r["value"]["id"] for r in consume_until(audit_cluster, topic, lambda _: False, timeout=8.0)]

    props = audit_cluster.client_properties(tmp_path / "collect.properties")
    props.write_text(props.read_text() + "session.timeout.ms=6000\n")  # a killed member's partitions come back soon
    dataset = tmp_path / "dataset"
    command = [sys.executable, "-m", "kafkaguard.cli.main", "audit", "collect", "--bootstrap-servers",
               audit_cluster.bootstrap, "--command-config", str(props), "--topic", topic, "--to", str(dataset),
               "--max-records-per-file", "150", "--max-seconds-per-file", "600"]  # fmt: skip
    kills = [run_and_kill(command, after_files=n) for n in (2, 6)]
    assert all(k > 0 for k in kills)
    done = subprocess.run([*command, "--until-idle", "4"], capture_output=True, text=True, env=collect_env(),
                          timeout=240, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr

    opened = collect_files.open_dataset(str(dataset))
    ranges, temps = collect_files.scan(opened, topic)
    assert temps == [] and overlaps(ranges) == []
    rows = collect_files.read_rows(opened, sorted(ranges), topic)
    ids = [r["id"] for r in rows]
    assert all(r["error"] is None for r in rows)
    assert len(ids) == len(set(ids)), "an event is in the dataset twice"
    # Recorded before the kill and reached the spool or the topic: all in the dataset.
    reached = set(spooled) | (set(in_file) & set(in_topic))
    assert reached <= set(ids)
    assert set(ids) == set(in_topic)  # and nothing else (the restarted proxy had no traffic)
    # What the file holds but never reached the spool can only be the last batch the kill cut (file first).
    missing = [i for i in in_file if i not in set(ids)]
    assert missing == in_file[len(in_file) - len(missing) :]

    before = sorted(p.name for p in dataset.rglob("*.parquet"))
    again = subprocess.run([*command, "--until-idle", "2"], capture_output=True, text=True, env=collect_env(),
                           timeout=120, check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "into 0 new files" in again.stdout
    assert sorted(p.name for p in dataset.rglob("*.parquet")) == before
    sys.stderr.write(
        f"chain test: {len(in_file)} in the proxy's file, {len(spooled)} in its spool at the kill ({len(pending)} not "
        f"acknowledged), {len(in_topic)} topic records ({len(in_topic) - len(set(in_topic))} repeats), "
        f"{len(ids)} in the dataset after collect was killed {len(kills)} times, {len(missing)} in the file only\n"
    )

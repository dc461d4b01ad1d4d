"""Changes refused by authorization through a real ``kafkaguard proxy`` (issue 36, item 1): the proxy answers
kafkaguard's own APIs itself (ACLs, SCRAM users, client quotas), and a user without ALTER who sends CreateAcls,
DeleteAcls, AlterUserScramCredentials or AlterClientQuotas to it is in ``kafkaguard acls history`` (JSON and table,
run as a subprocess) with the actor, its address, the door, the request id and Kafka's error; in the audit file and
in the audit topic on the upstream cluster (the Kafka sink); a request of 10,000 refused items writes 20 events and a
summary. The answers are Kafka's (unchanged).

On a1dee34 every test here fails: nothing refused by authorization reached the history or the audit trail.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import free_port_range
from tests.kafka.proxy.test_proxy_clients import sasl
from tests.server.refused_requests import (
    KAFKAGUARD,
    SALT,
    SALTED_PASSWORD,
    alter_quotas,
    alter_scram,
    assert_refused_by,
    create_acls,
    delete_acls,
    environment,
    history_json,
    history_table,
    unique,
)
from tests.server.test_cli_serve import wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration

BOB, BOB_PASSWORD = "bob", "bob-proxy-pw"
CLIENT = "mallory-tool"
DOOR = "kafka:SASL_PLAINTEXT"


@dataclass
class Proxied:
    data_dir: Path
    port: int
    audit_log: Path
    audit_topic: str
    process: subprocess.Popen[bytes]

    def wire(self) -> Wire:
        wire = Wire(("127.0.0.1", self.port), timeout=30)
        wire.login(BOB, BOB_PASSWORD)
        return wire


@pytest.fixture(scope="module")
def proxied(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    """``kafkaguard proxy`` in front of the broker, its audit trail in a file and in a topic of the broker."""
    data_dir = tmp_path_factory.mktemp("proxy-refused") / "data"
    subprocess.run([str(KAFKAGUARD), "users", "add", BOB, "--password", BOB_PASSWORD, "--data-dir", str(data_dir)],
                   check=True, capture_output=True, timeout=60, env=environment())  # fmt: skip
    audit_topic = unique("refused-audit")
    broker = AdminClient(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD))  # held until the answer
    broker.create_topics([NewTopic(audit_topic, 1, 1)])[audit_topic].result(30)
    port, audit_log = free_port_range(), data_dir / "audit.log"
    process = subprocess.Popen(
        [str(KAFKAGUARD), "proxy", "--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}",
         "--upstream", kafka.bootstrap, "--upstream-security-protocol", "SASL_PLAINTEXT", "--upstream-user", ADMIN,
         "--super-users", "User:ops", "--audit-log", str(audit_log), "--audit-kafka-bootstrap-servers", "upstream",
         "--audit-kafka-topic", audit_topic],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment(KAFKAGUARD_UPSTREAM_PASSWORD=ADMIN_PASSWORD),
    )  # fmt: skip
    try:
        wait_until_listening(process, port)
        wait_until_listening(process, port + 2)  # node 1 of the broker
        yield Proxied(data_dir, port, audit_log, audit_topic, process)
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    text = err.decode(errors="replace")
    assert process.returncode == 0, text[-3000:]
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]


def test_refused_acl_changes_through_the_proxy_are_in_the_history(proxied: Proxied) -> None:
    created, deleted = unique("proxy-orders"), unique("proxy-payments")
    with proxied.wire() as bob:
        creation = bob.request(create_acls(created), client_id=CLIENT)
        create_correlation = bob.last_correlation_id
        deletion = bob.request(delete_acls(deleted), client_id=CLIENT)
        delete_correlation = bob.last_correlation_id
    assert [(r.error_code, r.error_message) for r in creation.results] == [
        (31, "Request CreateAcls v3 is not authorized.")]  # fmt: skip
    assert [(r.error_code, r.error_message) for r in deletion.filter_results] == [
        (31, "Request DeleteAcls v3 is not authorized.")]  # fmt: skip

    [event] = history_json(proxied.data_dir, "--resource", created)
    assert_refused_by(event, f"User:{BOB}", DOOR, f"{CLIENT}/{create_correlation}", "CLUSTER_AUTHORIZATION_FAILED",
                      "Request CreateAcls v3 is not authorized.")  # fmt: skip
    assert (event["data"]["action"], event["data"]["acl"]["resource_name"]) == ("acl.created", created)
    [event] = history_json(proxied.data_dir, "--resource", deleted)
    assert_refused_by(event, f"User:{BOB}", DOOR, f"{CLIENT}/{delete_correlation}", "CLUSTER_AUTHORIZATION_FAILED",
                      "Request DeleteAcls v3 is not authorized.")  # fmt: skip
    assert (event["data"]["action"], event["data"]["filter"]["pattern_type"]) == ("acl.deleted", "MATCH")
    table = history_table(proxied.data_dir, "--principal", f"User:{BOB}", "--action", "acl.")
    assert f"ALLOW User:bob READ from * on TOPIC:LITERAL:{created}" in table
    assert f"filter ANY User:bob ANY from <any> on TOPIC:MATCH:{deleted}" in table
    assert f"{DOOR} ({CLIENT}/{create_correlation})" in table


def test_refused_user_and_quota_changes_through_the_proxy_are_in_the_history(proxied: Proxied) -> None:
    victim, newcomer, quota_user = unique("victim"), unique("newcomer"), unique("quota-user")
    with proxied.wire() as bob:
        scram = bob.request(alter_scram(victim, newcomer), client_id=CLIENT)
        scram_correlation = bob.last_correlation_id
        quotas = bob.request(alter_quotas(quota_user), client_id=CLIENT)
        quota_correlation = bob.last_correlation_id
    assert {r.error_code for r in scram.results} == {31}
    assert [(e.error_code, e.error_message) for e in quotas.entries] == [(31, "Cluster authorization failed.")]

    [deleted] = history_json(proxied.data_dir, "--principal", f"User:{victim}")
    [upserted] = history_json(proxied.data_dir, "--principal", f"User:{newcomer}")
    for event in (deleted, upserted):
        assert_refused_by(
            event,
            f"User:{BOB}",
            DOOR,
            f"{CLIENT}/{scram_correlation}",
            "CLUSTER_AUTHORIZATION_FAILED",
            "Request AlterUserScramCredentials is not authorized.",
        )
    assert (deleted["data"]["action"], upserted["data"]["action"]) == ("scram.deleted", "scram.upserted")
    assert (upserted["data"]["mechanism"], upserted["data"]["iterations"]) == ("SCRAM-SHA-512", 8192)
    shown = json.dumps([deleted, upserted])
    assert SALT.hex() not in shown and SALTED_PASSWORD.hex() not in shown
    [quota] = history_json(proxied.data_dir, "--principal", f"User:{quota_user}")
    assert_refused_by(quota, f"User:{BOB}", DOOR, f"{CLIENT}/{quota_correlation}", "CLUSTER_AUTHORIZATION_FAILED",
                      "Cluster authorization failed.")  # fmt: skip
    assert quota["data"]["quota"] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": None}


def test_a_request_of_10k_refused_items_through_the_proxy_writes_the_bound(proxied: Proxied) -> None:
    prefix, client = unique("proxy-flood"), unique("flood-tool")  # a client id of its own: request ids are per client
    with proxied.wire() as bob:
        answer = bob.request(create_acls(*(f"{prefix}-{i}" for i in range(10_000))), client_id=client)
        correlation = bob.last_correlation_id
    assert len(answer.results) == 10_000 and {r.error_code for r in answer.results} == {31}
    events = [e for e in history_json(proxied.data_dir, "--principal", f"User:{BOB}")
              if e["data"]["actor"]["request_id"] == f"{client}/{correlation}"]  # fmt: skip
    assert len(events) == 21
    assert events[0]["data"]["summary"] == {"request": "CreateAcls", "items": 10_000, "recorded": 20,
                                            "not_recorded": 9_980}  # fmt: skip


def _until(found: Callable[[], list[dict[str, Any]]], timeout: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        got = found()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)  # the audit writer flushes about every second; bounded by the deadline


def test_refused_changes_through_the_proxy_reach_the_audit_file_and_topic(proxied: Proxied, kafka: KafkaBroker) -> None:
    name = unique("proxy-audited")
    with proxied.wire() as bob:
        bob.request(create_acls(name), client_id=CLIENT)

    def in_file() -> list[dict[str, Any]]:
        lines = proxied.audit_log.read_text().splitlines() if proxied.audit_log.exists() else []
        return [e for line in lines if (e := json.loads(line)).get("type") == "io.kafkaguard.management.v1"
                and e["data"].get("acl", {}).get("resource_name") == name]  # fmt: skip

    [in_the_file] = _until(in_file)
    assert (in_the_file["data"]["result"], in_the_file["data"]["actor"]["principal"]) == (
        "CLUSTER_AUTHORIZATION_FAILED", f"User:{BOB}")  # fmt: skip

    consumer = Consumer(sasl(kafka.bootstrap, ADMIN, ADMIN_PASSWORD, **{"group.id": uuid.uuid4().hex,
                                                                       "auto.offset.reset": "earliest"}))  # fmt: skip
    consumer.subscribe([proxied.audit_topic])
    seen: list[dict[str, Any]] = []

    def in_topic() -> list[dict[str, Any]]:
        message = consumer.poll(0.5)
        if message is not None:
            if message.error() is not None:
                raise KafkaException(message.error())
            value = message.value()
            assert value is not None
            seen.append(json.loads(value))
        return [e for e in seen if e.get("type") == "io.kafkaguard.management.v1"
                and e["data"].get("acl", {}).get("resource_name") == name]  # fmt: skip

    try:
        [in_the_topic] = _until(in_topic, timeout=90)
    finally:
        consumer.close()
    assert in_the_topic["data"] == in_the_file["data"]
    assert in_the_topic["subject"] == f"TOPIC:LITERAL:{name}"

"""Changes refused by authorization are in the management history, through every door of a real ``kafkaguard serve``
(issue 36, item 1): a user without ALTER sends CreateAcls, DeleteAcls, AlterUserScramCredentials, AlterClientQuotas,
CreateTopics and DeleteTopics over the Kafka wire, ``kafkaguard acls``/``apply``, and the console's REST API; each
refused item is in ``kafkaguard acls history`` (table and JSON, run as a subprocess) with the actor, its address,
the door, the request id and Kafka's error, and in the audit file. The bound holds (a request of 10,000 refused
items writes 20 events and a summary; a principal beyond its bucket is counted, logged once and exported), the
wire answers are the ones Kafka gives (unchanged), and no secret is in any of it. Item 6: the bootstrap admin's
creation is in the audit file, and ``users add`` records the address ``local``.

On a1dee34 every test here fails: nothing refused by authorization reached the history or the audit file, the
bootstrap admin's event was published before the audit trail connected (lost), and ``users add`` recorded the
host name.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest

from tests.cli.conftest import write_properties
from tests.server.refused_requests import (
    KAFKAGUARD,
    SALT,
    SALTED_PASSWORD,
    alter_quotas,
    alter_scram,
    assert_refused_by,
    create_acls,
    create_topics,
    delete_acls,
    delete_topics,
    environment,
    grant_cluster_describe,
    history_json,
    history_table,
    unique,
)
from tests.server.test_cli_serve import free_port, wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-secret", "bob": "bob-secret", "carol": "carol-secret", "dave": "dave-secret"}
CLIENT = "mallory-tool"
KAFKA_DOOR = "kafka:SASL_PLAINTEXT"
ACLS_DENIED = ("CLUSTER_AUTHORIZATION_FAILED", "Request CreateAcls v3 is not authorized.")
SCHEMA = Path(__file__).parents[2] / "docs" / "audit-event.schema.json"


@dataclass
class Served:
    data_dir: Path
    port: int
    http_port: int
    audit_log: Path
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wire(self, user: str) -> Wire:
        wire = Wire(self.address, timeout=30)
        wire.login(user, USERS[user])
        return wire

    def rest(self, user: str) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.http_port}", auth=(user, USERS[user]), timeout=30)


def add_users(data_dir: Path, *users: str) -> None:
    for user in users:
        subprocess.run([str(KAFKAGUARD), "users", "add", user, "--password", USERS[user], "--data-dir", str(data_dir)],
                       capture_output=True, timeout=60, env=environment(), check=True)  # fmt: skip


def start_serve(data_dir: Path, **settings: str) -> Served:
    """``kafkaguard serve`` with the console, the audit file, super user ``User:admin`` created at start by the
    bootstrap settings (``admin_user``/``admin_password``), and ``settings`` as KAFKAGUARD_* variables."""
    port, http_port = free_port(), free_port()
    audit_log = data_dir / "audit.log"
    env = environment(KAFKAGUARD_ADMIN_USER="admin", KAFKAGUARD_ADMIN_PASSWORD=USERS["admin"],
                      **{f"KAFKAGUARD_{key.upper()}": value for key, value in settings.items()})  # fmt: skip
    process = subprocess.Popen(
        [str(KAFKAGUARD), "serve", "--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}",
         "--super-users", "User:admin", "--audit-log", str(audit_log), "--http-listener", f"127.0.0.1:{http_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    wait_until_listening(process, port)
    wait_until_listening(process, http_port)
    return Served(data_dir, port, http_port, audit_log, process)


def stop(served: Served) -> str:
    served.process.terminate()
    _out, err = served.process.communicate(timeout=30)
    text = err.decode(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    return text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("refused") / "data"
    add_users(data_dir, "bob", "carol", "dave")
    handle = start_serve(data_dir)
    try:
        with handle.wire("admin") as admin:  # dave may describe the cluster (apply reads the ACLs), never alter
            answer = admin.request(grant_cluster_describe("User:dave"))
            assert answer.results[0].error_code == 0
        yield handle
    finally:
        err = stop(handle)
    assert " ERROR " not in err, err[-3000:]


def refused_events(served: Served, resource: str, *options: str) -> list[dict[str, Any]]:
    """The events naming ``resource``, oldest first."""
    return list(reversed(history_json(served.data_dir, "--resource", resource, *options)))


# ---------------------------------------------------------------------------------------------------- Kafka wire


def test_a_refused_create_acls_is_in_the_history_table_and_json(served: Served) -> None:
    first, second = unique("pii-orders"), unique("pii-payments")
    with served.wire("bob") as bob:
        answer = bob.request(create_acls(first, second), client_id=CLIENT)
        correlation = bob.last_correlation_id
    assert [(r.error_code, r.error_message) for r in answer.results] == [(31, ACLS_DENIED[1])] * 2  # as before

    for name in (first, second):
        [event] = refused_events(served, name)
        assert event["subject"] == f"TOPIC:LITERAL:{name}"
        assert_refused_by(event, "User:bob", KAFKA_DOOR, f"{CLIENT}/{correlation}", *ACLS_DENIED)
        assert event["data"]["action"] == "acl.created"
        assert event["data"]["acl"] == {"principal": "User:bob", "host": "*", "resource_type": "TOPIC",
                                        "resource_name": name, "pattern_type": "LITERAL", "operation": "READ",
                                        "permission_type": "ALLOW", "id": None}  # fmt: skip
    table = history_table(served.data_dir, "--resource", first)
    assert f"ALLOW User:bob READ from * on TOPIC:LITERAL:{first}" in table
    assert "CLUSTER_AUTHORIZATION_FAILED: Request CreateAcls v3 is not authorized." in table
    assert f"{KAFKA_DOOR} ({CLIENT}/{correlation})" in table
    assert "127.0.0.1" in table


def test_a_refused_delete_acls_is_in_the_history_with_its_filter(served: Served) -> None:
    name = unique("pii-orders")
    with served.wire("bob") as bob:
        answer = bob.request(delete_acls(name), client_id=CLIENT)
        correlation = bob.last_correlation_id
    [result] = answer.filter_results
    assert (result.error_code, result.error_message, result.matching_acls) == (
        31, "Request DeleteAcls v3 is not authorized.", ())  # fmt: skip

    [event] = refused_events(served, name)
    assert_refused_by(event, "User:bob", KAFKA_DOOR, f"{CLIENT}/{correlation}", "CLUSTER_AUTHORIZATION_FAILED",
                      "Request DeleteAcls v3 is not authorized.")  # fmt: skip
    assert event["data"]["action"] == "acl.deleted"
    assert event["data"]["filter"] == {"principal": "User:bob", "host": None, "resource_type": "TOPIC",
                                       "resource_name": name, "pattern_type": "MATCH", "operation": "ANY",
                                       "permission_type": "ANY"}  # fmt: skip
    assert "acl" not in event["data"]
    table = history_table(served.data_dir, "--resource", name)
    assert f"filter ANY User:bob ANY from <any> on TOPIC:MATCH:{name}" in table


def test_a_refused_scram_alteration_is_in_the_history_without_a_secret(served: Served) -> None:
    victim, newcomer = unique("victim"), unique("newcomer")
    with served.wire("bob") as bob:
        answer = bob.request(alter_scram(victim, newcomer), client_id=CLIENT)
        correlation = bob.last_correlation_id
    message = "Request AlterUserScramCredentials is not authorized."
    assert sorted((r.user, r.error_code, r.error_message) for r in answer.results) == sorted(
        [(victim, 31, message), (newcomer, 31, message)])  # fmt: skip

    [deleted] = history_json(served.data_dir, "--principal", f"User:{victim}")
    [upserted] = history_json(served.data_dir, "--principal", f"User:{newcomer}")
    for event in (deleted, upserted):
        assert_refused_by(event, "User:bob", KAFKA_DOOR, f"{CLIENT}/{correlation}", "CLUSTER_AUTHORIZATION_FAILED",
                          message)  # fmt: skip
    assert {k: v for k, v in deleted["data"].items() if k in ("action", "user", "mechanism", "iterations")} == {
        "action": "scram.deleted", "user": victim, "mechanism": "SCRAM-SHA-256"}  # fmt: skip
    assert {k: v for k, v in upserted["data"].items() if k in ("action", "user", "mechanism", "iterations")} == {
        "action": "scram.upserted", "user": newcomer, "mechanism": "SCRAM-SHA-512", "iterations": 8192}  # fmt: skip
    shown = json.dumps([deleted, upserted]) + history_table(served.data_dir, "--principal", f"User:{newcomer}")
    for secret in (SALT, SALTED_PASSWORD):
        assert secret.hex() not in shown
        assert repr(secret) not in shown
    assert f"User:{newcomer} SCRAM-SHA-512 (8192 iterations)" in shown


def test_a_refused_quota_alteration_is_in_the_history_per_entity(served: Served) -> None:
    user = unique("quota-user")
    with served.wire("bob") as bob:
        answer = bob.request(alter_quotas(user), client_id=CLIENT)
        correlation = bob.last_correlation_id
    [entry] = answer.entries
    assert (entry.error_code, entry.error_message) == (31, "Cluster authorization failed.")

    [event] = history_json(served.data_dir, "--principal", f"User:{user}")
    assert_refused_by(event, "User:bob", KAFKA_DOOR, f"{CLIENT}/{correlation}", "CLUSTER_AUTHORIZATION_FAILED",
                      "Cluster authorization failed.")  # fmt: skip
    assert event["data"]["action"] == "quota.altered"
    assert event["data"]["entity"] == {"user": user}
    assert event["data"]["quota"] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": None}


def test_refused_topic_creations_and_deletions_are_in_the_history_per_topic(served: Served) -> None:
    wanted, kept = unique("new-topic"), unique("kept-topic")
    with served.wire("admin") as admin:
        [made] = admin.request(create_topics(kept)).topics
        assert made.error_code == 0
    with served.wire("bob") as bob:
        created = bob.request(create_topics(wanted), client_id=CLIENT)
        create_correlation = bob.last_correlation_id
        deleted = bob.request(delete_topics(kept, made.topic_id), client_id=CLIENT)
        delete_correlation = bob.last_correlation_id
    assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [(wanted, 29, "Authorization failed.")]
    assert sorted((str(r.name), r.error_code) for r in deleted.responses) == [("None", 29), (kept, 29)]

    [creation] = refused_events(served, wanted)
    assert_refused_by(creation, "User:bob", KAFKA_DOOR, f"{CLIENT}/{create_correlation}",
                      "TOPIC_AUTHORIZATION_FAILED", "Authorization failed.")  # fmt: skip
    assert (creation["data"]["action"], creation["data"]["topic"]) == ("topic.created", wanted)
    by_name, by_id = refused_events(served, kept, "--action", "topic.deleted")
    for event in (by_name, by_id):
        assert_refused_by(event, "User:bob", KAFKA_DOOR, f"{CLIENT}/{delete_correlation}",
                          "TOPIC_AUTHORIZATION_FAILED", "Topic authorization failed.")  # fmt: skip
        assert (event["data"]["action"], event["data"]["topic"]) == ("topic.deleted", kept)
    assert "topic_id" not in by_name["data"]
    assert by_id["data"]["topic_id"] == str(made.topic_id)  # the id it named, and the topic it stands for


# ------------------------------------------------------------------------------------------- CLI, apply, REST


def test_the_cli_and_apply_doors_are_in_the_history(served: Served, tmp_path: Path) -> None:
    """Both read the ACLs first (kafka-acls.sh does): dave may describe the cluster, not alter it."""
    cli_topic, apply_topic = unique("cli-topic"), unique("apply-topic")
    dave = write_properties(tmp_path / "dave.properties", "dave", USERS["dave"])
    done = subprocess.run(
        [str(KAFKAGUARD), "acls", "--bootstrap-server", served.bootstrap, "--command-config", str(dave), "--add",
         "--allow-principal", "User:bob", "--operation", "Read", "--topic", cli_topic],
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in done.stdout + done.stderr
    [event] = refused_events(served, cli_topic)
    # the version the CLI's client negotiated names itself in Kafka's message
    message = event["data"]["error_message"]
    assert re.fullmatch(r"Request CreateAcls v\d is not authorized\.", message)
    assert_refused_by(event, "User:dave", KAFKA_DOOR, event["data"]["actor"]["request_id"],
                      "CLUSTER_AUTHORIZATION_FAILED", message)  # fmt: skip
    assert re.fullmatch(r"kafkaguard-acls/\d+", event["data"]["actor"]["request_id"])

    acl_file = tmp_path / "acls.yaml"
    acl_file.write_text(
        f"principals:\n  User:bob:\n    acls:\n      - topic: {apply_topic}\n        operations: [Read]\n"
    )
    done = subprocess.run([str(KAFKAGUARD), "apply", "--bootstrap-server", served.bootstrap, "--command-config",
                           str(dave), "-f", str(acl_file)], capture_output=True, text=True, timeout=60,
                          env=environment(), check=False)  # fmt: skip
    assert done.returncode != 0
    [event] = refused_events(served, apply_topic)
    assert_refused_by(event, "User:dave", KAFKA_DOOR, event["data"]["actor"]["request_id"],
                      "CLUSTER_AUTHORIZATION_FAILED", message)  # fmt: skip
    assert re.fullmatch(r"kafkaguard-apply/\d+", event["data"]["actor"]["request_id"])
    assert event["data"]["acl"]["principal"] == "User:bob"


def test_the_consoles_403_on_a_change_is_in_the_history(served: Served) -> None:
    topic, user, group = unique("rest-topic"), unique("rest-user"), unique("rest-group")
    binding = {"resource_type": "TOPIC", "resource_name": topic, "principal": "User:bob", "operation": "READ",
               "permission_type": "ALLOW"}  # fmt: skip
    password = "bob-wants-this-password"  # noqa: S105 - what a refused request carried
    with served.rest("bob") as rest:
        answers = [
            rest.post("/api/acls", json=binding),
            rest.request("DELETE", "/api/acls", json={"resource_name": topic, "principal": "User:bob"}),
            rest.put(f"/api/users/{user}", json={"mechanism": "SCRAM-SHA-512", "password": password}),
            rest.post(f"/api/groups/{group}/members", json={"members": ["User:bob", "User:carol"]}),
            rest.delete(f"/api/users/{user}", params={"mechanism": "SCRAM-SHA-256"}),
            rest.delete(f"/api/groups/{group}/members/User:dave"),
            rest.delete(f"/api/groups/{group}"),  # an empty group: "every member" is what it named
            rest.get("/api/history"),  # a read, refused too: not a change, so no event
        ]
    assert [(a.status_code, a.json()) for a in answers] == [(403, {"detail": "not authorized"})] * 8

    created, deleted = refused_events(served, topic)
    request_ids = {created["data"]["actor"]["request_id"], deleted["data"]["actor"]["request_id"]}
    assert len(request_ids) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", r) for r in request_ids)
    assert_refused_by(created, "User:bob", "rest", created["data"]["actor"]["request_id"],
                      "CLUSTER_AUTHORIZATION_FAILED", "Request CreateAcls is not authorized.")  # fmt: skip
    assert created["data"]["acl"] == {"principal": "User:bob", "host": "*", "resource_type": "TOPIC",
                                      "resource_name": topic, "pattern_type": "LITERAL", "operation": "READ",
                                      "permission_type": "ALLOW", "id": None}  # the schema's defaults  # fmt: skip
    assert (deleted["data"]["action"], deleted["data"]["filter"]["resource_name"]) == ("acl.deleted", topic)
    deleted_user, upserted = history_json(served.data_dir, "--principal", f"User:{user}")
    assert (upserted["data"]["action"], upserted["data"]["mechanism"], upserted["data"]["iterations"]) == (
        "scram.upserted", "SCRAM-SHA-512", 8192)  # fmt: skip
    assert (deleted_user["data"]["action"], deleted_user["data"]["mechanism"]) == ("scram.deleted", "SCRAM-SHA-256")
    assert upserted["data"]["actor"]["interface"] == deleted_user["data"]["actor"]["interface"] == "rest"
    members = [e["data"] for e in history_json(served.data_dir, "--action", "group.") if e["data"]["group"] == group]
    assert sorted((m["action"], m["member"], m["result"]) for m in members) == [
        ("group.member_added", "User:bob", "CLUSTER_AUTHORIZATION_FAILED"),
        ("group.member_added", "User:carol", "CLUSTER_AUTHORIZATION_FAILED"),
        ("group.member_removed", "<every>", "CLUSTER_AUTHORIZATION_FAILED"),
        ("group.member_removed", "User:dave", "CLUSTER_AUTHORIZATION_FAILED"),
    ]
    assert {m["actor"]["principal"] for m in members} == {"User:bob"}
    everything = json.dumps(history_json(served.data_dir)) + history_table(served.data_dir)
    assert password not in everything
    # the refused read wrote nothing: every event bob made through the console is one of the seven changes above
    rest_events = [e for e in history_json(served.data_dir, "--principal", "User:bob")
                   if e["data"]["actor"]["interface"] == "rest"]  # fmt: skip
    assert len(rest_events) == 8


def test_a_request_of_10k_refused_items_writes_the_bound_and_a_summary(served: Served) -> None:
    prefix, client = unique("flood"), unique("flood-tool")  # a client id of its own: request ids are per client
    with served.wire("carol") as carol:
        answer = carol.request(create_acls(*(f"{prefix}-{i}" for i in range(10_000))), client_id=client)
        correlation = carol.last_correlation_id
    assert len(answer.results) == 10_000 and {r.error_code for r in answer.results} == {31}

    events = [e for e in history_json(served.data_dir, "--principal", "User:carol")
              if e["data"]["actor"]["request_id"] == f"{client}/{correlation}"]  # fmt: skip
    assert len(events) == 21  # the first 20 items, then one summary
    summary, *items = events  # newest first: the summary was written last
    assert [e["data"]["acl"]["resource_name"] for e in reversed(items)] == [f"{prefix}-{i}" for i in range(20)]
    assert summary["subject"] == "CreateAcls"
    assert summary["data"]["summary"] == {"request": "CreateAcls", "items": 10_000, "recorded": 20,
                                          "not_recorded": 9_980}  # fmt: skip
    assert (summary["data"]["action"], summary["data"]["result"]) == ("acl.created", "CLUSTER_AUTHORIZATION_FAILED")
    table = history_table(served.data_dir, "--principal", "User:carol", "--limit", "1")
    assert "9980 more refused item(s) of this CreateAcls request (10000 in all), not recorded one by one" in table


def test_a_refused_name_cannot_write_to_the_terminal_of_whoever_reads_the_history(served: Served) -> None:
    """A refused request's names are any caller's: an escape sequence or Rich markup in one is shown, not run."""
    marker = unique("esc")
    name = f"{marker}\x1b]52;c;cHduZWQ=\x07\x1b[2J[bold red]fake[/bold red]"
    with served.wire("bob") as bob:
        bob.request(create_acls(name), client_id=CLIENT)
    [event] = [e for e in history_json(served.data_dir, "--principal", "User:bob") if marker in e["subject"]]
    assert event["data"]["acl"]["resource_name"] == name  # the JSON has it exactly, escaped by JSON itself
    table = history_table(served.data_dir, "--principal", "User:bob", "--limit", "1")
    assert "\x1b" not in table and "\x07" not in table
    assert f"{marker}\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J[bold red]fake[/bold red]" in table


# ---------------------------------------------------------------------------------------- the audit file, item 6


def audit_events(served: Served, predicate: Any, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The management events of the audit file that ``predicate`` accepts, waiting for the writer's flush."""
    deadline = time.monotonic() + timeout
    while True:
        lines = served.audit_log.read_text().splitlines() if served.audit_log.exists() else []
        found = [event for line in lines if (event := json.loads(line)).get("type") == "io.kafkaguard.management.v1"
                 and predicate(event["data"])]  # fmt: skip
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)  # the audit writer flushes every second or so; bounded by the deadline


def test_the_bootstrap_admin_and_refused_changes_reach_the_audit_file(served: Served) -> None:
    created = audit_events(served, lambda d: d["action"] == "scram.upserted" and d.get("user") == "admin")
    assert {e["data"]["mechanism"] for e in created} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    for event in created:
        assert event["data"]["actor"] == {"principal": "User:kafkaguard", "address": None, "interface": "internal",
                                          "request_id": None}  # fmt: skip
    name = unique("audited")
    with served.wire("bob") as bob:
        bob.request(create_acls(name), client_id=CLIENT)
    [refused] = audit_events(served, lambda d: d.get("acl", {}).get("resource_name") == name)
    assert refused["subject"] == f"TOPIC:LITERAL:{name}"
    assert (refused["data"]["result"], refused["data"]["actor"]["principal"]) == (
        "CLUSTER_AUTHORIZATION_FAILED", "User:bob")  # fmt: skip
    # every event of the file, those of the tests before this one included (filters, summaries, <every> …), is one
    # the published schema admits
    check = jsonschema_rs.Draft202012Validator(json.loads(SCHEMA.read_text("utf-8")))
    events = [json.loads(line) for line in served.audit_log.read_text().splitlines()]
    assert {e["data"].get("action") for e in events if e["type"] == "io.kafkaguard.management.v1"} >= {
        "acl.created", "acl.deleted", "scram.upserted", "quota.altered", "topic.created", "topic.deleted"}  # fmt: skip
    assert [error.message for event in events for error in check.iter_errors(event)] == []


def test_users_add_records_the_address_local(served: Served) -> None:
    events = history_json(served.data_dir, "--principal", "User:dave", "--action", "scram.")
    assert {e["data"]["mechanism"] for e in events} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    for event in events:
        actor = event["data"]["actor"]
        assert (actor["address"], actor["interface"]) == ("local", "cli")
        assert re.fullmatch(r"User:.+", actor["principal"]) and re.fullmatch(r"[0-9a-f]{32}", actor["request_id"])
    assert "local" in history_table(served.data_dir, "--principal", "User:dave", "--action", "scram.")


# ---------------------------------------------------------------------------------------- the principal's rate


def test_refused_changes_beyond_the_principals_rate_are_counted_logged_and_exported(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    add_users(data_dir, "bob")
    # 30 events at once, and (practically) none back during the test
    handle = start_serve(data_dir, refused_changes_burst="30", refused_changes_per_minute="0.001")
    try:
        correlations = []
        with handle.wire("bob") as bob:
            for round_ in range(3):
                answer = bob.request(create_acls(*(f"rate-{round_}-{i}" for i in range(10_000))), client_id=CLIENT)
                assert {r.error_code for r in answer.results} == {31}  # answered alike, recorded or not
                correlations.append(bob.last_correlation_id)
        with httpx.Client(base_url=f"http://127.0.0.1:{handle.http_port}", timeout=30) as rest:
            metrics = rest.get("/metrics").text
    finally:
        err = stop(handle)
    events = history_json(data_dir, "--principal", "User:bob", "--action", "acl.")
    per_request = [[e for e in events if e["data"]["actor"]["request_id"] == f"{CLIENT}/{c}"] for c in correlations]
    assert [len(e) for e in per_request] == [21, 9, 0]  # 20 + summary; the 9 tokens left: 8 + summary; none
    assert per_request[1][0]["data"]["summary"] == {"request": "CreateAcls", "items": 10_000, "recorded": 8,
                                                    "not_recorded": 9_992}  # fmt: skip
    for outcome, count in (("recorded", 28), ("summarized", 9_980 + 9_992), ("rate_limited", 10_000)):
        assert f'kafkaguard_refused_changes_total{{outcome="{outcome}"}} {count:.1f}' in metrics
    warnings = [line for line in err.splitlines() if "User:bob's refused changes are above" in line]
    assert len(warnings) == 1, err[-3000:]
    assert "refused_changes_burst 30" in warnings[0] and "10000 refused item(s) of its CreateAcls" in warnings[0]

"""``GET /api/denials`` against a real ``serve --http-listener`` (the Kafka server and the console on one
``Services``, as ``tests/console/conftest.py`` starts them) writing a real audit log: a denial made by a real Kafka
client (kafka-python's CreateTopics as a user without ACLs), a shadow flip of the candidate ACL file (``shadow_acls``),
and a permissive would-be denial queued on the server's own audit trail (the record a permissive proxy queues; the
proxy's side is ``tests/proxy/test_permissive.py``). Then the bounds: a log bigger than the tail window answers with
its newest records having read no more than the window; the rotated backup is read on; the login and ALTER on the
cluster are needed; the path is never the request's; a node without ``audit_log`` says so."""

from __future__ import annotations

import functools
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from kafkaguard.audit.records.cloudevents import AUTHORIZATION, envelope, to_json
from kafkaguard.audit.records.recent import CHUNK_BYTES, TAIL_BYTES
from kafkaguard.audit.records.record import AuditRecord, to_dict
from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from kafkaguard.server.app import KafkaServer
from tests.console.conftest import NOBODY, NOBODY_PASSWORD, READER, ConsoleHandle, start_console
from tests.wire import Wire, metadata

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    import kafka.errors as Errors  # type: ignore[import-untyped]
    from kafka.admin import KafkaAdminClient, NewTopic  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

CANDIDATE = """\
principals:
  User:carol:
    acls:
      - topic: pii
        operations: [Describe]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    base = tmp_path_factory.mktemp("denials")
    candidate = base / "candidate.yaml"
    candidate.write_text(CANDIDATE)
    handle = start_console(
        base / "data",
        with_kafka=True,
        server_type=functools.partial(KafkaServer, shadow_loader=load_acl_file),
        audit_log=base / "audit.log",
        audit_mode="denied",
        shadow_acls=candidate,
    )
    handle.add_user("carol", "carol-pw")
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"logged errors: {handle.errors}"


def listed(handle: ConsoleHandle, until: Callable[[list[dict[str, Any]]], bool], **params: Any) -> dict[str, Any]:
    """``/api/denials`` as the admin, asked again until ``until`` holds for its rows (the trail writes every 0.2 s)."""
    deadline = time.monotonic() + 15
    with handle.client() as admin:
        while True:
            answer = admin.get("/api/denials", params=params)
            assert answer.status_code == 200, answer.text
            body: dict[str, Any] = answer.json()
            if until(body["denials"]) or time.monotonic() > deadline:
                return body
            time.sleep(0.1)


def deny(served: ConsoleHandle, topic: str) -> None:
    """A CreateTopics of ``topic`` by a user without ACLs, through kafka-python: refused, and audited DENIED (the
    browser test's denials too)."""
    client = KafkaAdminClient(
        bootstrap_servers=served.kafka_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=NOBODY,
        sasl_plain_password=NOBODY_PASSWORD,
        request_timeout_ms=10_000,
        bootstrap_timeout_ms=10_000,
    )
    try:
        with pytest.raises(Errors.TopicAuthorizationFailedError):
            client.create_topics([NewTopic(topic, 1, 1)])
    finally:
        client.close()


def test_a_kafka_clients_denied_request_is_listed_with_its_rule(served: ConsoleHandle) -> None:
    topic = f"denied-{uuid.uuid4().hex[:8]}"
    deny(served, topic)
    body = listed(served, lambda rows: any(r["resource_name"] == topic for r in rows))
    assert body["configured"] is True and body["complete"] is True and body["message"] is None
    (row,) = [r for r in body["denials"] if r["resource_name"] == topic]
    assert row == {
        "kind": "denied",
        "time": row["time"],
        "last_time": row["time"],
        "count": 1,
        "principal": f"User:{NOBODY}",
        "host": "127.0.0.1",
        "api": "CreateTopics",
        "operation": "CREATE",
        "resource_type": "TOPIC",
        "resource_name": topic,
        "decision": "DENIED",
        "rule": "DefaultDeny",
        "shadow_decision": None,
        "shadow_rule": None,
        "broker_error": None,
        "explanation": None,
    }
    assert abs(datetime.fromisoformat(row["time"]) - datetime.now(UTC)) < timedelta(minutes=5)
    # newest first: the rows' last times never increase down the list
    times = [r["last_time"] for r in body["denials"]]
    assert times == sorted(times, reverse=True)
    # the principal filter: nobody's rows only, and none for a principal that was never denied
    mine = listed(served, lambda _rows: True, principal=f"User:{NOBODY}")["denials"]
    assert mine and {r["principal"] for r in mine} == {f"User:{NOBODY}"}
    others = listed(served, lambda _rows: True, principal="User:admin")
    assert others["denials"] == [] and others["message"] == "No denial in the audit log for User:admin."


def test_a_shadow_flip_is_listed_with_both_rules(served: ConsoleHandle) -> None:
    host, port = served.kafka_bootstrap.rsplit(":", 1)
    with Wire((host, int(port))) as wire:
        wire.login("carol", "carol-pw")
        answer = metadata(wire, ["pii"], allow_auto_topic_creation=False)
    assert answer.topics[0].error_code.name == "topic_authorization_failed"  # the active set denies
    body = listed(served, lambda rows: any(r["kind"] == "shadow" for r in rows), principal="User:carol")
    shadow = [r for r in body["denials"] if r["kind"] == "shadow"]
    assert shadow, body
    row = shadow[0]
    assert (row["resource_type"], row["resource_name"], row["operation"], row["api"]) == (
        "TOPIC", "pii", "DESCRIBE", "Metadata"
    )  # fmt: skip
    assert (row["decision"], row["rule"], row["shadow_decision"]) == ("DENIED", "DefaultDeny", "ALLOWED")
    assert row["shadow_rule"] is not None and row["shadow_rule"].startswith("MatchingAcl(")
    # the active set's own denial of the same request is listed too, as a plain denial
    assert any(r["kind"] == "denied" and r["resource_name"] == "pii" for r in body["denials"])


def test_a_permissive_would_be_denial_is_listed_as_such(served: ConsoleHandle) -> None:
    name = f"forwarded-{uuid.uuid4().hex[:8]}"
    record = AuditRecord(
        time=datetime.now(UTC),
        principal="User:dave",
        host="10.1.2.3",
        api="Produce",
        operation=AclOperation.WRITE,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        decision=AuthorizationResult.DENIED,
        rule="DefaultDeny",
        enforced=False,
    )
    assert served.both is not None
    trail = served.both.server.audit  # the server's own trail, writing the audit_log file
    assert trail is not None
    served.loop.call_soon_threadsafe(trail.record, record)
    body = listed(served, lambda rows: any(r["resource_name"] == name for r in rows), principal="User:dave")
    (row,) = body["denials"]
    assert (row["kind"], row["decision"], row["operation"], row["host"]) == (
        "permissive",
        "DENIED",
        "WRITE",
        "10.1.2.3",
    )


def test_the_login_and_alter_on_the_cluster_are_needed_and_the_request_names_no_file(served: ConsoleHandle) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as anonymous:
        refused = anonymous.get("/api/denials")
    assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
    assert "denials" not in refused.json()
    with served.client(READER) as reader:  # DESCRIBE on the cluster reads ACLs, not the audit log
        forbidden = reader.get("/api/denials")
    assert (forbidden.status_code, forbidden.json()) == (403, {"detail": "not authorized"})
    with served.client() as admin:
        for params in ({"path": "/etc/passwd"}, {"limit": 501}, {"limit": 0}):
            answer = admin.get("/api/denials", params=params)
            assert answer.status_code == 422, (params, answer.text)
        assert admin.get("/api/denials", params={"limit": 500}).status_code == 200


# ------------------------------------------------------------------------------------------ the file's bounds


@pytest.fixture(scope="module")
def on_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleHandle]:
    """The console alone over an audit log the tests write themselves (no server appends to it)."""
    base = tmp_path_factory.mktemp("tail")
    handle = start_console(base / "data", audit_log=base / "audit.log")
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"logged errors: {handle.errors}"


def line(name: str, decision: str, at: datetime, principal: str = "User:erin") -> str:
    record = AuditRecord(
        time=at,
        principal=principal,
        host="10.0.0.9",
        api="Fetch",
        operation=AclOperation.READ,
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        decision=AuthorizationResult(decision),
        rule="DefaultDeny" if decision == "DENIED" else "MatchingAcl(acl=…, id=a1)",
    )
    return to_json(envelope(AUTHORIZATION, f"TOPIC:{name}", to_dict(record), source="kafkaguard://t", time=at)) + "\n"


def test_a_log_bigger_than_the_window_answers_from_its_end(on_file: ConsoleHandle) -> None:
    path = on_file.services.sections.audit.log
    assert path is not None
    start = datetime(2026, 1, 1, tzinfo=UTC)
    allowed = line("busy", "ALLOWED", start)
    fillers = (TAIL_BYTES * 2) // len(allowed) + 1
    with path.open("w", encoding="utf-8") as out:
        out.write(line("ancient", "DENIED", start))
        out.write(allowed * fillers)
        for i in range(5):
            out.write(line(f"newest-{i}", "DENIED", start + timedelta(hours=1, seconds=i)))
        out.write(allowed * 10)
    assert path.stat().st_size > 2 * TAIL_BYTES
    with on_file.client() as admin:
        body = admin.get("/api/denials", params={"limit": 500}).json()
        assert [r["resource_name"] for r in body["denials"]] == [f"newest-{i}" for i in reversed(range(5))]
        assert body["complete"] is False and TAIL_BYTES <= body["read_bytes"] <= TAIL_BYTES + CHUNK_BYTES
        assert "Only the last 4 MiB of the audit log were read" in body["message"]
        # a small limit stops at the newest rows: a chunk or two read, not the window
        few = admin.get("/api/denials", params={"limit": 2}).json()
        assert [r["resource_name"] for r in few["denials"]] == ["newest-4", "newest-3"]
        assert few["read_bytes"] <= 2 * CHUNK_BYTES and few["complete"] is False


def test_the_rotated_backup_is_read_on_and_a_partial_last_line_skipped(on_file: ConsoleHandle) -> None:
    path = on_file.services.sections.audit.log
    assert path is not None
    start = datetime(2026, 2, 1, tzinfo=UTC)
    path.with_name(path.name + ".1").write_text(line("rotated", "DENIED", start), encoding="utf-8")
    unfinished = line("unfinished", "DENIED", start + timedelta(seconds=2))[:-40]
    path.write_text(line("current", "DENIED", start + timedelta(seconds=1)) + unfinished, encoding="utf-8")
    with on_file.client() as admin:
        body = admin.get("/api/denials").json()
    assert [r["resource_name"] for r in body["denials"]] == ["current", "rotated"]
    assert body["complete"] is True and body["message"] is None


def test_a_missing_log_is_an_empty_answer(on_file: ConsoleHandle) -> None:
    path = on_file.services.sections.audit.log
    assert path is not None
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".1").unlink(missing_ok=True)
    with on_file.client() as admin:
        body = admin.get("/api/denials").json()
    assert (body["configured"], body["denials"], body["message"]) == (True, [], "No denial in the audit log.")


def test_a_log_that_cannot_be_read_is_a_503_naming_no_path(on_file: ConsoleHandle) -> None:
    path = on_file.services.sections.audit.log
    assert path is not None
    path.unlink(missing_ok=True)
    path.mkdir()  # open() fails as on a file the process may not read (the tests run as root: no chmod)
    try:
        with on_file.client() as admin:
            answer = admin.get("/api/denials")
    finally:
        path.rmdir()
    assert answer.status_code == 503
    assert answer.json()["detail"].startswith("cannot read the audit log: ") and str(path) not in answer.text


def test_without_an_audit_log_the_answer_says_so(tmp_path: Path) -> None:
    handle = start_console(tmp_path / "data")
    try:
        with handle.client() as admin:
            answer = admin.get("/api/denials")
    finally:
        handle.stop()
    assert answer.status_code == 200
    body = answer.json()
    assert body["configured"] is False and body["denials"] == []
    assert body["message"].startswith("No audit log file is configured on this node (audit_log)")

"""The four jobs end to end through ``kafkaguard audit …`` (Typer's CliRunner) on the shared local session."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard import AclId, Action, RequestContext, ResourcePattern, StandardAuthorizer, StoredAcl
from kafkaguard.audit.records import AuditRecord, to_json_line
from kafkaguard.cli.main import app
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from kafkaguard.model.acl_json import acls_from_document
from tests.audit.records.kafka_lines import kafka_line
from tests.audit.records.test_record import T

pytestmark = pytest.mark.spark

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
#: (principal, operation, topic, logged decision, requests)
TRAFFIC = [
    ("User:alice", "READ", "orders-eu", ALLOWED, 100),
    ("User:alice", "WRITE", "orders-eu", ALLOWED, 10),
    ("User:bob", "READ", "orders-us", ALLOWED, 50),
    ("User:bob", "READ", "payments", DENIED, 20),
    ("User:carol", "DESCRIBE", "orders-eu", ALLOWED, 5),
    ("User:carol", "READ", "logs", DENIED, 3),
]


def acl(acl_id: str, principal: str, name: str, pattern: str, op: str, perm: str = "ALLOW") -> dict[str, str]:
    return {
        "id": acl_id,
        "principal": principal,
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": name,
        "pattern_type": pattern,
        "operation": op,
        "permission_type": perm,
    }


CURRENT = [
    acl("c1", "User:alice", "orders", "PREFIXED", "ALL"),
    acl("c2", "User:*", "orders-", "PREFIXED", "READ"),
    acl("c3", "User:bob", "payments", "LITERAL", "READ", "DENY"),
    acl("c4", "User:dave", "old-topic", "LITERAL", "READ"),
    acl("c5", "User:alice", "orders-eu", "LITERAL", "READ"),
    acl("c6", "User:bob", "payments", "LITERAL", "READ"),
]
PROPOSED = [a for a in CURRENT if a["id"] != "c2"] + [
    acl("p1", "User:*", "orders-eu", "LITERAL", "READ"),
    acl("p2", "User:carol", "logs", "LITERAL", "READ"),
]


def records() -> list[AuditRecord]:
    out = []
    for i, (principal, op, topic, decision, n) in enumerate(TRAFFIC):
        for k in range(n):
            out.append(
                AuditRecord(
                    time=T + timedelta(minutes=10 * k + i),
                    principal=principal,
                    host="10.0.0.1",
                    api="Fetch",
                    operation=AclOperation[op],
                    resource_type=ResourceType.TOPIC,
                    resource_name=topic,
                    decision=decision,
                    rule=None,
                )
            )
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit")
    lines = [to_json_line(r) for r in records()]
    (root / "log.jsonl").write_text("\n".join(lines[:100]) + "\nnot json at all\n")
    with gzip.open(root / "log2.jsonl.gz", "wt") as f:
        f.write("\n".join(lines[100:]) + "\n{}\n")
    (root / "kafka").mkdir()
    with gzip.open(root / "kafka" / "kafka-authorizer.log.gz", "wt") as f:
        f.write("\n".join(kafka_line(r, "kraft") for r in records()) + "\n[2025-03-14 00:00:00,000] INFO noise\n")
    (root / "current.json").write_text(json.dumps({"acls": CURRENT}))
    (root / "proposed.json").write_text(json.dumps({"acls": PROPOSED}))
    return root


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, ["audit", *args])
    assert result.exit_code == 0, result.output
    return result.output


def logs(files: Path) -> list[str]:
    return ["--log", str(files / "log.jsonl"), "--log", str(files / "log2.jsonl.gz")]


def test_simulate(spark, files: Path) -> None:
    out = files / "simulate"
    invoke(
        "simulate",
        *logs(files),
        "--current",
        str(files / "current.json"),
        "--proposed",
        str(files / "proposed.json"),
        "--out",
        str(out),
    )
    flips = spark.read.parquet(str(out / "flips"))
    assert flips.columns == [
        "principal",
        "host",
        "operation",
        "resource_type",
        "resource_name",
        "requests",
        "first_seen",
        "last_seen",
        "current_decision",
        "proposed_decision",
    ]
    got = sorted(
        (r.principal, r.operation, r.resource_name, r.requests, r.current_decision, r.proposed_decision)
        for r in flips.collect()
    )
    assert got == [
        ("User:bob", "READ", "orders-us", 50, "ALLOWED", "DENIED"),
        ("User:carol", "READ", "logs", 3, "DENIED", "ALLOWED"),
    ]
    row = flips.where("principal = 'User:bob'").collect()[0]
    assert (row.first_seen, row.last_seen) == (
        (T + timedelta(minutes=2)).replace(tzinfo=None),
        (T + timedelta(minutes=10 * 49 + 2)).replace(tzinfo=None),
    )
    report = (out / "report.html").read_text()
    would_break = report.index("Newly denied")
    opens_up = report.index("Newly allowed")
    assert would_break < report.index("orders-us") < opens_up < report.index("logs", opens_up)
    assert "<svg" in report
    assert "Unparseable lines" in report and "not valid JSON" in report


def test_replay_kafka_log_format(spark, files: Path) -> None:
    out = files / "replay"
    output = invoke(
        "replay",
        "--log",
        str(files / "kafka"),
        "--acls",
        str(files / "proposed.json"),
        "--out",
        str(out),
        "--format",
        "kafka-log",
    )
    assert "differing_accesses" in output
    decisions = spark.read.parquet(str(out / "decisions"))
    assert decisions.columns == [
        "principal",
        "host",
        "operation",
        "resource_type",
        "resource_name",
        "requests",
        "first_seen",
        "last_seen",
        "logged_decision",
        "decision",
        "rule",
    ]
    assert decisions.count() == len(TRAFFIC)
    differ = sorted(
        (r.principal, r.resource_name, r.rule) for r in decisions.where("logged_decision != decision").collect()
    )
    assert differ == [("User:bob", "orders-us", "DefaultDeny"), ("User:carol", "logs", differ[1][2])]
    assert differ[1][2].startswith("MatchingAcl(") and "id=p2" in differ[1][2]
    report = (out / "report.html").read_text()
    assert "not a Kafka authorizer audit line" in report


def test_usage(spark, files: Path) -> None:
    out = files / "usage"
    invoke("usage", *logs(files), "--acls", str(files / "current.json"), "--out", str(out))
    usage = {r.id: r for r in spark.read.parquet(str(out / "acl_usage")).collect()}
    assert {k: v.status for k, v in usage.items()} == {
        "c1": "USED",  # decides alice WRITE
        "c2": "USED",  # decides bob READ orders-us and carol DESCRIBE (READ implies DESCRIBE)
        "c3": "USED",
        "c4": "UNUSED",
        # alice READ orders-eu matches c5, c2 and c1; Kafka's walk meets the exact name first and the shortest
        # prefix last, and names the LAST matching ALLOW: c1 decides, c5 only matches (SEMANTICS §3, explain_in)
        "c5": "SHADOWED",
        "c6": "SHADOWED",  # ALLOW under c3's DENY
    }
    assert (usage["c5"].matched_requests, usage["c1"].matched_requests, usage["c1"].decisive_requests) == (
        100,
        110,
        110,
    )
    assert (usage["c2"].decisive_requests, usage["c6"].matched_requests) == (55, 20)
    denied = spark.read.parquet(str(out / "top_denied_principals")).collect()
    assert sorted((r.principal, r.requests) for r in denied) == [("User:bob", 20), ("User:carol", 3)]
    resources = spark.read.parquet(str(out / "top_denied_resources")).collect()
    assert sorted((r.resource_name, r.requests) for r in resources) == [("logs", 3), ("payments", 20)]
    report = (out / "report.html").read_text()
    assert "Shadowed" in report and "c6" in report and "c4" in report


def test_recommend_allows_exactly_the_observed_allowed_traffic(spark, files: Path) -> None:
    out = files / "recommend"
    invoke("recommend", *logs(files), "--out", str(out), "--super-users", "User:nobody")
    document = json.loads((out / "acls.json").read_text())
    bindings = acls_from_document(document)
    authorizer = StandardAuthorizer(acls=[StoredAcl(AclId(str(i)), b) for i, b in enumerate(bindings)])
    for principal, op, topic, logged, _ in TRAFFIC:
        action = Action(AclOperation[op], ResourcePattern(ResourceType.TOPIC, topic))
        assert authorizer.authorize_one(RequestContext(principal, "10.0.0.1"), action) is logged, (principal, op, topic)
    table = spark.read.parquet(str(out / "recommendations"))
    assert table.where("NOT exact").count() == 0
    assert {r.principal for r in table.collect()} == {"User:alice", "User:bob", "User:carol"}
    assert (out / "report.html").exists()


def test_recommend_one_principal(spark, files: Path) -> None:
    out = files / "recommend-bob"
    invoke("recommend", *logs(files), "--out", str(out), "--principal", "User:bob")
    rows = spark.read.parquet(str(out / "recommendations")).collect()
    assert [(r.principal, r.operation, r.resource_name, r.pattern_type) for r in rows] == [
        ("User:bob", "READ", "orders-us", "LITERAL")
    ]


def test_usage_credits_a_group_acl_to_its_members_requests(spark, files: Path) -> None:
    """A ``Group:`` ACL decides its members' requests when the document carries the groups; without them it
    matches no logged principal and is reported unused (what the document's ``groups`` key is for)."""
    group_acl = acl("g1", "Group:readers", "logs", "LITERAL", "READ")
    with_groups = files / "with-groups.json"
    with_groups.write_text(json.dumps({"acls": [*CURRENT, group_acl], "groups": {"Group:readers": ["User:carol"]}}))
    without = files / "without-groups.json"
    without.write_text(json.dumps({"acls": [*CURRENT, group_acl]}))
    status = {}
    for name, document in (("with", with_groups), ("without", without)):
        out = files / f"usage-{name}"
        invoke("usage", *logs(files), "--acls", str(document), "--out", str(out))
        rows = {r.id: r for r in spark.read.parquet(str(out / "acl_usage")).collect()}
        status[name] = (rows["g1"].status, rows["g1"].decisive_requests)
    assert status == {"with": ("USED", 3), "without": ("UNUSED", 0)}

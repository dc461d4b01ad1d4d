"""Issue 40: ``kafkaguard explain --from-audit LOG``: a denial taken straight from the audit log, decided again with
the store's ACLs (as its server recorded its super users) or an ACL file, and why."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.audit.records.cloudevents import envelope
from kafkaguard.audit.records.record import AuditRecord, to_dict, to_json_line
from kafkaguard.bootstrap import build_services
from kafkaguard.cli.main import app
from kafkaguard.config import load_settings
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.actors import ACTOR

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def record(
    principal: str,
    op: AclOperation,
    name: str,
    decision: AuthorizationResult,
    second: int,
    count: int = 1,
    enforced: bool = True,
) -> AuditRecord:
    return AuditRecord(
        time=datetime(2026, 11, 26, 9, 0, second, tzinfo=UTC), principal=principal, host="10.0.0.7", api="Fetch",
        operation=op, resource_type=ResourceType.TOPIC, resource_name=name, decision=decision,
        rule="DefaultDeny" if decision is DENIED else None, count=count, enforced=enforced,
    )  # fmt: skip


@pytest.fixture
def log(tmp_path: Path) -> Path:
    denied_bob = record("User:bob", AclOperation.READ, "payments", DENIED, 1)
    as_event = envelope(
        "authorization", "User:carol", to_dict(record("User:carol", AclOperation.WRITE, "orders", DENIED, 2)),
        source="kafkaguard://test", time=datetime(2026, 11, 26, 9, 0, 2, tzinfo=UTC), id="evt-carol-1",
    )  # fmt: skip
    lines = [
        to_json_line(denied_bob),
        json.dumps(as_event),
        "not json",
        to_json_line(record("User:alice", AclOperation.READ, "orders", DENIED, 3, count=12, enforced=False)),
        to_json_line(record("User:bob", AclOperation.READ, "orders", ALLOWED, 4)),
    ]
    path = tmp_path / "audit.log.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return path


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A store where alice may now read orders (granted after the logged denial)."""
    data = tmp_path / "data"
    services = build_services(load_settings(data_dir=data))
    try:
        services.acls.create_acls(
            [
                AclBinding(
                    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
                )
            ],
            actor=ACTOR,
        )
    finally:
        services.close()
    return data


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["explain", *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_last_denial_decided_again_against_the_store(log: Path, data_dir: Path) -> None:
    code, out, err = run("--from-audit", str(log), "--last-denied", "--data-dir", str(data_dir))
    assert code == 0, err
    assert "request  User:alice from 10.0.0.7: READ on TOPIC:orders (Fetch)" in out
    assert "logged   DENIED by DefaultDeny at 2026-11-26T09:00:03.000Z, 12 requests until" in out
    assert "not enforced" in out
    assert "now      ALLOWED by MatchingAcl(" in out
    assert "the decision differs from the logged one" in out
    assert f"{log}:4" in out
    assert f"warning: 1 line(s) are not audit records: {log}:3: not valid JSON" in err


def test_one_principals_last_denial_and_the_same_decision_now(log: Path, data_dir: Path) -> None:
    code, out, err = run("--from-audit", str(log), "--principal", "User:bob", "--data-dir", str(data_dir), "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert (answer["resource_name"], answer["logged_decision"], answer["decision_now"]) == (
        "payments",
        "DENIED",
        "DENIED",
    )
    assert answer["rule_now"] == "DefaultDeny" and "User:bob" in answer["explanation"]


def test_an_event_by_id_against_an_acl_file(log: Path, tmp_path: Path) -> None:
    acls = tmp_path / "acls.yaml"
    acls.write_text("principals:\n  User:carol:\n    acls:\n      - topic: orders\n        operations: [Write]\n")
    code, out, err = run("--from-audit", str(log), "--event", "evt-carol-1", "--acls", str(acls))
    assert code == 0, err
    assert "User:carol" in out and "WRITE on TOPIC:orders" in out and "now      ALLOWED" in out


def test_nothing_to_explain_is_a_clear_error(log: Path, data_dir: Path) -> None:
    code, _, err = run("--from-audit", str(log), "--principal", "User:nobody", "--data-dir", str(data_dir))
    assert code == 2 and "no DENIED record of User:nobody" in err
    code, _, err = run("--from-audit", str(log), "--event", "missing", "--data-dir", str(data_dir))
    assert code == 2 and "no event missing" in err

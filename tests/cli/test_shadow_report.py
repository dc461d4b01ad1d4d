"""``kafkaguard audit shadow-report``: shadow events summarised per principal, resource and direction, from log files
mixing v1 records, v2 records with counts, envelopes of other categories and bad lines."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from kafkaguard.audit.records.cloudevents import AUTHORIZATION, envelope, to_json
from kafkaguard.audit.records.record import AuditRecord, to_dict, to_json_line
from kafkaguard.audit.records.shadow import shadow_event
from kafkaguard.cli.main import app
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def record(principal: str, name: str, op: AclOperation, decision: AuthorizationResult, second: int) -> AuditRecord:
    return AuditRecord(
        time=datetime(2026, 11, 26, 9, 0, second, tzinfo=UTC), principal=principal, host="10.0.0.7", api="Fetch",
        operation=op, resource_type=ResourceType.TOPIC, resource_name=name, decision=decision, rule="DefaultDeny",
    )  # fmt: skip


def event(principal: str, name: str, op: AclOperation, decision: AuthorizationResult, second: int) -> str:
    shadow = "DENIED" if decision is ALLOWED else "ALLOWED"
    return json.dumps(shadow_event(record(principal, name, op, decision, second), shadow, "DefaultDeny",
                                   source="kafkaguard://test"))  # fmt: skip


def test_flips_are_summarised_per_principal_resource_and_direction(tmp_path: Path):
    first = tmp_path / "audit.log.1"
    first.write_text(
        "\n".join([
            to_json_line(record("User:alice", "orders", AclOperation.READ, ALLOWED, 1)),  # not a shadow event
            event("User:alice", "orders", AclOperation.READ, ALLOWED, 2),
            event("User:alice", "orders", AclOperation.DESCRIBE, ALLOWED, 3),
            '{"specversion":"1.0","type":"io.kafkaguard.management.v1","data":{"shadow":"not this"}}',
            '{"shadow_decision": "ALLOWED", broken',
        ]) + "\n"
    )  # fmt: skip
    data = json.loads(event("User:bob", "pii", AclOperation.WRITE, DENIED, 4))["data"]
    data |= {"version": 2, "count": 5, "last_time": "2026-11-26T09:10:00.000Z"}  # a windowed record, unwrapped
    second = tmp_path / "audit.log.gz"
    with gzip.open(second, "wt") as out:
        out.write(json.dumps(data) + "\n" + event("User:alice", "orders", AclOperation.READ, ALLOWED, 9) + "\n")
    result = CliRunner().invoke(app, ["audit", "shadow-report", str(first), str(second), "--output", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["lines_read"], report["shadow_events"], report["requests"], report["bad_lines"]) == (7, 4, 8, 1)
    assert report["flips"] == [
        {"principal": "User:alice", "resource_type": "TOPIC", "resource_name": "orders", "direction": "newly denied",
         "operations": ["DESCRIBE", "READ"], "hosts": ["10.0.0.7"], "apis": ["Fetch"], "requests": 3,
         "first_seen": "2026-11-26T09:00:02.000Z", "last_seen": "2026-11-26T09:00:09.000Z",
         "shadow_rules": ["DefaultDeny"]},
        {"principal": "User:bob", "resource_type": "TOPIC", "resource_name": "pii", "direction": "newly allowed",
         "operations": ["WRITE"], "hosts": ["10.0.0.7"], "apis": ["Fetch"], "requests": 5,
         "first_seen": "2026-11-26T09:00:04.000Z", "last_seen": "2026-11-26T09:10:00.000Z",
         "shadow_rules": ["DefaultDeny"]},
    ]  # fmt: skip
    assert "audit.log.1:5: not valid JSON" in result.stderr


def test_the_table_names_each_flip_and_a_principal_filter_narrows_it(tmp_path: Path):
    log = tmp_path / "audit.log"
    log.write_text(event("User:alice", "orders", AclOperation.READ, ALLOWED, 1) + "\n"
                   + event("User:bob", "pii", AclOperation.WRITE, DENIED, 2) + "\n")  # fmt: skip
    result = CliRunner().invoke(app, ["audit", "shadow-report", str(log), "--principal", "User:bob"],
                                env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "User:bob" in result.stdout and "TOPIC:pii" in result.stdout and "newly allowed" in result.stdout
    assert "User:alice" not in result.stdout


def test_no_flips_is_said_plainly(tmp_path: Path):
    log = tmp_path / "audit.log"
    log.write_text(to_json_line(record("User:alice", "orders", AclOperation.READ, ALLOWED, 1)) + "\n")
    result = CliRunner().invoke(app, ["audit", "shadow-report", str(log)])
    assert result.exit_code == 0 and "No shadow flips in 1 record(s)" in result.stdout


def test_an_unreadable_file_is_an_error(tmp_path: Path):
    result = CliRunner().invoke(app, ["audit", "shadow-report", str(tmp_path / "missing.log")])
    assert result.exit_code == 1 and "cannot read" in result.stderr


def test_a_bad_output_is_a_usage_error(tmp_path: Path):
    result = CliRunner().invoke(app, ["audit", "shadow-report", str(tmp_path), "--output", "yaml"])
    assert result.exit_code == 2 and "expected table, wide or json" in result.stderr


def test_a_permissive_proxys_would_be_denials_are_counted_apart_and_pointed_to(tmp_path: Path):
    """A permissive proxy's log without a candidate set holds no shadow event, only would-be denials: the report
    must not read as "the candidate decides this traffic alike", and says where those denials are explained."""
    would_be = replace(record("User:alice", "orders", AclOperation.READ, DENIED, 1), enforced=False, count=3)
    enveloped = envelope(AUTHORIZATION, "User:alice", to_dict(replace(would_be, count=1)), source="kafkaguard://test",
                         time=would_be.time)  # fmt: skip
    log = tmp_path / "audit.log"
    log.write_text("\n".join([
        to_json_line(would_be),
        to_json(enveloped),
        to_json_line(replace(record("User:bob", "pii", AclOperation.WRITE, DENIED, 2), enforced=False)),
        to_json_line(record("User:carol", "pii", AclOperation.WRITE, DENIED, 3)),  # enforced: a denial, not counted
    ]) + "\n")  # fmt: skip
    table = CliRunner().invoke(app, ["audit", "shadow-report", str(log)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "No shadow flips in 4 record(s)." in table.stdout and "alike" not in table.stdout
    assert "3 record(s) of a permissive proxy's would-be denials (5 request(s)" in table.stdout
    assert "kafkaguard explain --from-audit" in table.stdout
    narrowed = CliRunner().invoke(app, ["audit", "shadow-report", str(log), "--output", "json", "--principal",
                                        "User:alice"])  # fmt: skip
    assert narrowed.exit_code == 0, narrowed.output
    assert json.loads(narrowed.stdout)["would_be_denials"] == {"records": 2, "requests": 4}
    none = CliRunner().invoke(app, ["audit", "shadow-report", str(log), "--principal", "User:carol"])
    assert "alike" in none.stdout and "would-be" not in none.stdout

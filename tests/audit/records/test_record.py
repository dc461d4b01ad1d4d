from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
    StoredAcl,
)
from kafkaguard.audit.records import (
    NOT_A_RECORD,
    SCHEMA_VERSION,
    AuditRecord,
    LineError,
    format_time,
    from_json_line,
    parse_time,
    record_from_decision,
    rule_acl_id,
    to_dict,
    to_json_line,
)
from kafkaguard.audit.records.record import BAD_COUNT, BAD_ENFORCED, BAD_ENVELOPE, BAD_LAST_TIME
from kafkaguard.model import AuthorizationResult

T = datetime(2025, 3, 14, 9, 26, 53, 104000, tzinfo=UTC)
RECORD = AuditRecord(
    time=T,
    principal="User:CN=svc,OU=eng, O=Acme",
    host="10.20.3.17",
    api="Produce",
    operation=AclOperation.WRITE,
    resource_type=ResourceType.TOPIC,
    resource_name="pay:ments",
    decision=AuthorizationResult.DENIED,
    rule="DefaultDeny",
)


def test_json_line_layout() -> None:
    assert json.loads(to_json_line(RECORD)) == {
        "version": 2,
        "time": "2025-03-14T09:26:53.104Z",
        "principal": "User:CN=svc,OU=eng, O=Acme",
        "host": "10.20.3.17",
        "api": "Produce",
        "operation": "WRITE",
        "resource_type": "TOPIC",
        "pattern_type": "LITERAL",
        "resource_name": "pay:ments",
        "decision": "DENIED",
        "rule": "DefaultDeny",
    }
    assert "\n" not in to_json_line(RECORD)


def test_roundtrip() -> None:
    assert from_json_line(to_json_line(RECORD) + "\n") == RECORD


def test_time_is_written_in_utc() -> None:
    paris = T.astimezone(timezone(timedelta(hours=1)))
    assert format_time(paris) == "2025-03-14T09:26:53.104Z"
    assert parse_time("2025-03-14T10:26:53.104+01:00") == T
    assert parse_time("2025-03-14 09:26:53,104") == T
    assert parse_time("yesterday") is None


def test_record_from_core_decision_names_the_deciding_acl() -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "pay", PatternType.PREFIXED),
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    authorizer = StandardAuthorizer(acls=[StoredAcl(AclId("acl-1"), binding)])
    decision = authorizer.explain(
        RequestContext("User:alice", "10.0.0.1"),
        Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, "payments")),
    )
    record = record_from_decision(decision, T, api="Fetch")
    assert record.decision is AuthorizationResult.ALLOWED
    assert record.acl_id == "acl-1"
    assert record.rule is not None and record.rule.startswith("MatchingAcl(")
    assert from_json_line(to_json_line(record)) == record


def test_rule_acl_id() -> None:
    assert rule_acl_id("MatchingAcl(acl=(pattern=Topic:LITERAL:a, entry=(x)), id=abc-1)") == "abc-1"
    assert rule_acl_id("DefaultDeny") is None
    assert rule_acl_id(None) is None
    assert rule_acl_id("MatchingAcl(acl=StandardAcl(resourceType=GROUP))") is None


GOOD = to_dict(RECORD)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"version": None}, "missing or non-integer version"),
        ({"version": True}, "missing or non-integer version"),
        ({"version": SCHEMA_VERSION + 1}, "unsupported version (this kafkaguard reads versions 1 to 2)"),
        ({"principal": None}, "missing or non-string principal"),
        ({"resource_name": 5}, "missing or non-string resource_name"),
        ({"rule": 5}, "non-string rule"),
        ({"time": "soon"}, "missing or invalid time"),
        ({"time": None}, "missing or invalid time"),
        ({"operation": "ANY"}, "unknown operation"),
        ({"resource_type": "WIDGET"}, "unknown resource_type"),
        ({"pattern_type": "PREFIXED"}, "pattern_type is not LITERAL"),
        ({"decision": "MAYBE"}, "unknown decision"),
        ({"count": 0}, BAD_COUNT),
        ({"count": -3}, BAD_COUNT),
        ({"count": 2.0}, BAD_COUNT),
        ({"count": "2"}, BAD_COUNT),
        ({"count": True}, BAD_COUNT),
        ({"count": 2**63}, BAD_COUNT),
        ({"last_time": "later"}, BAD_LAST_TIME),
        ({"last_time": 5}, BAD_LAST_TIME),
        ({"last_time": "2025-03-14T09:26:53.103Z"}, BAD_LAST_TIME),
        ({"enforced": "false"}, BAD_ENFORCED),
        ({"enforced": 0}, BAD_ENFORCED),
    ],
)
def test_invalid_records_have_reasons(change: dict[str, object], reason: str) -> None:
    line = json.dumps({**GOOD, **change})
    assert from_json_line(line) == LineError(reason, line)


@pytest.mark.parametrize(("line", "reason"), [("{", "not valid JSON"), ("[1]", "not a JSON object")])
def test_non_objects(line: str, reason: str) -> None:
    assert from_json_line(line) == LineError(reason, line)


def test_optional_fields_may_be_null_or_absent() -> None:
    fields = dict(GOOD)
    del fields["api"]
    fields["rule"] = None
    result = from_json_line(json.dumps(fields))
    assert isinstance(result, AuditRecord)
    assert (result.api, result.rule) == (None, None)


@given(
    principal=st.text(min_size=1),
    name=st.text(),
    millis=st.integers(0, 10**9),
    op=st.sampled_from([op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN)]),
)
def test_any_record_roundtrips(principal, name, millis, op) -> None:
    record = AuditRecord(
        time=T + timedelta(milliseconds=millis),
        principal=principal,
        host="h",
        api=None,
        operation=op,
        resource_type=ResourceType.GROUP,
        resource_name=name,
        decision=AuthorizationResult.ALLOWED,
        rule=None,
    )
    assert from_json_line(to_json_line(record)) == record


V1_LINE = (
    '{"version":1,"time":"2025-03-14T09:26:53.104Z","principal":"User:CN=svc,OU=eng, O=Acme","host":"10.20.3.17",'
    '"api":"Produce","operation":"WRITE","resource_type":"TOPIC","pattern_type":"LITERAL","resource_name":"pay:ments",'
    '"decision":"DENIED","rule":"DefaultDeny"}'
)


def test_version_1_lines_still_read_as_one_request() -> None:
    parsed = from_json_line(V1_LINE)
    assert isinstance(parsed, AuditRecord)
    assert (parsed.version, parsed.count, parsed.last_time, parsed.last, parsed.enforced) == (1, 1, None, T, True)
    assert parsed == replace(RECORD, version=1)


def test_a_folded_record_writes_and_reads_its_count_and_last_time() -> None:
    later = T + timedelta(seconds=41, milliseconds=5)
    folded = replace(RECORD, count=7, last_time=later, enforced=False)
    written = json.loads(to_json_line(folded))
    assert (written["version"], written["count"], written["last_time"], written["enforced"]) == (
        2,
        7,
        "2025-03-14T09:27:34.109Z",
        False,
    )
    assert from_json_line(to_json_line(folded)) == folded
    # A single, enforced request writes none of the optional fields.
    assert not {"count", "last_time", "enforced"} & set(json.loads(to_json_line(RECORD)))


def test_null_optional_v2_fields_mean_absent() -> None:
    parsed = from_json_line(json.dumps({**GOOD, "count": None, "last_time": None, "enforced": None}))
    assert isinstance(parsed, AuditRecord)
    assert (parsed.count, parsed.last_time, parsed.enforced) == (1, None, True)


def envelope(type_: str, data: object) -> str:
    return json.dumps(
        {
            "specversion": "1.0",
            "id": "9f1c",
            "source": "kafkaguard://node-1",
            "type": type_,
            "time": "2025-03-14T09:26:53.104Z",
            "subject": "TOPIC:pay:ments",
            "datacontenttype": "application/json",
            "dataschema": "https://kafkaguard.dev/schemas/audit/v2.json",
            "data": data,
        }
    )


def test_an_authorization_envelope_holds_a_record_and_a_shadow_one_is_skipped() -> None:
    folded = replace(RECORD, count=3, last_time=T + timedelta(seconds=2))
    data = to_dict(folded)
    assert from_json_line(envelope("io.kafkaguard.authorization.v2", data)) == folded
    # A shadow event repeats a decision the trail already holds: read as a record it would count twice.
    shadow = {**data, "shadow_decision": "ALLOWED", "shadow_rule": "DefaultAllow"}
    assert from_json_line(envelope("io.kafkaguard.shadow.v1", shadow)) is NOT_A_RECORD


def test_envelopes_of_other_categories_are_skipped_not_bad() -> None:
    for type_ in ("io.kafkaguard.management.v1", "io.kafkaguard.authentication.v1", "com.example.other"):
        assert from_json_line(envelope(type_, {"result": "SUCCESS"})) is NOT_A_RECORD


def test_an_authorization_envelope_must_hold_a_valid_record() -> None:
    line = envelope("io.kafkaguard.authorization.v2", None)
    assert from_json_line(line) == LineError(BAD_ENVELOPE, line)
    line = envelope("io.kafkaguard.authorization.v2", {**GOOD, "count": 0})
    assert from_json_line(line) == LineError(BAD_COUNT, line)

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.audit.records import AuditRecord, LineError, parse_kafka_log_line, pascal_to_upper
from kafkaguard.audit.records.kafka_log import (
    KAFKA_LOG_PATTERN,
    NO_TIMESTAMP,
    NOT_AN_AUDIT_LINE,
    NOT_LITERAL,
    UNKNOWN_OPERATION,
    UNKNOWN_RESOURCE_TYPE,
)
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from tests.audit.records.kafka_lines import kafka_line

T = datetime(2025, 3, 14, 9, 26, 53, 104000, tzinfo=UTC)
ISSUE_LINE = (
    "[2025-03-14 09:26:53,104] INFO Principal = User:orders-svc is Denied operation = WRITE from host = 10.20.3.17 "
    "on resource = Topic:LITERAL:payments for request = Produce with resourceRefCount = 1 based on rule DefaultDeny "
    "(kafka.authorizer.logger)"
)
MATCHING_RULE = (
    "MatchingAcl(acl=StandardAcl(resourceType=GROUP, resourceName=g, patternType=LITERAL, principal=User:o, "
    "host=*, operation=READ, permissionType=ALLOW))"
)


def parsed(line: str) -> AuditRecord:
    result = parse_kafka_log_line(line)
    assert isinstance(result, AuditRecord), result
    return result


def test_kraft_line_from_the_issue() -> None:
    assert parsed(ISSUE_LINE) == AuditRecord(
        time=T,
        principal="User:orders-svc",
        host="10.20.3.17",
        api="Produce",
        operation=AclOperation.WRITE,
        resource_type=ResourceType.TOPIC,
        resource_name="payments",
        decision=AuthorizationResult.DENIED,
        rule="DefaultDeny",
    )


def test_kraft_matching_acl_rule_keeps_its_parentheses_but_not_the_logger() -> None:
    line = (
        "[2025-03-14 09:26:53,104] DEBUG Principal = User:o is Allowed operation = READ from host = 1.1.1.1 on "
        f"resource = Group:LITERAL:g for request = JoinGroup with resourceRefCount = 1 based on rule {MATCHING_RULE}"
        " (kafka.authorizer.logger)"
    )
    record = parsed(line)
    assert record.rule == MATCHING_RULE
    assert record.decision is AuthorizationResult.ALLOWED
    assert record.resource_type is ResourceType.GROUP
    assert record.api == "JoinGroup"


@pytest.mark.parametrize("rule", ["SuperUser", "DefaultAllow", "DefaultDeny"])
def test_kraft_named_rules(rule: str) -> None:
    assert parsed(ISSUE_LINE.replace("DefaultDeny", rule)).rule == rule


def test_acl_authorizer_line_pascal_case_operation_no_rule() -> None:
    line = (
        "[2021-06-01 12:00:00,001] INFO Principal = User:bob is Denied Operation = DescribeConfigs from host = "
        "10.0.0.1 on resource = TransactionalId:LITERAL:tx-1 for request = InitProducerId with "
        "resourceRefCount = 1 (kafka.authorizer.logger)"
    )
    record = parsed(line)
    assert (record.operation, record.resource_type, record.resource_name) == (
        AclOperation.DESCRIBE_CONFIGS,
        ResourceType.TRANSACTIONAL_ID,
        "tx-1",
    )
    assert record.api == "InitProducerId"
    assert record.rule is None


def test_simple_acl_authorizer_line_without_request() -> None:
    line = (
        "[2019-01-01 00:00:00,000] DEBUG Principal = User:bob is Allowed Operation = IdempotentWrite from host = "
        "10.0.0.1 on resource = Cluster:LITERAL:kafka-cluster (kafka.authorizer.logger)"
    )
    record = parsed(line)
    assert record.operation is AclOperation.IDEMPOTENT_WRITE
    assert record.resource_name == "kafka-cluster"
    assert record.api is None
    assert record.decision is AuthorizationResult.ALLOWED


def test_pre_2_0_line_without_pattern_type() -> None:
    line = (
        "[2017-01-01 00:00:00,000] INFO Principal = User:bob is Denied Operation = Read from host = /10.0.0.1 "
        "on resource = Topic:a:b (kafka.authorizer.logger)"
    )
    record = parsed(line)
    assert (record.resource_name, record.host) == ("a:b", "/10.0.0.1")


def test_mtls_principal_with_commas_and_spaces() -> None:
    line = ISSUE_LINE.replace("User:orders-svc", "User:CN=svc,OU=eng, O=Acme Corp, L=Paris")
    assert parsed(line).principal == "User:CN=svc,OU=eng, O=Acme Corp, L=Paris"


def test_principal_containing_is_denied() -> None:
    line = ISSUE_LINE.replace("User:orders-svc", "User:CN=this is Denied, O=x")
    assert parsed(line).principal == "User:CN=this is Denied, O=x"


@pytest.mark.parametrize(
    "name",
    [
        "a:b:c",
        "LITERAL:x",
        "name with spaces",
        "x for request = Fetch with resourceRefCount = 1",
        "x (kafka.authorizer.logger)",
        "",
        "ünïcødé-トピック",
        "x based on rule DefaultAllow",
    ],
)
def test_hostile_resource_names(name: str) -> None:
    line = ISSUE_LINE.replace("Topic:LITERAL:payments", f"Group:LITERAL:{name}")
    assert parsed(line).resource_name == name


def test_ipv6_host() -> None:
    assert parsed(ISSUE_LINE.replace("10.20.3.17", "0:0:0:0:0:0:0:1")).host == "0:0:0:0:0:0:0:1"


def test_windows_line_ending_and_trailing_newline() -> None:
    assert parsed(ISSUE_LINE + "\r\n").rule == "DefaultDeny"


def test_iso_timestamp_and_no_brackets() -> None:
    line = ISSUE_LINE.replace("[2025-03-14 09:26:53,104]", "2025-03-14T09:26:53.104")
    assert parsed(line).time == T


def test_without_logger_suffix() -> None:
    assert parsed(ISSUE_LINE.removesuffix(" (kafka.authorizer.logger)")).resource_name == "payments"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("garbage", NOT_AN_AUDIT_LINE),
        ("[2025-03-14 09:26:53,104] INFO [Controller id=1] Processing request (kafka.controller)", NOT_AN_AUDIT_LINE),
        (ISSUE_LINE.replace("[2025-03-14 09:26:53,104] ", ""), NO_TIMESTAMP),
        (ISSUE_LINE.replace("2025-03-14", "2025-13-14"), NO_TIMESTAMP),
        (ISSUE_LINE.replace("WRITE", "FROBNICATE"), UNKNOWN_OPERATION),
        (ISSUE_LINE.replace("WRITE", "ANY"), UNKNOWN_OPERATION),
        (ISSUE_LINE.replace("Topic:", "Widget:"), UNKNOWN_RESOURCE_TYPE),
        (ISSUE_LINE.replace("LITERAL", "PREFIXED"), NOT_LITERAL),
        (ISSUE_LINE.replace(" from host", " from hostess"), NOT_AN_AUDIT_LINE),
        (ISSUE_LINE[:80], NOT_AN_AUDIT_LINE),
    ],
)
def test_garbage_lines_are_errors_with_reasons(line: str, reason: str) -> None:
    result = parse_kafka_log_line(line)
    assert isinstance(result, LineError)
    assert result.reason == reason
    assert result.line == line


@pytest.mark.parametrize("line", ["", "   ", "\n", "\r\n"])
def test_blank_lines_are_not_records(line: str) -> None:
    assert parse_kafka_log_line(line) is None


def test_pascal_to_upper() -> None:
    assert [pascal_to_upper(n) for n in ("DescribeConfigs", "WRITE", "TransactionalId", "Read", "ALTER_CONFIGS")] == [
        "DESCRIBE_CONFIGS",
        "WRITE",
        "TRANSACTIONAL_ID",
        "READ",
        "ALTER_CONFIGS",
    ]


def test_pattern_uses_only_portable_syntax() -> None:
    """Python's and Java's regex dialects differ on ``.``, ``\\w``, ``\\s``, ``\\d`` and named groups."""
    assert not re.search(r"(?<!\\)\.(?![^\[]*\])|\\[wsdWSD]|\(\?P", KAFKA_LOG_PATTERN.replace(r"\.", ""))


_name = st.text(st.characters(codec="utf-8", exclude_characters="\n\r\x85\u2028\u2029"), max_size=20)
_principal_name = st.text(st.sampled_from("abcXYZ019=,. :-_*"), min_size=1, max_size=30)


@given(
    principal=_principal_name,
    name=_name,
    host=st.sampled_from(["10.0.0.1", "0:0:0:0:0:0:0:1", "*"]),
    op=st.sampled_from([op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN)]),
    rtype=st.sampled_from([t for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)]),
    decision=st.sampled_from(AuthorizationResult),
    form=st.sampled_from(["kraft", "acl", "simple"]),
    millis=st.integers(0, 999),
)
def test_every_generation_roundtrips(principal, name, host, op, rtype, decision, form, millis) -> None:
    record = AuditRecord(
        time=T.replace(microsecond=millis * 1000),
        principal=f"User:{principal}",
        host=host,
        api=None,
        operation=op,
        resource_type=rtype,
        resource_name=name,
        decision=decision,
        rule="DefaultDeny" if form == "kraft" else None,
    )
    back = parsed(kafka_line(record, form, request="Metadata"))
    expected_api = None if form == "simple" else "Metadata"
    assert back == AuditRecord(
        time=record.time,
        principal=record.principal,
        host=host,
        api=expected_api,
        operation=op,
        resource_type=rtype,
        resource_name=name,
        decision=decision,
        rule=record.rule,
    )

"""Routing rules: first match wins, each field narrows, the default catches the rest; bad rules say what to fix."""

from __future__ import annotations

import pytest

from kafkaguard.audit.records.routing import Router, parse_routes

RULES = [
    {"category": "authorization", "result": "allowed", "resource": "TOPIC:metrics-", "topic": "drop"},
    {"principal": "User:svc-*", "category": "authorization", "topic": "audit-services"},
    {"category": "authentication", "result": "failure", "topic": "audit-security"},
    {"principal": "User:root", "topic": "audit-root"},
]
ROUTER = Router(parse_routes(RULES), "audit-events")


def decision(principal: str, resource: str, decision: str) -> tuple[str, str, dict[str, object]]:
    return "authorization", resource, {"principal": principal, "decision": decision}


@pytest.mark.parametrize(
    ("event", "topic"),
    [
        (decision("User:svc-a", "TOPIC:metrics-cpu", "ALLOWED"), None),  # rule 1: dropped
        (decision("User:svc-a", "TOPIC:metrics-cpu", "DENIED"), "audit-services"),  # rule 2
        (decision("User:bob", "TOPIC:metrics-cpu", "DENIED"), "audit-events"),  # default
        (decision("User:svc", "TOPIC:orders", "ALLOWED"), "audit-events"),  # the prefix needs the dash
        (("authentication", "User:mallory", {"result": "FAILURE", "attempted_name": "mallory"}), "audit-security"),
        (("authentication", "User:root", {"result": "SUCCESS", "principal": "User:root"}), "audit-root"),
        (
            ("authentication", "User:root", {"result": "FAILURE", "principal": None, "attempted_name": "root"}),
            "audit-security",
        ),
        (("management", "TOPIC:LITERAL:x", {"result": "SUCCESS", "actor": {"principal": "User:root"}}), "audit-root"),
        (("management", "TOPIC:LITERAL:x", {"result": "SUCCESS", "actor": {"principal": "User:bob"}}), "audit-events"),
    ],
)
def test_the_first_matching_rule_wins(event: tuple[str, str, dict[str, object]], topic: str | None):
    assert ROUTER.route(*event) == topic


def test_without_rules_everything_goes_to_the_default_topic():
    assert Router((), "audit").route(*decision("User:a", "TOPIC:t", "ALLOWED")) == "audit"
    assert ROUTER.topics == ("audit-services", "audit-security", "audit-root", "audit-events")


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"category": "billing", "topic": "t"}, "route 1: unknown category 'billing'; the categories are"),
        (
            {"category": "authorization", "result": "failure", "topic": "t"},
            "result 'failure' is not one of category authorization's results (allowed, denied)",
        ),
        ({"category": "authorization"}, "route 1 has no topic"),
        ({"topic": "bad topic!"}, "is not a Kafka topic name"),
        ({"topic": ".."}, "Kafka refuses"),
        ({"topic": "t", "principle": "User:a"}, "unknown key(s) principle"),
        ({"topic": "t", "resource": ""}, "resource is empty"),
        ("authorization", "route 1 is not a mapping"),
    ],
)
def test_a_bad_rule_is_refused_with_what_to_fix(rule: object, message: str):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_routes([rule])

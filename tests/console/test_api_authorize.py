"""``POST /api/authorize``: "why was X denied?" — the decision, the deciding rule, every matching ACL (ALLOW and
DENY) with the decisive one marked, and a sentence a person can read; it agrees with the authorizer."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from kafkaguard.model import AclOperation, Action, PatternType, RequestContext, ResourcePattern, ResourceType
from tests.console.conftest import ConsoleHandle


def ask(client: httpx.Client, **fields: str) -> dict[str, Any]:
    body = {"principal": "User:alice", "host": "10.0.0.7", "operation": "READ", "resource_type": "TOPIC"} | fields
    response = client.post("/api/authorize", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_deny_wins_and_every_matching_acl_is_listed(console: ConsoleHandle, admin: httpx.Client) -> None:
    name = f"payments-{uuid.uuid4().hex[:8]}"
    created = admin.post(
        "/api/acls",
        json=[
            {
                "principal": "User:alice",
                "resource_type": "TOPIC",
                "resource_name": name,
                "operation": "READ",
                "permission_type": "ALLOW",
            },
            {
                "principal": "User:*",
                "resource_type": "TOPIC",
                "resource_name": name[:10],
                "pattern_type": "PREFIXED",
                "host": "10.0.0.7",
                "operation": "READ",
                "permission_type": "DENY",
            },
            {
                "principal": "User:bob",
                "resource_type": "TOPIC",
                "resource_name": name,
                "operation": "READ",
                "permission_type": "DENY",
            },
        ],
    ).json()["results"]
    allow_id, deny_id = created[0]["acl"]["id"], created[1]["acl"]["id"]
    result = ask(admin, resource_name=name)
    assert result["decision"] == "DENIED"
    assert result["rule"]["kind"] == "MatchingAcl"
    assert result["rule"]["acl"]["id"] == deny_id
    assert result["rule"]["text"].startswith("MatchingAcl(acl=(pattern=Topic:PREFIXED:")
    assert [(a["id"], a["permission_type"], a["decisive"]) for a in result["matching_acls"]] == [
        (allow_id, "ALLOW", False),
        (deny_id, "DENY", True),
    ]
    assert result["relevant_acl_count"] == 3
    assert result["explanation"].startswith(f"DENIED: User:alice from 10.0.0.7 READ on Topic:LITERAL:{name}, because")
    assert "a matching DENY always wins" in result["explanation"]
    # From another host the DENY does not match: ALLOW by the literal ACL, and DESCRIBE is implied by READ.
    other = ask(admin, resource_name=name, host="10.0.0.8", operation="Describe")
    assert other["decision"] == "ALLOWED" and other["rule"]["acl"]["id"] == allow_id
    assert [a["decisive"] for a in other["matching_acls"]] == [True]
    # The answer is the authorizer's own.
    decision = console.services.authorizer.explain(
        RequestContext("User:alice", "10.0.0.7"),
        Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL)),
    )
    assert decision.explanation() == result["explanation"]


def test_default_rules_and_super_users(admin: httpx.Client) -> None:
    nothing = ask(admin, resource_name=f"unused-{uuid.uuid4().hex}")
    assert nothing["decision"] == "DENIED" and nothing["rule"] == {
        "kind": "DefaultDeny",
        "text": "DefaultDeny",
        "acl": None,
    }
    assert nothing["matching_acls"] == [] and nothing["relevant_acl_count"] == 0
    assert "allow.everyone.if.no.acl.found is false" in nothing["explanation"]
    boss = ask(admin, principal="User:admin", resource_name="anything")
    assert boss["decision"] == "ALLOWED" and boss["rule"]["kind"] == "SuperUser"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"operation": "ANY"}, "operation"),
        ({"resource_type": "ANY"}, "resource_type"),
        ({"principal": "alice"}, "principal"),
        ({"operation": "reed"}, "operation"),
    ],
)
def test_questions_kafka_would_not_answer_are_422(admin: httpx.Client, fields: dict[str, str], field: str) -> None:
    body = {
        "principal": "User:alice",
        "host": "1.2.3.4",
        "operation": "READ",
        "resource_type": "TOPIC",
        "resource_name": "t",
    } | fields
    response = admin.post("/api/authorize", json=body)
    assert response.status_code == 422
    assert response.json()["message"].startswith(f"{field}: ")

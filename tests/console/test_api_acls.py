"""``/api/acls`` over HTTP: create (one or many, per-binding results), validation (422 naming the field, never a
silent mapping), list with Kafka's filter semantics (SEMANTICS.md §6, cross-checked against the model's own
``AclBindingFilter.matches``), delete by filter (empty filter refused unless ``?all=true``; MATCH)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from kafkaguard.model import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from tests.console.conftest import ConsoleHandle, start_console


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acl(name: str, **fields: str) -> dict[str, str]:
    body = {
        "principal": "User:alice",
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": name,
        "pattern_type": "LITERAL",
        "operation": "READ",
        "permission_type": "ALLOW",
    }
    body.update(fields)
    return body


def create(client: httpx.Client, *bodies: dict[str, str]) -> dict[str, Any]:
    response = client.post("/api/acls", json=list(bodies))
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert result["failed"] == 0, result
    return result


def listed(client: httpx.Client, **params: str) -> list[dict[str, str]]:
    response = client.get("/api/acls", params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["acls"])
    return list(body["acls"])


def without_id(rows: list[dict[str, str]]) -> set[tuple[str, ...]]:
    return {tuple(v for k, v in sorted(row.items()) if k != "id") for row in rows}


def test_create_one_binding_accepts_pascal_case_and_lists_kafka_names(admin: httpx.Client) -> None:
    name = unique("orders")
    response = admin.post(
        "/api/acls",
        json={
            "principal": "User:alice",
            "resource_type": "Topic",
            "resource_name": name,
            "pattern_type": "Prefixed",
            "operation": "DescribeConfigs",
            "permission_type": "Allow",
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["created"] == 1 and result["failed"] == 0
    created = result["results"][0]
    assert created["ok"] is True and created["error"] is None and created["acl"]["id"]
    rows = listed(admin, resource_name=name)
    assert rows == [
        {
            "id": created["acl"]["id"],
            "principal": "User:alice",
            "host": "*",
            "resource_type": "TOPIC",
            "resource_name": name,
            "pattern_type": "PREFIXED",
            "operation": "DESCRIBE_CONFIGS",
            "permission_type": "ALLOW",
        }
    ]


def test_create_a_list_gives_one_result_per_binding_and_a_bad_one_fails_alone(admin: httpx.Client) -> None:
    name = unique("batch")
    response = admin.post(
        "/api/acls",
        json=[
            acl(name),
            acl(name, principal="alice"),  # no Type: → Kafka-style per-binding refusal (SEMANTICS.md §16.2)
            acl("other", resource_type="CLUSTER"),  # CLUSTER must be kafka-cluster (§8.2)
            acl(name),  # the same ACL again: succeeds, stored once (§8.3)
        ],
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["ok"] for r in results] == [True, False, False, True]
    assert "Invalid principal 'alice'" in results[1]["error"]
    assert results[2]["error"] == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert results[0]["acl"]["id"] == results[3]["acl"]["id"]
    assert response.json()["created"] == 2 and response.json()["failed"] == 2
    assert len(listed(admin, resource_name=name)) == 1


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("permission_type", "denie", "'denie' is not a valid AclPermissionType name; expected one of DENY, ALLOW"),
        ("permission_type", "ANY", "'ANY' cannot be used in an ACL"),
        ("operation", "reed", "'reed' is not a valid AclOperation name"),
        ("operation", "ANY", "'ANY' cannot be used here"),
        ("resource_type", "Topik", "'Topik' is not a valid ResourceType name"),
        ("resource_type", "UNKNOWN", "'UNKNOWN' cannot be used in an ACL"),
        ("pattern_type", "MATCH", "'MATCH' cannot be used in an ACL (ANY and MATCH are for filters)"),
        ("pattern_type", "literall", "'literall' is not a valid PatternType name"),
    ],
)
def test_invalid_enum_names_are_422_naming_the_field_and_nothing_is_stored(
    admin: httpx.Client, field: str, value: str, expected: str
) -> None:
    name = unique("invalid")
    response = admin.post("/api/acls", json=acl(name, **{field: value}))
    assert response.status_code == 422
    body = response.json()
    assert body["message"].startswith(f"{field}: ")
    assert expected in body["message"]
    assert [d["loc"][-1] for d in body["detail"]] == [field]
    assert listed(admin, resource_name=name) == []


def test_validation_in_a_list_names_the_position(admin: httpx.Client) -> None:
    response = admin.post("/api/acls", json=[acl("fine"), acl("bad", permission_type="denie")])
    assert response.status_code == 422
    assert response.json()["message"].startswith("[1].permission_type: 'denie' is not a valid")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({k: v for k, v in acl("x").items() if k != "permission_type"}, "permission_type"),
        ({**acl("x"), "permision_type": "ALLOW"}, "permision_type"),
        ({**acl("x"), "operation": 3}, "operation"),
        ({**acl("x"), "resource_name": "\ud800"}, "resource_name"),
    ],
    ids=["missing", "unknown-field", "code-not-name", "lone-surrogate"],
)
def test_malformed_bindings_are_422(admin: httpx.Client, body: dict[str, Any], field: str) -> None:
    # json.dumps escapes a lone surrogate as \ud800, as a client in any language may send it
    response = admin.post("/api/acls", content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert field in response.json()["message"]


def test_filters_follow_kafka_semantics(admin: httpx.Client) -> None:
    base = unique("sem")
    literal, longer = base, f"{base}-orders"
    create(
        admin,
        acl(literal),
        acl(literal, pattern_type="PREFIXED", operation="WRITE"),
        acl(base[:6], pattern_type="PREFIXED", principal="User:bob"),  # a shorter prefix of both names
        acl(longer, principal="User:*", permission_type="DENY"),
        acl(longer, resource_type="GROUP", host="10.0.0.1"),
        acl("*", principal="User:wild-" + base),
    )

    def names(rows: list[dict[str, str]]) -> set[tuple[str, str, str]]:
        ours = [r for r in rows if base[:6] in r["resource_name"] or r["principal"] == f"User:wild-{base}"]
        return {(r["resource_type"], r["pattern_type"], r["resource_name"]) for r in ours}

    # MATCH with a name: every ACL that applies to that concrete resource — the literal, the wildcard, and
    # every prefix of the name (§6.1 rule 5).
    match = names(listed(admin, resource_type="TOPIC", resource_name=longer, pattern_type="MATCH"))
    assert match == {
        ("TOPIC", "LITERAL", longer),
        ("TOPIC", "PREFIXED", literal),
        ("TOPIC", "PREFIXED", base[:6]),
        ("TOPIC", "LITERAL", "*"),
    }
    # ANY with a name: LITERAL and PREFIXED with exactly that name, not the wildcard.
    assert names(listed(admin, resource_type="TOPIC", resource_name=literal, pattern_type="ANY")) == {
        ("TOPIC", "LITERAL", literal),
        ("TOPIC", "PREFIXED", literal),
    }
    # The default pattern type is ANY; resource type ANY matches every type.
    assert names(listed(admin, resource_name=longer)) == {("TOPIC", "LITERAL", longer), ("GROUP", "LITERAL", longer)}
    # LITERAL "*" is only the wildcard ACL.
    star = listed(admin, resource_type="TOPIC", resource_name="*", pattern_type="LITERAL")
    assert {r["resource_name"] for r in star} == {"*"}
    # Principal and host are exact: User:alice does not return User:* ACLs; host "*" only stored "*".
    alice = listed(admin, resource_name=longer, principal="User:alice")
    assert [(r["resource_type"], r["principal"]) for r in alice] == [("GROUP", "User:alice")]
    assert listed(admin, resource_name=longer, host="*") == [
        r for r in listed(admin, resource_name=longer) if r["host"] == "*"
    ]
    # Operation and permission are exact (no implication); names are case-insensitive on input.
    deny = listed(admin, resource_name=longer, permission_type="Deny")
    assert [(r["principal"], r["permission_type"]) for r in deny] == [("User:*", "DENY")]
    assert listed(admin, resource_name=literal, operation="DESCRIBE") == []


def test_filters_agree_with_the_model_on_every_combination(admin: httpx.Client) -> None:
    everything = listed(admin)
    assert everything, "the other tests have stored ACLs"
    stored = [row for row in everything if row["resource_type"] in ("TOPIC", "GROUP")]
    sample = stored[0]
    for resource_type in ("ANY", "TOPIC", "GROUP"):
        for pattern_type in ("ANY", "MATCH", "LITERAL", "PREFIXED"):
            for permission in ("ANY", "ALLOW", "DENY"):
                params = {
                    "resource_type": resource_type,
                    "resource_name": sample["resource_name"],
                    "pattern_type": pattern_type,
                    "permission_type": permission,
                }
                model_filter = AclBindingFilter(
                    ResourcePatternFilter(
                        ResourceType[resource_type], sample["resource_name"], PatternType[pattern_type]
                    ),
                    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType[permission]),
                )
                expected = [row for row in everything if model_filter.matches(_binding(row))]
                assert without_id(listed(admin, **params)) == without_id(expected), params


def _binding(row: dict[str, str]) -> Any:
    from kafkaguard.model import AccessControlEntry, AclBinding, ResourcePattern

    return AclBinding(
        ResourcePattern(ResourceType[row["resource_type"]], row["resource_name"], PatternType[row["pattern_type"]]),
        AccessControlEntry(
            row["principal"], row["host"], AclOperation[row["operation"]], AclPermissionType[row["permission_type"]]
        ),
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"permission_type": "denie"}, "permission_type"),
        ({"pattern_type": "UNKNOWN"}, "pattern_type"),
        ({"resource_typ": "TOPIC"}, "resource_typ"),
    ],
)
def test_bad_query_filters_are_422_naming_the_field(admin: httpx.Client, params: dict[str, str], field: str) -> None:
    response = admin.get("/api/acls", params=params)
    assert response.status_code == 422
    assert response.json()["message"].startswith(f"{field}: ")


def test_delete_by_filter_returns_the_deleted_acls(admin: httpx.Client) -> None:
    name = unique("del")
    create(admin, acl(name), acl(name, operation="WRITE"), acl(name, permission_type="DENY"))
    response = admin.request("DELETE", "/api/acls", json={"resource_name": name, "permission_type": "ALLOW"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == 2
    assert {(r["operation"], r["permission_type"]) for r in body["deleted"]} == {("READ", "ALLOW"), ("WRITE", "ALLOW")}
    assert [r["permission_type"] for r in listed(admin, resource_name=name)] == ["DENY"]
    # A filter matching nothing deletes nothing and is not an error.
    again = admin.request("DELETE", "/api/acls", json={"resource_name": name, "permission_type": "ALLOW"})
    assert again.json() == {"deleted": [], "count": 0}


def test_delete_with_match_removes_everything_that_applies_to_the_name(admin: httpx.Client) -> None:
    base = unique("m")
    create(admin, acl(f"{base}-x"), acl(base, pattern_type="PREFIXED"), acl(f"{base}-y"))
    response = admin.request(
        "DELETE",
        "/api/acls",
        json={
            "resource_type": "TOPIC",
            "resource_name": f"{base}-x",
            "pattern_type": "MATCH",
            "principal": "User:alice",
        },
    )
    assert {(r["pattern_type"], r["resource_name"]) for r in response.json()["deleted"]} == {
        ("LITERAL", f"{base}-x"),
        ("PREFIXED", base),
    }
    assert [r["resource_name"] for r in listed(admin, resource_name=f"{base}-y")] == [f"{base}-y"]


def test_an_empty_delete_filter_is_refused_unless_all_is_given(tmp_path: Any) -> None:
    handle: ConsoleHandle = start_console(tmp_path)
    try:
        with handle.client() as admin:
            create(admin, acl("a"), acl("b", resource_type="GROUP"))
            total = len(listed(admin))
            for response in (
                admin.delete("/api/acls"),
                admin.request("DELETE", "/api/acls", json={}),
                admin.request("DELETE", "/api/acls", json={"resource_type": "ANY", "operation": "Any"}),
                admin.delete("/api/acls", params={"all": "false"}),
            ):
                assert response.status_code == 400
                assert "?all=true" in response.json()["detail"]
            assert len(listed(admin)) == total
            response = admin.delete("/api/acls", params={"all": "true"})
            assert response.status_code == 200
            assert response.json()["count"] == total
            assert listed(admin) == []
    finally:
        handle.stop()
    assert handle.errors == []


def test_a_cidr_host_is_stored_and_an_invalid_block_fails_alone_with_what_to_fix(admin: httpx.Client) -> None:
    name = unique("cidr")
    response = admin.post("/api/acls", json=[acl(name, host="10.0.0.0/8"), acl(name, host="256.0.0.0/8")])
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["ok"] for r in results] == [True, False]
    assert results[1]["error"] == "Invalid CIDR notation '256.0.0.0/8': octet 256 is out of range 0 to 255"
    assert [a["host"] for a in listed(admin, resource_name=name)] == ["10.0.0.0/8"]

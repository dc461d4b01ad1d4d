"""``/api/groups`` and ``/api/access`` over real HTTP: groups change decisions at once, who-can answers name the
ACLs behind them, and bad input is a 422 that says what to fix."""

from __future__ import annotations

import uuid

import httpx

from kafkaguard.model import AclOperation, Action, RequestContext, ResourcePattern, ResourceType
from tests.console.conftest import READER, ConsoleHandle


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_acl(admin: httpx.Client, **fields: str) -> None:
    body = {"resource_type": "TOPIC", "operation": "READ", "permission_type": "ALLOW"} | fields
    response = admin.post("/api/acls", json=[body])
    assert response.status_code == 200 and response.json()["created"] == 1, response.text


def test_group_members_get_the_group_acls_at_once(console: ConsoleHandle, admin: httpx.Client) -> None:
    group, topic, user = unique("ops"), unique("orders"), f"User:{unique('alice')}"
    create_acl(admin, principal=f"Group:{group}", resource_name=topic)
    context, read = (
        RequestContext(user, "10.0.0.7"),
        Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, topic)),
    )
    assert console.services.authorizer.authorize_one(context, read).name == "DENIED"
    added = admin.post(f"/api/groups/{group}/members", json={"members": [user]})
    assert added.status_code == 200, added.text
    assert added.json() == {"name": group, "principal": f"Group:{group}", "members": [user]}
    assert console.services.authorizer.authorize_one(context, read).name == "ALLOWED"
    listed = admin.get("/api/groups").json()
    assert {"name": group, "principal": f"Group:{group}", "members": [user]} in listed["groups"]
    removed = admin.delete(f"/api/groups/Group:{group}/members/{user}")
    assert removed.status_code == 200 and removed.json()["members"] == []
    assert console.services.authorizer.authorize_one(context, read).name == "DENIED"


def test_bad_groups_and_members_are_422_with_what_to_fix(admin: httpx.Client) -> None:
    nested = admin.post("/api/groups/ops/members", json={"members": ["Group:admins"]})
    assert nested.status_code == 422 and "groups do not nest" in nested.json()["message"]
    star = admin.post("/api/groups/*/members", json={"members": ["User:alice"]})
    assert star.status_code == 422 and "'*' is not a group" in star.json()["message"]
    bad_principal = admin.post("/api/groups/ops/members", json={"members": ["alice"]})
    assert bad_principal.status_code == 422 and "members[0]" in bad_principal.json()["message"]
    empty = admin.post("/api/groups/ops/members", json={"members": []})
    assert empty.status_code == 422


def test_changing_groups_needs_alter_and_reading_them_describe(console: ConsoleHandle) -> None:
    with console.client(READER) as reader:
        assert reader.get("/api/groups").status_code == 200
        assert reader.post("/api/groups/ops/members", json={"members": ["User:x"]}).status_code == 403
        assert reader.delete("/api/groups/ops").status_code == 403


def test_who_can_and_what_can_name_the_acls_and_the_group(admin: httpx.Client) -> None:
    group, topic, user = unique("ops"), unique("audit"), f"User:{unique('carol')}"
    create_acl(admin, principal=f"Group:{group}", resource_name=topic, operation="WRITE")
    create_acl(admin, principal=user, resource_name=topic, host="10.0.0.0/8")
    assert admin.post(f"/api/groups/{group}/members", json={"members": [user]}).status_code == 200

    holders = admin.get("/api/access/resource", params={"resource_type": "TOPIC", "resource_name": topic})
    assert holders.status_code == 200, holders.text
    rows = {(h["principal"], h["host"]): h for h in holders.json()["holders"]}
    assert rows[(user, "*")]["via"] == [f"Group:{group}"] and "WRITE" in rows[(user, "*")]["allowed"]
    assert {"READ", "WRITE"} <= set(rows[(user, "10.0.0.0/8")]["allowed"])
    assert holders.json()["super_users"] == ["User:admin"]

    access = admin.get("/api/access/principal", params={"principal": user, "host": "10.1.2.3"})
    assert access.status_code == 200, access.text
    body = access.json()
    assert body["groups"] == [f"Group:{group}"]
    patterns = {(p["resource_name"], a["principal"]) for p in body["patterns"] for a in p["acls"]}
    assert {(topic, f"Group:{group}"), (topic, user)} <= patterns
    outside = admin.get("/api/access/principal", params={"principal": user, "host": "11.1.2.3"}).json()
    assert {a["host"] for p in outside["patterns"] for a in p["acls"]} == {"*"}


def test_access_queries_refuse_bad_parameters(admin: httpx.Client) -> None:
    bad = admin.get("/api/access/principal", params={"principal": "alice"})
    assert bad.status_code == 422 and "principal" in bad.json()["message"]
    bad_type = admin.get("/api/access/resource", params={"resource_type": "TOPICS", "resource_name": "x"})
    assert bad_type.status_code == 422 and "resource_type" in bad_type.json()["message"]

"""``/api/users`` over HTTP: KIP-554 semantics (set a password per mechanism, delete one or all mechanisms,
RESOURCE_NOT_FOUND), validation, and that no response ever carries a salt or a key."""

from __future__ import annotations

import base64
import uuid

import httpx
import pytest

from kafkaguard.model import AclOperation
from kafkaguard.scram import ScramMechanism
from tests.actors import ACTOR
from tests.console.conftest import ConsoleHandle, cluster_acl


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def credentials_of(admin: httpx.Client, name: str) -> list[dict[str, object]]:
    users = admin.get("/api/users").json()["users"]
    return next((u["credentials"] for u in users if u["name"] == name), [])


def test_set_a_password_then_log_in_with_it(console: ConsoleHandle, admin: httpx.Client) -> None:
    name = unique("carol")
    response = admin.put(f"/api/users/{name}", json={"password": "carol-pw", "mechanism": "SCRAM-SHA-512"})
    assert response.status_code == 200, response.text
    assert response.json() == {"name": name, "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
    response = admin.put(f"/api/users/{name}", json={"password": "carol-pw", "iterations": 4096})
    assert credentials_of(admin, name) == [
        {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
    ]
    # The credential is the store's: the same one a Kafka client's SCRAM login checks.
    stored = console.services.credentials.lookup(name, ScramMechanism.SCRAM_SHA_512)
    assert stored is not None and stored.iterations == 8192
    console.services.acls.create_acls([cluster_acl(f"User:{name}", AclOperation.DESCRIBE)], actor=ACTOR)
    with console.client(name, "carol-pw") as carol:
        assert carol.get("/api/users").status_code == 200
    with console.client(name, "not-carols") as carol:
        assert carol.get("/api/users").status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"password": "pw", "iterations": 4095}, "iterations"),
        ({"password": "pw", "iterations": 16385}, "iterations"),
        ({"password": "pw", "mechanism": "SCRAM-SHA-1"}, "mechanism"),
        ({"password": ""}, "password"),
        ({}, "password"),
        ({"password": "pw", "salt": "AAAA"}, "salt"),
    ],
)
def test_invalid_password_requests_are_422_naming_the_field(
    admin: httpx.Client, body: dict[str, object], field: str
) -> None:
    name = unique("invalid")
    response = admin.put(f"/api/users/{name}", json=body)
    assert response.status_code == 422
    assert response.json()["message"].startswith(f"{field}: ")
    assert credentials_of(admin, name) == []


def test_delete_one_mechanism_then_all(admin: httpx.Client) -> None:
    name = unique("dave")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert admin.put(f"/api/users/{name}", json={"password": "pw", "mechanism": mechanism}).status_code == 200
    response = admin.delete(f"/api/users/{name}", params={"mechanism": "SCRAM-SHA-256"})
    assert response.json() == {"name": name, "deleted": ["SCRAM-SHA-256"]}
    assert [c["mechanism"] for c in credentials_of(admin, name)] == ["SCRAM-SHA-512"]
    missing = admin.delete(f"/api/users/{name}", params={"mechanism": "SCRAM-SHA-256"})
    assert missing.status_code == 404
    assert missing.json()["detail"] == "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist"
    assert admin.delete(f"/api/users/{name}").json() == {"name": name, "deleted": ["SCRAM-SHA-512"]}
    assert credentials_of(admin, name) == []
    gone = admin.delete(f"/api/users/{name}")
    assert gone.status_code == 404
    assert "does not exist" in gone.json()["detail"]
    assert admin.delete(f"/api/users/{name}", params={"mechanism": "SHA-1"}).status_code == 422


def test_no_response_carries_a_salt_or_a_key(console: ConsoleHandle, admin: httpx.Client) -> None:
    name = unique("secretive")
    bodies = [
        admin.put(f"/api/users/{name}", json={"password": "pw", "mechanism": m}).text
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    ]
    bodies += [admin.get("/api/users").text, admin.get("/api/acls").text, admin.get("/metrics").text]
    bodies.append(admin.get("/openapi.json").text)
    secrets: list[str] = []
    for description in console.services.credentials.describe():
        for info in description.credentials:
            credential = console.services.credentials.lookup(description.user, info.mechanism)
            assert credential is not None
            for value in (credential.salt, credential.stored_key, credential.server_key):
                secrets += [base64.b64encode(value).decode(), value.hex(), base64.urlsafe_b64encode(value).decode()]
    assert len(secrets) > 20
    for body in bodies:
        for secret in secrets:
            assert secret not in body
        for word in ("stored_key", "server_key", "salted"):
            assert word not in body.lower()
    bodies.append(admin.delete(f"/api/users/{name}").text)
    assert all("salt" not in body.lower() for body in bodies[:3])

"""Authentication (HTTP Basic against the SCRAM credentials in the store) and authorization (the same authorizer,
CLUSTER DESCRIBE to read, CLUSTER ALTER to change): 401 with WWW-Authenticate, 403, both audited; the login cache
never outlives a password change."""

from __future__ import annotations

import base64
import json
import logging

import httpx
import pytest

from kafkaguard.model import AclOperation
from kafkaguard.scram import ScramMechanism
from kafkaguard.service.credentials import ScramDeletion
from tests.actors import ACTOR
from tests.console.conftest import ADMIN, NOBODY, READER, READER_PASSWORD, ConsoleHandle, cluster_acl

READS = [("GET", "/api/acls", None), ("GET", "/api/users", None)]
CHANGES = [
    (
        "POST",
        "/api/acls",
        {
            "principal": "User:x",
            "resource_type": "TOPIC",
            "resource_name": "t",
            "operation": "READ",
            "permission_type": "ALLOW",
        },
    ),
    ("DELETE", "/api/acls", {"resource_name": "nothing-here"}),
    ("PUT", "/api/users/someone", {"password": "pw-123456"}),
    ("DELETE", "/api/users/someone", None),
]
EXPLAIN = (
    "POST",
    "/api/authorize",
    {"principal": "User:x", "host": "1.2.3.4", "operation": "READ", "resource_type": "TOPIC", "resource_name": "t"},
)


def call(client: httpx.Client, method: str, path: str, body: object) -> httpx.Response:
    return client.request(method, path, json=body) if body is not None else client.request(method, path)


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "kafkaguard.audit"]


@pytest.mark.parametrize(("method", "path", "body"), [*READS, *CHANGES, EXPLAIN])
def test_no_credentials_is_401_with_www_authenticate_and_audited(
    console: ConsoleHandle, caplog: pytest.LogCaptureFixture, method: str, path: str, body: object
) -> None:
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    with console.client(None) as anonymous:
        response = call(anonymous, method, path, body)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Basic realm="kafkaguard", charset="UTF-8"'
    [line] = audit_lines(caplog)
    assert line["event"] == "AUTHENTICATION_FAILED" and line["user"] is None and line["host"] == "127.0.0.1"


@pytest.mark.parametrize(
    "header",
    [
        "Basic " + base64.b64encode(f"{ADMIN}:not-the-pw-42".encode()).decode(),
        "Basic " + base64.b64encode(b"no-such-user:whatever").decode(),
        "Basic " + base64.b64encode(f"{ADMIN}".encode()).decode(),  # no colon
        "Basic !!!not-base64!!!",
        "Bearer abc",
        "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),  # not UTF-8
    ],
    ids=["wrong-password", "unknown-user", "no-colon", "bad-base64", "other-scheme", "not-utf8"],
)
def test_bad_credentials_are_401(console: ConsoleHandle, caplog: pytest.LogCaptureFixture, header: str) -> None:
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    with console.client(None) as client:
        response = client.get("/api/acls", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Basic ")
    assert "not-the-pw-42" not in response.text  # the password is never echoed
    assert [line["event"] for line in audit_lines(caplog)] == ["AUTHENTICATION_FAILED"]


def test_the_web_page_gets_a_401_the_browser_does_not_prompt_for(console: ConsoleHandle) -> None:
    with console.client(None) as client:
        response = client.get("/api/acls", headers={"X-Kafkaguard-Console": "1"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("xBasic ")


@pytest.mark.parametrize(("method", "path", "body"), [*READS, *CHANGES, EXPLAIN])
def test_an_authenticated_user_without_acls_is_403_and_audited(
    console: ConsoleHandle, caplog: pytest.LogCaptureFixture, method: str, path: str, body: object
) -> None:
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    with console.client(NOBODY) as client:
        response = call(client, method, path, body)
    assert response.status_code == 403
    assert response.json() == {"detail": "not authorized"}  # as Kafka says it: no rule, no ACL
    [line] = audit_lines(caplog)
    assert line["principal"] == "User:nobody" and line["decision"] == "DENIED" and line["rule"] == "DefaultDeny"
    assert line["resource_type"] == "CLUSTER" and line["resource_name"] == "kafka-cluster"
    assert line["operation"] == ("DESCRIBE" if method == "GET" or path == "/api/authorize" else "ALTER")
    assert line["host"] == "127.0.0.1" and line["api"]


def test_describe_on_the_cluster_reads_but_does_not_change(console: ConsoleHandle) -> None:
    with console.client(READER) as reader:
        for method, path, body in [*READS, EXPLAIN]:
            assert call(reader, method, path, body).status_code == 200, path
        for method, path, body in CHANGES:
            assert call(reader, method, path, body).status_code == 403, path


def test_alter_on_the_cluster_changes_and_implies_describe(console: ConsoleHandle) -> None:
    console.add_user("operator", "operator-pw", (ScramMechanism.SCRAM_SHA_512,))
    console.services.acls.create_acls([cluster_acl("User:operator", AclOperation.ALTER)], actor=ACTOR)
    with console.client("operator", "operator-pw") as operator:
        assert operator.get("/api/acls").status_code == 200  # ALLOW ALTER implies DESCRIBE (SEMANTICS.md §3)
        response = operator.put("/api/users/made-by-operator", json={"password": "pw"})
        assert response.status_code == 200
        assert operator.delete("/api/users/made-by-operator").status_code == 200


def test_a_super_user_needs_no_acl(console: ConsoleHandle) -> None:
    with console.client(ADMIN) as admin:
        assert admin.get("/api/users").status_code == 200


def test_a_deny_acl_on_the_cluster_wins_and_only_the_audit_log_names_it(
    console: ConsoleHandle, caplog: pytest.LogCaptureFixture
) -> None:
    from kafkaguard.model import AccessControlEntry, AclBinding, AclPermissionType

    console.add_user("denied", "denied-pw")
    allow = cluster_acl("User:denied", AclOperation.DESCRIBE)
    deny = AclBinding(
        allow.pattern, AccessControlEntry("User:denied", "127.0.0.1", AclOperation.DESCRIBE, AclPermissionType.DENY)
    )
    [_, created] = console.services.acls.create_acls([allow, deny], actor=ACTOR)
    caplog.set_level(logging.INFO, "kafkaguard.audit")
    with console.client("denied", "denied-pw") as client:
        response = client.get("/api/acls")
    assert response.status_code == 403
    assert response.json() == {"detail": "not authorized"}
    for secret in ("MatchingAcl", "DENY", "127.0.0.1", str(created.acl_id)):
        assert secret not in response.text
    [line] = audit_lines(caplog)
    assert line["decision"] == "DENIED" and str(line["rule"]).startswith("MatchingAcl(")
    assert str(created.acl_id) in str(line["rule"])


def test_logins_are_cached_but_a_password_change_takes_effect_at_once(console: ConsoleHandle) -> None:
    console.add_user("cached", "first-pw", (ScramMechanism.SCRAM_SHA_256,))
    console.services.acls.create_acls([cluster_acl("User:cached", AclOperation.DESCRIBE)], actor=ACTOR)
    authenticator = console.console.app.state.console.authenticator
    before = authenticator.derivations
    with console.client("cached", "first-pw") as client:
        for _ in range(5):
            assert client.get("/api/acls").status_code == 200
    assert authenticator.derivations == before + 1  # PBKDF2 once, then the cache
    console.add_user("cached", "second-pw", (ScramMechanism.SCRAM_SHA_256,))
    with console.client("cached", "first-pw") as client:
        assert client.get("/api/acls").status_code == 401
    with console.client("cached", "second-pw") as client:
        assert client.get("/api/acls").status_code == 200
    console.services.credentials.alter(
        deletions=[ScramDeletion(user="cached", mechanism=ScramMechanism.SCRAM_SHA_256)], actor=ACTOR
    )
    with console.client("cached", "second-pw") as client:
        assert client.get("/api/acls").status_code == 401


def test_scram_sha_512_is_checked_when_the_user_has_it(console: ConsoleHandle) -> None:
    console.add_user("two-passwords", "pw-256", (ScramMechanism.SCRAM_SHA_256,))
    console.add_user("two-passwords", "pw-512", (ScramMechanism.SCRAM_SHA_512,))
    console.services.acls.create_acls([cluster_acl("User:two-passwords", AclOperation.DESCRIBE)], actor=ACTOR)
    with console.client("two-passwords", "pw-512") as client:
        assert client.get("/api/acls").status_code == 200
    with console.client("two-passwords", "pw-256") as client:
        assert client.get("/api/acls").status_code == 401


def test_a_non_ascii_password_works(console: ConsoleHandle) -> None:
    console.add_user("unicode", "pässwörd-€")
    console.services.acls.create_acls([cluster_acl("User:unicode", AclOperation.DESCRIBE)], actor=ACTOR)
    with console.client("unicode", "pässwörd-€") as client:
        assert client.get("/api/users").status_code == 200


def test_the_reader_password_is_never_in_a_response(console: ConsoleHandle) -> None:
    with console.client(READER) as client:
        for method, path, body in READS:
            assert READER_PASSWORD not in call(client, method, path, body).text

"""``/metrics`` (Prometheus text), ``/healthz``, the OpenAPI document, the web page, and the body limit."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx

from kafkaguard.console import MAX_BODY_BYTES
from tests.console.conftest import ADMIN, NOBODY, ConsoleHandle


def sample(text: str, name: str, labels: str = "") -> float:
    pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else "") + r" ([0-9.e+-]+)$"
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, f"{name}{{{labels}}} not in metrics"
    return float(found.group(1))


def test_metrics_change_after_requests(console: ConsoleHandle) -> None:
    with console.client(None) as anonymous:
        before = anonymous.get("/metrics")
        assert before.status_code == 200
        assert before.headers["content-type"].startswith("text/plain")
        with console.client(ADMIN) as admin:
            admin.post(
                "/api/acls",
                json={
                    "principal": "User:m",
                    "resource_type": "TOPIC",
                    "resource_name": "metered",
                    "operation": "READ",
                    "permission_type": "ALLOW",
                },
            )
        with console.client(ADMIN, "wrong") as wrong:
            assert wrong.get("/api/acls").status_code == 401
        with console.client(NOBODY) as nobody:
            assert nobody.get("/api/acls").status_code == 403
        after = anonymous.get("/metrics").text
    old = before.text
    assert (
        sample(after, "kafkaguard_console_logins_total", 'result="ok"')
        == sample(old, "kafkaguard_console_logins_total", 'result="ok"') + 2
    )
    assert (
        sample(after, "kafkaguard_console_logins_total", 'result="failed"')
        == sample(old, "kafkaguard_console_logins_total", 'result="failed"') + 1
    )
    for result in ("ALLOWED", "DENIED"):
        assert (
            sample(after, "kafkaguard_console_decisions_total", f'result="{result}"')
            == sample(old, "kafkaguard_console_decisions_total", f'result="{result}"') + 1
        )
    assert sample(after, "kafkaguard_acls") == console.services.authorizer.acl_count
    assert sample(after, "kafkaguard_console_request_duration_seconds_count", 'method="POST",route="/api/acls"') >= 1
    assert sample(after, "kafkaguard_console_request_duration_seconds_count", 'method="GET",route="/api/acls"') >= 2


def test_healthz_openapi_and_the_page_need_no_login(console: ConsoleHandle) -> None:
    with console.client(None) as anonymous:
        assert anonymous.get("/healthz").json() == {
            "status": "ok",
            "store": "ok",
            "acls": console.services.authorizer.acl_count,
            "enforcement": "enforcing",
            "shadow_acls": None,
        }
        spec = anonymous.get("/openapi.json").json()
        assert {"/api/acls", "/api/users", "/api/users/{name}", "/api/authorize", "/metrics", "/healthz"} <= set(
            spec["paths"]
        )
        assert spec["components"]["securitySchemes"]["_BasicScheme"]["scheme"] == "basic"
        page = anonymous.get("/")
        assert page.status_code == 200 and "kafkaguard console" in page.text
        assert anonymous.get("/static/app.js").status_code == 200
        assert anonymous.get("/static/style.css").status_code == 200


def test_a_body_above_the_limit_is_413(admin: httpx.Client) -> None:
    big = b"[" + b" " * MAX_BODY_BYTES + b"]"
    response = admin.post("/api/acls", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json() == {"detail": f"Request body too large: the limit is {MAX_BODY_BYTES} bytes"}

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while the body streams in
        yield b"["
        for _ in range(20):
            yield b" " * (MAX_BODY_BYTES // 10)
        yield b"]"

    response = admin.post("/api/acls", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "too large" in response.json()["detail"]
    # Just under the limit is parsed (and, being an empty list, creates nothing).
    fine = admin.post(
        "/api/acls", content=b"[" + b" " * (MAX_BODY_BYTES - 2) + b"]", headers={"Content-Type": "application/json"}
    )
    assert fine.json() == {"results": [], "created": 0, "failed": 0}


def test_a_server_without_an_upstream_exports_no_upstream_failures(console: ConsoleHandle) -> None:
    """``kafkaguard_upstream_failures_total`` is the proxy's (tests/deploy/test_dashboard_queries.py scrapes one): a
    series that can never move would read as "no failures" on a node that has no upstream."""
    with console.client(None) as anonymous:
        text = anonymous.get("/metrics").text
    assert "kafkaguard_upstream_failures" not in text
    assert "kafkaguard_broker_refusals" not in text  # passthrough's, the proxy's too
    assert "# TYPE kafkaguard_tls_certificate_expiry_seconds gauge" in text  # the family, empty without TLS listeners

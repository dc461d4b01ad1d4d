"""Browser-facing hardening: security headers on every response, no third-party Swagger UI in the console's
origin, and state-changing requests refused when a browser sends them from another origin (CSRF)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from kafkaguard.console import MAX_BODY_BYTES
from tests.console.conftest import ADMIN, ConsoleHandle

EXPECTED = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
BINDING = {
    "principal": "User:csrf",
    "resource_type": "TOPIC",
    "resource_name": "csrf-target",
    "operation": "READ",
    "permission_type": "ALLOW",
}


def csp_directives(response: httpx.Response) -> dict[str, set[str]]:
    policy = response.headers["content-security-policy"]
    directives: dict[str, set[str]] = {}
    for part in policy.split(";"):
        if part.strip():
            name, *values = part.split()
            directives[name] = set(values)
    return directives


def every_kind_of_response(console: ConsoleHandle) -> Iterator[tuple[str, httpx.Response]]:
    with console.client(None) as anonymous, console.client(ADMIN) as admin:
        yield "page", anonymous.get("/")
        yield "script", anonymous.get("/static/app.js")
        yield "stylesheet", anonymous.get("/static/style.css")
        yield "metrics", anonymous.get("/metrics")
        yield "openapi", anonymous.get("/openapi.json")
        yield "401", anonymous.get("/api/acls")
        yield "404", anonymous.get("/no-such-page")
        yield "api", admin.get("/api/acls")
        yield "422", admin.post("/api/acls", json={"principal": "nope"})
        yield "413", admin.post("/api/acls", content=b" " * (MAX_BODY_BYTES + 1))
        yield "csrf", admin.post("/api/acls", json=BINDING, headers={"Origin": "http://evil.example"})


def test_every_response_carries_the_security_headers(console: ConsoleHandle) -> None:
    for kind, response in every_kind_of_response(console):
        for name, value in EXPECTED.items():
            assert response.headers.get(name) == value, (kind, response.status_code, name)
        directives = csp_directives(response)
        assert directives["default-src"] == {"'none'"}, kind
        assert directives["script-src"] == {"'self'"}, kind  # no inline script, no CDN
        assert directives["style-src"] == {"'self'"}, kind
        assert directives["connect-src"] == {"'self'"}, kind
        assert directives["frame-ancestors"] == {"'none'"}, kind


def test_the_page_loads_its_script_and_style_from_its_own_origin(console: ConsoleHandle) -> None:
    """What the CSP allows is what the page uses: its own /static files, no inline script or style."""
    with console.client(None) as anonymous:
        page = anonymous.get("/").text
    assert '<script src="/static/app.js"' in page and 'href="/static/style.css"' in page
    assert "<script>" not in page and "<style" not in page and " style=" not in page and "://" not in page


def test_swagger_ui_and_redoc_are_off_but_the_openapi_document_stays(console: ConsoleHandle) -> None:
    with console.client(None) as anonymous:
        assert anonymous.get("/docs").status_code == 404
        assert anonymous.get("/docs/oauth2-redirect").status_code == 404
        assert anonymous.get("/redoc").status_code == 404
        spec = anonymous.get("/openapi.json")
    assert spec.status_code == 200 and "/api/acls" in spec.json()["paths"]


# --------------------------------------------------------------------------------------------------- CSRF


def created(console: ConsoleHandle, name: str) -> int:
    with console.client(ADMIN) as admin:
        return int(admin.get("/api/acls", params={"resource_name": name}).json()["count"])


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Sec-Fetch-Site": "cross-site"},
    ],
    ids=["other-origin", "null-origin", "sec-fetch-cross-site"],
)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_a_cross_origin_write_is_refused_with_a_clear_403(
    console: ConsoleHandle, method: str, headers: dict[str, str]
) -> None:
    path = {"POST": "/api/acls", "PUT": "/api/users/csrf-victim", "DELETE": "/api/acls", "PATCH": "/api/acls"}[method]
    body = {"POST": BINDING, "PUT": {"password": "pw-123456"}, "DELETE": BINDING, "PATCH": BINDING}[method]
    with console.client(ADMIN) as admin:
        response = admin.request(method, path, json=body, headers=headers)
    assert response.status_code == 403
    assert "cross-origin" in response.json()["detail"].lower() or "cross-site" in response.json()["detail"].lower()
    assert created(console, "csrf-target") == 0
    with console.client(ADMIN) as admin:
        assert "csrf-victim" not in [u["name"] for u in admin.get("/api/users").json()["users"]]


def test_a_cross_origin_port_on_the_same_host_is_another_origin(console: ConsoleHandle) -> None:
    other_port = console.url.rsplit(":", 1)[0] + ":1"
    with console.client(ADMIN) as admin:
        response = admin.post("/api/acls", json=BINDING, headers={"Origin": other_port})
    assert response.status_code == 403
    assert other_port in response.json()["detail"]


def test_same_origin_and_non_browser_writes_pass(console: ConsoleHandle) -> None:
    body = dict(BINDING, resource_name="csrf-same-origin")
    with console.client(ADMIN) as admin:
        same = admin.post("/api/acls", json=body, headers={"Origin": console.url, "Sec-Fetch-Site": "same-origin"})
        assert same.status_code == 200 and same.json()["created"] == 1
        plain = admin.post("/api/acls", json=dict(body, principal="User:curl"))  # curl, the CLI: no Origin
        assert plain.status_code == 200 and plain.json()["created"] == 1
        deleted = admin.request("DELETE", "/api/acls", json={"resource_name": "csrf-same-origin"},
                                headers={"Origin": console.url})  # fmt: skip
        assert deleted.status_code == 200 and deleted.json()["count"] == 2


def test_reads_are_not_refused_for_their_origin(console: ConsoleHandle) -> None:
    """Reads change nothing (and a cross-origin page cannot read the answer without CORS, which is off)."""
    with console.client(ADMIN) as admin:
        response = admin.get("/api/acls", headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers

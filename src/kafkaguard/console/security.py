"""Browser-facing hardening, as two small ASGI middlewares.

* ``SecurityHeaders`` puts ``SECURITY_HEADERS`` on every response that has none of its own: no framing
  (clickjacking), no MIME sniffing, no Referer, and a Content-Security-Policy under which the page may load its
  script and stylesheet from its own origin and talk only to it — no inline script, nothing from a CDN.
* ``SameOriginWrites`` refuses a state-changing request (POST, PUT, DELETE, PATCH) with 403 when a browser says it
  comes from elsewhere: an ``Origin`` that is not the console's own, or ``Sec-Fetch-Site: cross-site``. A browser
  that remembers Basic credentials for the console would otherwise send them along with a form or ``fetch`` from
  any page (CSRF). Clients that are not browsers send neither header and pass. Reads change nothing and are not
  checked; without CORS headers another origin cannot read their answers.

The console's own origin is the scheme of the request (``https`` only when a trusted proxy says so) with the
``Host`` header the client sent: a proxy in front of the console must pass ``Host`` through unchanged.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from starlette.datastructures import URL, Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
STATE_CHANGING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every HTTP response (a header the response sets itself is kept)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _origin_of(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin or URL, the port made explicit; None when it is not one (``null``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname or scheme not in _DEFAULT_PORTS:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def cross_origin_reason(scope: Scope) -> str | None:
    """Why a state-changing request must be refused as cross-origin, or None when it may pass."""
    headers = Headers(scope=scope)
    if headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
        return "Cross-site request refused: the browser sent it from another site (Sec-Fetch-Site: cross-site)"
    origin = headers.get("origin")
    if origin is None:
        return None
    url = URL(scope=scope)
    own = f"{url.scheme}://{url.netloc}"
    given = _origin_of(origin)
    if given is None or given != _origin_of(own):
        return f"Cross-origin request refused: Origin {origin[:200]!r} is not this console's origin {own!r}"
    return None


class SameOriginWrites:
    """403 for a state-changing request a browser sent from another origin (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in STATE_CHANGING:
            reason = cross_origin_reason(scope)
            if reason is not None:
                client = scope.get("client")
                log.info("refused %s %s from %s: %s", scope["method"], scope["path"], client and client[0], reason)
                await JSONResponse({"detail": reason}, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)

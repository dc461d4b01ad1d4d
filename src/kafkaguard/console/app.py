"""``create_app(services)``: the console's FastAPI application — routers, the one domain-error handler, the body
limit, metrics, the web page, and its hardening (security headers, the cross-origin write check, the client
address from trusted proxies only, bounded login work, refused logins answered at one fixed time). No
module-level app: each call builds a new one with its own metrics and its own PBKDF2 threads.

Swagger UI (``/docs``) and ReDoc are off: FastAPI loads them from a public CDN into the console's origin, where
they could read what the page can. ``/openapi.json`` stays, for any OpenAPI viewer elsewhere.

The app shares ``services`` with whoever built them: in ``kafkaguard serve --http-listener`` that is the Kafka
server in the same event loop, so a change through either is visible through the other at once. Alone
(``kafkaguard console``) it follows other processes' changes to the store with ``sync_store=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from kafkaguard.bootstrap import Services
from kafkaguard.console.dependencies import ConsoleState
from kafkaguard.console.failure_timing import RequestArrival
from kafkaguard.console.gate import LoginGate
from kafkaguard.console.item_errors import ItemRefusedError
from kafkaguard.console.metrics import ConsoleMetrics
from kafkaguard.console.routers import access, acls, authorize, denials, groups, health, history, users
from kafkaguard.console.security import SameOriginWrites, SecurityHeaders
from kafkaguard.errors import (
    AuthorizerNotReadyError,
    InvalidAclError,
    InvalidActionError,
    InvalidGroupError,
    InvalidNameError,
    KafkaguardError,
    ScramError,
)
from kafkaguard.following import follow_store
from kafkaguard.passwords.checker import PasswordChecker
from kafkaguard.passwords.throttle import DerivationPool
from kafkaguard.store.errors import StoreError

log = logging.getLogger(__name__)

#: Request bodies above this are refused with 413 before they are read in full.
MAX_BODY_BYTES = 1024 * 1024


def create_app(
    services: Services,
    *,
    sync_store: bool = False,
    max_body_bytes: int = MAX_BODY_BYTES,
    login_cache_seconds: float = 60.0,
) -> FastAPI:
    """The console over ``services``. With ``sync_store``, the lifespan polls the store for other processes'
    ACL changes every ``sync_interval_seconds`` (as the Kafka server does; not needed beside it)."""
    console = services.sections.console
    metrics = ConsoleMetrics(
        lambda: services.authorizer.acl_count,
        services.logins,
        services.refusals,
        services.audit_trail,
        services.rollout,
        services.refused,
        services.login_budget,
        services.jwks,
        services.tls,
        # the proxy's only: a server has no upstream, and a series that never moves would read as "all is well"
        services.upstream_failures if services.sections.proxy.servers else None,
        services.broker_refusals if services.sections.proxy.servers else None,
    )
    pool = DerivationPool(console.login_workers, console.login_max_pending, name="console-pbkdf2")
    # The process's one failed-login budget: a client failing on the Kafka listener beside it is failing here too.
    checker = PasswordChecker(
        services.credentials, pool, services.login_budget, mechanism="console", ttl_seconds=login_cache_seconds
    )
    state = ConsoleState(
        services=services,
        authenticator=checker,
        metrics=metrics,
        failure_seconds=console.login_failure_seconds,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        polls = (
            ("ACLs", services.acls.poll),
            ("principal groups", services.groups.poll),
            ("SCRAM credentials", services.credentials.poll),
        )
        task = asyncio.create_task(follow_store(services, polls), name="console-sync") if sync_store else None
        try:
            yield
        finally:
            pool.close()
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = FastAPI(
        title="kafkaguard console",
        version="1",
        summary="ACLs, SCRAM users and authorization decisions of a kafkaguard cluster.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.console = state
    for router in (
        acls.router,
        users.router,
        authorize.router,
        groups.router,
        access.router,
        history.router,
        denials.router,
        health.router,
    ):
        app.include_router(router)
    app.add_exception_handler(KafkaguardError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    static = resources.files("kafkaguard.console") / "static"
    page = (static / "index.html").read_text("utf-8")

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    # Added innermost first: each request passes RequestArrival (the clock of refused logins' fixed answer time
    # starts there), SecurityHeaders, then the proxy headers (which set the client address and scheme the rest
    # sees), the gate for throttled logins, timing, the cross-origin check, the body limit, then the routes.
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(SameOriginWrites)
    app.add_middleware(_Timing, metrics=metrics)
    app.add_middleware(LoginGate, state=state)
    if console.trusted_proxies:
        # uvicorn's own: the peer must be in trusted_proxies; then the right-most X-Forwarded-For entry that is not
        # a trusted proxy is the client. (The runner turns uvicorn's default, which trusts loopback, off.)
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(console.trusted_proxies))
    app.add_middleware(SecurityHeaders)
    app.add_middleware(RequestArrival)
    return app


# ------------------------------------------------------------------------------------------------- errors


def _status_for(error: KafkaguardError) -> int:
    if isinstance(error, ItemRefusedError):
        return error.status
    if isinstance(error, InvalidAclError | InvalidActionError | InvalidNameError | InvalidGroupError | ScramError):
        return 422
    if isinstance(error, AuthorizerNotReadyError | StoreError):
        return 503
    return 500


async def _domain_error(_request: Request, error: Exception) -> JSONResponse:
    """The one place a domain error becomes an HTTP status (messages carry no secrets by contract)."""
    assert isinstance(error, KafkaguardError)  # noqa: S101 - registered for KafkaguardError only
    status = _status_for(error)
    if status >= 500:
        log.error("console request failed: %s", error)
    if status == 422:  # the shape of every 422: FastAPI's list of errors, plus one readable line
        detail = [{"loc": ["body"], "msg": str(error), "type": "value_error"}]
        return JSONResponse({"detail": detail, "message": str(error)}, status_code=422)
    return JSONResponse({"detail": str(error)}, status_code=status)


def _location(loc: tuple[int | str, ...]) -> str:
    """``("body", "list", 0, "permission_type")`` → ``[0].permission_type``; ``("query", "host")`` → ``host``."""
    parts = [p for p in loc[1:] if p not in ("one", "list")] if loc and loc[0] in ("body", "query", "path") else loc
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


async def _validation_error(_request: Request, error: Exception) -> JSONResponse:
    """FastAPI's 422 body (``detail``: a list of errors) plus ``message``: one line naming each bad field."""
    assert isinstance(error, RequestValidationError)  # noqa: S101 - registered for RequestValidationError only
    details: list[dict[str, Any]] = []
    for item in error.errors():
        entry = {"loc": list(item.get("loc", ())), "msg": str(item.get("msg", "")), "type": str(item.get("type"))}
        details.append(entry)
    message = "; ".join(f"{_location(tuple(d['loc']))}: {d['msg']}" for d in details)
    return JSONResponse({"detail": details, "message": message}, status_code=422)


# --------------------------------------------------------------------------------------------- middleware


class _BodyLimit:
    """413 for a body above ``max_bytes``: at once when Content-Length says so, else as soon as the streamed
    body passes the limit (raised as an HTTPException while the route reads its body)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        detail = f"Request body too large: the limit is {self.max_bytes} bytes"
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    too_large = int(value) > self.max_bytes
                except ValueError:
                    too_large = False
                if too_large:
                    response = JSONResponse({"detail": detail}, status_code=413, headers={"Connection": "close"})
                    await response(scope, receive, send)
                    return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, detail)
            return message

        await self.app(scope, limited, send)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class _Timing:
    """Observes every HTTP request's latency under its route template (bounded label values)."""

    def __init__(self, app: ASGIApp, metrics: ConsoleMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)

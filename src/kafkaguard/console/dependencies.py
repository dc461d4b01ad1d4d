"""What the routers share: the app's state, and the dependency that authenticates and authorizes a request.

Every ``/api`` route names the Kafka API it stands for and that API's cluster check (``authorizer.requests``):
reading ACLs or users needs DESCRIBE on ``Cluster:kafka-cluster``, changing them ALTER, exactly as on the Kafka
protocol, decided by the same authorizer (so super users, DENY ACLs and ``allow.everyone.if.no.acl.found`` work
the same way). No credentials, or wrong ones → 401 with ``WWW-Authenticate``; not allowed → 403 saying only
"not authorized", as Kafka does (the deciding rule goes to the audit log, not to the caller); both audited. A 403 on
a change route is also a management event per item the request named (``console.refusals``, through
``service.refused``: bounded per request and per principal, stored on a worker thread before the 403 is sent). A login
that would need a PBKDF2 derivation the console cannot afford now → 429 with ``Retry-After``, counted in the
metrics but not audited (a flood of them would flood the audit log). 401s and 429s alike — no credentials,
malformed ones, an unknown user, a wrong password — are answered ``console_login_failure_seconds`` after the
request arrived (``kafkaguard.console.failure_timing``), so their timing tells nothing.

The caller's host is the client address uvicorn gives the app: the socket's peer, or, behind a proxy named in
``trusted_proxies``, what that proxy says (``create_app`` installs the one middleware that may change it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from starlette.requests import HTTPConnection
from starlette.types import Scope

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.console.audit import audit_authentication_failure, audit_decision
from kafkaguard.console.auth import Caller, parse_basic
from kafkaguard.console.failure_timing import wait_for_fixed_time
from kafkaguard.console.metrics import ConsoleMetrics
from kafkaguard.console.refusals import RefusedChange, RefusedRequest
from kafkaguard.model import (
    CLUSTER_NAME,
    Action,
    ItemError,
    KafkaErrorCode,
    PatternType,
    ResourcePattern,
    ResourceType,
    java_host,
)
from kafkaguard.passwords.checker import PasswordChecker
from kafkaguard.passwords.throttle import LoginThrottledError

REALM = "kafkaguard"
#: The web page sends this header; its 401s then carry a scheme browsers do not prompt for (``xBasic``), so the
#: page shows its own login form instead of the browser's dialog. Every other client gets ``Basic``.
PAGE_HEADER = "X-Kafkaguard-Console"

#: The whole body of every 403: which ACL or rule denied is for the audit log, not for the caller (Kafka's
#: CLUSTER_AUTHORIZATION_FAILED says no more).
NOT_AUTHORIZED = "not authorized"

_CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


@dataclass(frozen=True, slots=True)
class ConsoleState:
    services: Services
    authenticator: PasswordChecker
    metrics: ConsoleMetrics
    #: A refused login is answered this long after its request arrived (``console_login_failure_seconds``).
    failure_seconds: float


def state_of(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


async def console_state(request: Request) -> ConsoleState:
    """The app's state, as a dependency. Async on purpose: FastAPI runs a plain ``def`` dependency on its thread
    pool, a thread round trip for every request (a third of the event loop's time in a flood of refused logins)."""
    return state_of(request)


def client_host(connection: HTTPConnection) -> str:
    """The client's address as ACL hosts are compared with it (``java_host``)."""
    return java_host(connection.client.host if connection.client else "")


async def at_failure_time(state: ConsoleState, scope: Scope) -> None:
    """Wait until the fixed time after the request arrived at which every refused login is answered; a late one
    (its check outlasted the fixed time) is counted, never hurried."""
    if not await wait_for_fixed_time(scope, state.failure_seconds):
        state.metrics.late_failures.inc()


async def throttled(state: ConsoleState, error: LoginThrottledError, scope: Scope) -> dict[str, str]:
    """Count a login refused unchecked, wait as for a wrong password, and return the 429's headers.

    The wait is a timer, not work: without it a client looping on refusals would get its fastest loop, and the
    event loop it shares with the Kafka listener would spend itself on answering HTTP."""
    state.metrics.logins.labels("throttled").inc()
    await at_failure_time(state, scope)
    return {"Retry-After": str(error.retry_after_seconds)}


class _BasicScheme(HTTPBasic):
    """Declares HTTP Basic in the OpenAPI document; the header itself is parsed by ``parse_basic`` (UTF-8, where
    FastAPI's own parser accepts ASCII only)."""

    # FastAPI's HTTPBasic.__call__ itself ignores narrowing HTTPBase's return type; this override inherits that.
    async def __call__(self, request: HTTPConnection) -> HTTPBasicCredentials | None:  # type: ignore[override]
        return None


_basic_scheme = _BasicScheme(realm=REALM, auto_error=False, description="A SCRAM user's name and password.")


def _unauthorized(request: Request, reason: str) -> HTTPException:
    scheme = "xBasic" if request.headers.get(PAGE_HEADER) else "Basic"
    return HTTPException(401, reason, headers={"WWW-Authenticate": f'{scheme} realm="{REALM}", charset="UTF-8"'})


async def _record_refusal(
    state: ConsoleState, request: Request, caller: Caller, api: str, change: RefusedChange
) -> None:
    """The management events of a change refused with 403 (``console.refusals``), stored before the answer."""
    body: object = None
    if change.reads_body:
        try:
            body = await request.json()  # parsed by FastAPI before the dependencies ran: cached, not parsed again
        except ValueError:  # not JSON (FastAPI answers it 422 once authorized): no item to read from it
            body = None
    actor = caller.actor()
    error = ItemError(KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"Request {api} is not authorized.")
    items, event_of = change.describe(
        RefusedRequest(body, request.path_params, request.query_params, actor, error, state.services)
    )
    route = getattr(request.scope.get("route"), "path", request.url.path)
    refused = state.services.refused
    events = refused.events_for(actor, f"{request.method} {route}", items, event_of)
    if events:
        await asyncio.to_thread(refused.record, events)


def require(api: ApiKey, *, refused: RefusedChange | None = None) -> Callable[..., Awaitable[Caller]]:
    """The dependency of a route standing for Kafka API ``api``: authenticate, then check the API's cluster
    operation; returns the caller. ``refused``: the route is a change, and a 403 records the items it named."""
    requirement = REQUIREMENTS[api]
    check = requirement.cluster
    if check is None:  # pragma: no cover - the console's APIs all have a cluster check
        # A programming error when the routes are built (not a KafkaguardError: no request reaches this).
        raise ValueError(f"{api.api_name} has no cluster check")
    action = Action(check.operation, _CLUSTER)

    async def authorized_caller(request: Request, _scheme: Annotated[object, Depends(_basic_scheme)] = None) -> Caller:
        state = state_of(request)
        host = client_host(request)
        given = parse_basic(request.headers.get("authorization"))
        if given is None:
            audit_authentication_failure(None, host, requirement.name)
            await at_failure_time(state, request.scope)
            raise _unauthorized(request, "Authentication required: HTTP Basic with a SCRAM user's name and password")
        try:
            ok = await state.authenticator.authenticate(given.user, given.password, host)
        except LoginThrottledError as e:
            raise HTTPException(429, str(e), headers=await throttled(state, e, request.scope)) from None
        state.metrics.logins.labels("ok" if ok else "failed").inc()
        if not ok:
            audit_authentication_failure(given.user, host, requirement.name)
            await at_failure_time(state, request.scope)
            raise _unauthorized(request, "Authentication failed: unknown user or wrong password")
        caller = Caller(given.user, host)
        decision = state.services.authorizer.explain(caller.context, action)
        state.metrics.decisions.labels(decision.result.value).inc()
        audit_decision(decision, requirement.name)
        if not decision.allowed:
            if refused is not None:
                await _record_refusal(state, request, caller, requirement.name, refused)
            raise HTTPException(403, NOT_AUTHORIZED)
        return caller

    return authorized_caller

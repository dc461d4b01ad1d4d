"""What the routers share: the app's state, and the dependency that authenticates and authorizes a request.

Every ``/api`` route names the Kafka API it stands for and that API's cluster check (``authorizer.requests``):
reading ACLs or users needs DESCRIBE on ``Cluster:kafka-cluster``, changing them ALTER, exactly as on the Kafka
protocol, decided by the same authorizer (so super users, DENY ACLs and ``allow.everyone.if.no.acl.found`` work
the same way). No credentials, or wrong ones → 401 with ``WWW-Authenticate``; not allowed → 403; both audited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from starlette.requests import HTTPConnection

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.bootstrap import Services
from kafkaguard.console.audit import audit_authentication_failure, audit_decision
from kafkaguard.console.auth import BasicAuthenticator, Caller, parse_basic
from kafkaguard.console.metrics import ConsoleMetrics
from kafkaguard.model import CLUSTER_NAME, Action, PatternType, ResourcePattern, ResourceType, java_host

REALM = "kafkaguard"
#: The web page sends this header; its 401s then carry a scheme browsers do not prompt for (``xBasic``), so the
#: page shows its own login form instead of the browser's dialog. Every other client gets ``Basic``.
PAGE_HEADER = "X-Kafkaguard-Console"

_CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


@dataclass(frozen=True, slots=True)
class ConsoleState:
    services: Services
    authenticator: BasicAuthenticator
    metrics: ConsoleMetrics
    failure_delay_seconds: float


def console_state(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


class _BasicScheme(HTTPBasic):
    """Declares HTTP Basic in the OpenAPI document; the header itself is parsed by ``parse_basic`` (UTF-8, where
    FastAPI's own parser accepts ASCII only)."""

    async def __call__(self, request: HTTPConnection) -> HTTPBasicCredentials | None:  # type: ignore[override]
        return None


_basic_scheme = _BasicScheme(realm=REALM, auto_error=False, description="A SCRAM user's name and password.")


def _unauthorized(request: Request, reason: str) -> HTTPException:
    scheme = "xBasic" if request.headers.get(PAGE_HEADER) else "Basic"
    return HTTPException(401, reason, headers={"WWW-Authenticate": f'{scheme} realm="{REALM}", charset="UTF-8"'})


def require(api: ApiKey) -> Callable[..., Awaitable[Caller]]:
    """The dependency of a route standing for Kafka API ``api``: authenticate, then check the API's cluster
    operation; returns the caller."""
    requirement = REQUIREMENTS[api]
    check = requirement.cluster
    if check is None:  # pragma: no cover - the console's APIs all have a cluster check
        raise ValueError(f"{api.api_name} has no cluster check")
    action = Action(check.operation, _CLUSTER)

    async def authorized_caller(request: Request, _scheme: Annotated[object, Depends(_basic_scheme)] = None) -> Caller:
        state = console_state(request)
        host = java_host(request.client.host if request.client else "")
        given = parse_basic(request.headers.get("authorization"))
        if given is None:
            audit_authentication_failure(None, host, requirement.name)
            raise _unauthorized(request, "Authentication required: HTTP Basic with a SCRAM user's name and password")
        ok = await state.authenticator.authenticate(given.user, given.password)
        state.metrics.logins.labels("ok" if ok else "failed").inc()
        if not ok:
            audit_authentication_failure(given.user, host, requirement.name)
            await asyncio.sleep(state.failure_delay_seconds)
            raise _unauthorized(request, "Authentication failed: unknown user or wrong password")
        caller = Caller(given.user, host)
        decision = state.services.authorizer.explain(caller.context, action)
        state.metrics.decisions.labels(decision.result.value).inc()
        audit_decision(decision, requirement.name)
        if not decision.allowed:
            raise HTTPException(
                403,
                f"{caller.principal} is not authorized for {requirement.name}: it needs "
                f"{check.operation} on {_CLUSTER} ({decision.rule})",
            )
        return caller

    return authorized_caller

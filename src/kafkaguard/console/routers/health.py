"""``GET /healthz`` and ``GET /metrics`` (Prometheus text format); neither needs a login, neither shows secrets."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Response

from kafkaguard.console.dependencies import ConsoleState, console_state
from kafkaguard.console.schemas import HealthOut
from kafkaguard.store import StoreError

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=HealthOut,
    summary="Readiness, and whether the store answers",
    responses={503: {"model": HealthOut, "description": "Draining: a SIGTERM began the shutdown; send nothing new."}},
)
async def healthz(state: Annotated[ConsoleState, Depends(console_state)], response: Response) -> HealthOut:
    """200 while the process serves: ``status`` "ok", or "degraded" when the store cannot be reached (the
    node still authorizes from its last snapshot, writes fail with a retriable error, and it catches up by itself
    when the store returns). 503 with ``status`` "draining" from the first moment of a SIGTERM's drain
    (``service.readiness``): a balancer takes the node out, while its open connections finish. ``enforcement`` says
    "permissive" while a proxy in this process forwards what its ACLs deny, and ``shadow_acls`` how many ACLs a
    shadow set holds (``authorizer.rollout``)."""
    store = state.services.store
    if state.services.readiness.draining:
        # the store is not asked (its last known state is told): the answer is at once, and whatever the store says
        # nothing new is to be sent here
        response.status_code = 503
        response.headers["Connection"] = "close"
        return _health(state, status="draining", store="ok" if store.healthy() else "unreachable")
    health = partial(_health, state)
    if not store.healthy():
        return health(status="degraded", store="unreachable")
    try:
        await asyncio.to_thread(store.acl_version)
    except StoreError:
        return health(status="degraded", store="unreachable")
    return health(status="ok", store="ok")


def _health(
    state: ConsoleState,
    *,
    status: Literal["ok", "degraded", "draining"],
    store: Literal["ok", "unreachable"],
) -> HealthOut:
    rollout = state.services.rollout
    return HealthOut(
        status=status,
        store=store,
        acls=state.services.authorizer.acl_count,
        shadow_acls=None if rollout.shadow is None else rollout.shadow.acl_count,
        enforcement="permissive" if rollout.permissive else "enforcing",
    )


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(state: Annotated[ConsoleState, Depends(console_state)]) -> Response:
    return Response(state.metrics.render(), media_type=state.metrics.content_type)

"""``GET /healthz`` and ``GET /metrics`` (Prometheus text format); neither needs a login, neither shows secrets."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Response

from kafkaguard.console.dependencies import ConsoleState, console_state
from kafkaguard.console.schemas import HealthOut
from kafkaguard.store import StoreError

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut, summary="Liveness, and whether the store answers")
async def healthz(state: Annotated[ConsoleState, Depends(console_state)]) -> HealthOut:
    """Always 200 while the process serves: ``status`` "ok", or "degraded" when the store cannot be reached (the
    node still authorizes from its last snapshot, writes fail with a retriable error, and it catches up by itself
    when the store returns). ``enforcement`` says "permissive" while a proxy in this process forwards what its ACLs
    deny, and ``shadow_acls`` how many ACLs a shadow set holds (``authorizer.rollout``)."""
    store = state.services.store
    rollout = state.services.rollout
    shadow = None if rollout.shadow is None else rollout.shadow.acl_count
    health = partial(
        HealthOut,
        acls=state.services.authorizer.acl_count,
        shadow_acls=shadow,
        enforcement="permissive" if rollout.permissive else "enforcing",
    )
    if not store.healthy():
        return health(status="degraded", store="unreachable")
    try:
        await asyncio.to_thread(store.acl_version)
    except StoreError:
        return health(status="degraded", store="unreachable")
    return health(status="ok", store="ok")


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(state: Annotated[ConsoleState, Depends(console_state)]) -> Response:
    return Response(state.metrics.render(), media_type=state.metrics.content_type)

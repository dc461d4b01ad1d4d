"""``GET /healthz`` and ``GET /metrics`` (Prometheus text format); neither needs a login, neither shows secrets."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Response

from kafkaguard.console.dependencies import ConsoleState, console_state
from kafkaguard.console.schemas import HealthOut

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut, summary="Liveness: the store answers")
async def healthz(state: Annotated[ConsoleState, Depends(console_state)]) -> HealthOut:
    """200 when the store can be read (a StoreError becomes 503)."""
    await asyncio.to_thread(state.services.store.acl_version)
    return HealthOut(status="ok", acls=state.services.authorizer.acl_count)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(state: Annotated[ConsoleState, Depends(console_state)]) -> Response:
    return Response(state.metrics.render(), media_type=state.metrics.content_type)

"""``/api/history``: the management history — who changed ACLs, SCRAM users, groups, quotas and topics, when, from
where and through which door — newest first, from the store (so every console of a shared store shows every node's
changes). It says who administers what from where, so it needs what changing ACLs needs (ALTER on the cluster)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.schemas import ErrorOut, HistoryEventOut, HistoryFilterIn, HistoryOut

router = APIRouter(
    prefix="/api/history",
    tags=["history"],
    responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 429: {"model": ErrorOut}},
)


@router.get("", response_model=HistoryOut, summary="Who changed what, newest first")
def list_history(
    filters: Annotated[HistoryFilterIn, Query()],
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.CREATE_ACLS))],
) -> HistoryOut:
    """Management events matching the filters (each optional), newest first. A sync route: FastAPI runs it on a
    worker thread, so the store read never holds the event loop."""
    events = state.services.store.read_history(filters.to_query())
    return HistoryOut(events=[HistoryEventOut.of(event) for event in events], count=len(events))

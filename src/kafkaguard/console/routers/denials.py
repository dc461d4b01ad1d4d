"""``/api/denials``: the recent denials of this node's audit log — DENIED decisions, a permissive proxy's would-be
denials and shadow flips — newest first, read from the end of the ``audit_log`` file (``audit.records.recent``: at most
``TAIL_BYTES`` of it, never the whole log). The file is the settings' only; nothing in the request names a path.

The audit log says who asked for what, from where, and the answer (its files are readable by their owner only), so
reading it needs what the management history needs: ALTER on the cluster. A node without an ``audit_log`` answers
``configured: false`` with a message saying so (its trail may go to Kafka only), never an error.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query

from kafkaguard.audit.records.recent import TAIL_BYTES, RecentDecision, recent_decisions
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.schemas import DenialOut, DenialsFilterIn, DenialsOut, ErrorOut

router = APIRouter(
    prefix="/api/denials",
    tags=["denials"],
    responses={
        401: {"model": ErrorOut},
        403: {"model": ErrorOut},
        429: {"model": ErrorOut},
        503: {"model": ErrorOut, "description": "The audit log exists but cannot be read."},
    },
)

NOT_CONFIGURED = (
    "No audit log file is configured on this node (audit_log): there is nothing to list here. Set audit_log in the "
    "server's settings to see its denials, permissive would-be denials and shadow flips."
)


@router.get("", response_model=DenialsOut, summary="Recent denials, would-be denials and shadow flips, newest first")
def list_denials(
    filters: Annotated[DenialsFilterIn, Query()],
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.CREATE_ACLS))],
) -> DenialsOut:
    """The newest decisions of the audit log that denied (or would deny, or a candidate ACL set would flip), of one
    principal when given. A sync route: FastAPI runs it on a worker thread, so reading the file never holds the
    event loop."""
    path = state.services.sections.audit.log
    if path is None:
        kafka = state.services.sections.audit.kafka is not None
        why = NOT_CONFIGURED + (" (This node's audit trail goes to a Kafka topic only.)" if kafka else "")
        return DenialsOut(configured=False, message=why, denials=[], count=0, read_bytes=0, complete=True)
    try:
        found = recent_decisions(path, limit=filters.limit, principal=filters.principal, max_bytes=TAIL_BYTES)
    except OSError as e:
        # the reason only (permission denied ...): the file's path is the settings', not the caller's business
        raise HTTPException(503, f"cannot read the audit log: {e.strerror or type(e).__name__}") from None
    message: str | None = None
    if not found.decisions:
        message = "No denial in the audit log" + ("" if found.complete else f" (its last {TAIL_BYTES >> 20} MiB)")
        message += "." if filters.principal is None else f" for {filters.principal}."
    elif not found.complete and len(found.decisions) < filters.limit:
        message = f"Only the last {TAIL_BYTES >> 20} MiB of the audit log were read: older decisions are not listed."
    denials = [_out(d) for d in found.decisions]
    return DenialsOut(
        configured=True,
        message=message,
        denials=denials,
        count=len(denials),
        read_bytes=found.read_bytes,
        complete=found.complete,
    )


def _out(decision: RecentDecision) -> DenialOut:
    return DenialOut(
        kind=decision.kind,
        time=decision.time,
        last_time=decision.last_time,
        count=decision.count,
        principal=decision.principal,
        host=decision.host,
        api=decision.api,
        operation=decision.operation,
        resource_type=decision.resource_type,
        resource_name=decision.resource_name,
        decision=decision.decision,
        rule=decision.rule,
        shadow_decision=decision.shadow_decision,
        shadow_rule=decision.shadow_rule,
        broker_error=decision.broker_error,
        explanation=decision.explanation,
    )

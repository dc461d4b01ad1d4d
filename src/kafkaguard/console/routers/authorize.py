"""``POST /api/authorize``: "why was X denied?" — the decision, the deciding rule and every matching ACL."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.schemas import AuthorizeIn, AuthorizeOut, ErrorOut
from kafkaguard.model import Action, PatternType, RequestContext, ResourcePattern

router = APIRouter(
    prefix="/api",
    tags=["authorize"],
    responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 429: {"model": ErrorOut}},
)


@router.post("/authorize", response_model=AuthorizeOut, summary="Explain an authorization decision")
def explain(
    body: AuthorizeIn,
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.DESCRIBE_ACLS))],
) -> AuthorizeOut:
    """Ask the authorizer, as the Kafka server would for a request from ``principal`` at ``host``, and say why:
    the deciding rule (super user, a matching ACL, or the default rule) and every ACL that matched, ALLOW and
    DENY. Reveals ACLs, so it needs what listing them needs (DESCRIBE on the cluster). Nothing is audited or
    counted as a decision of the principal asked about: this is a question, not an access."""
    state.services.acls.poll()
    action = Action(body.operation, ResourcePattern(body.resource_type, body.resource_name, PatternType.LITERAL))
    return AuthorizeOut.of(state.services.authorizer.explain(RequestContext(body.principal, body.host), action))

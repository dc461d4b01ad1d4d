"""``/api/access``: who can do what (``authorizer.access``). Reveals ACLs, so it needs what listing them needs
(DESCRIBE on the cluster). Every allowed/denied operation is a decision of the authorizer on its current snapshot."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from kafkaguard.authorizer.access import Decided, access_of, who_can
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.schemas import (
    AclOut,
    DecidedOut,
    ErrorOut,
    HolderOut,
    PatternAccessOut,
    Principal,
    PrincipalAccessOut,
    ResourceHoldersOut,
    ResourceTypeName,
    Text,
)

router = APIRouter(
    prefix="/api/access",
    tags=["access"],
    responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 429: {"model": ErrorOut}},
)


def _decided(decided: Decided) -> DecidedOut:
    return DecidedOut(
        resource_type=decided.resource.resource_type.name,
        resource_name=decided.resource.name,
        allowed=[op.name for op in decided.allowed],
        denied=[op.name for op in decided.denied],
    )


@router.get("/principal", response_model=PrincipalAccessOut, summary="What can a principal do?")
def principal_access(
    principal: Annotated[Principal, Query(description="e.g. User:alice")],
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.DESCRIBE_ACLS))],
    host: Annotated[Text | None, Query(description="The client's address; default: any.")] = None,
) -> PrincipalAccessOut:
    """Every resource pattern the principal's ACLs (its own, User:*'s, its groups') name, with the operations they
    allow and deny and the ACLs; and every topic of the server's catalog they reach, decided. Without a host, the
    decisions are for an address no host-specific ACL names."""
    services = state.services
    services.acls.poll()
    services.groups.poll()
    answer = access_of(services.authorizer.snapshot, principal, host, services.topics.catalog.by_name)
    return PrincipalAccessOut(
        principal=answer.principal,
        host=answer.host,
        super_user=answer.super_user,
        groups=list(answer.groups),
        patterns=[
            PatternAccessOut(
                resource_type=p.pattern.resource_type.name,
                resource_name=p.pattern.name,
                pattern_type=p.pattern.pattern_type.name,
                allows=[op.name for op in p.allows],
                denies=[op.name for op in p.denies],
                acls=[AclOut.stored(acl) for acl in p.acls],
            )
            for p in answer.patterns
        ],
        topics=[_decided(d) for d in answer.resources],
    )


@router.get("/resource", response_model=ResourceHoldersOut, summary="Who can act on a resource?")
def resource_holders(
    resource_type: Annotated[ResourceTypeName, Query(description="TOPIC, GROUP, CLUSTER, ...")],
    resource_name: Annotated[Text, Query(description="The concrete resource name.")],
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.DESCRIBE_ACLS))],
) -> ResourceHoldersOut:
    """The super users, and every principal and host the ACLs relevant to the resource name (groups expanded to
    their members, User:* as any principal), with the operations decided ALLOWED and DENIED for each."""
    services = state.services
    services.acls.poll()
    services.groups.poll()
    answer = who_can(services.authorizer.snapshot, resource_type, resource_name)
    return ResourceHoldersOut(
        resource_type=answer.resource.resource_type.name,
        resource_name=answer.resource.name,
        super_users=list(answer.super_users),
        holders=[
            HolderOut(
                principal=h.principal,
                host=h.host,
                via=list(h.via),
                allowed=[op.name for op in h.decided.allowed],
                denied=[op.name for op in h.decided.denied],
                acls=[AclOut.stored(acl) for acl in h.acls],
            )
            for h in answer.holders
        ],
    )

"""``/api/acls``: list (filters with Kafka's semantics), create (one binding or a list), delete (by filter)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, HTTPException, Query
from pydantic import Discriminator, Tag

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console import refusals
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.item_errors import raise_for
from kafkaguard.console.schemas import (
    AclBindingIn,
    AclCreateOut,
    AclCreateResultOut,
    AclDeleteOut,
    AclFilterIn,
    AclListOut,
    AclOut,
    ErrorOut,
)
from kafkaguard.model import AclBindingFilter

router = APIRouter(
    prefix="/api/acls",
    tags=["acls"],
    responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 429: {"model": ErrorOut}},
)


def _shape(value: object) -> str:
    return "list" if isinstance(value, list) else "one"


OneOrMany = Annotated[
    Annotated[AclBindingIn, Tag("one")] | Annotated[list[AclBindingIn], Tag("list")],
    Discriminator(_shape),
]


@router.get("", response_model=AclListOut, summary="List ACLs matching a filter")
def list_acls(
    filters: Annotated[AclFilterIn, Query()],
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.DESCRIBE_ACLS))],
) -> AclListOut:
    """Every ACL the filter matches (DescribeAcls; needs DESCRIBE on the cluster). No parameters: every ACL."""
    acls = state.services.acls.describe_acls(filters.to_filter())
    rows = sorted((AclOut.stored(acl) for acl in acls), key=_order)
    return AclListOut(acls=rows, count=len(rows))


@router.post("", response_model=AclCreateOut, summary="Create one ACL or a list of ACLs")
def create_acls(
    body: Annotated[OneOrMany, Body()],
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.CREATE_ACLS, refused=refusals.ACL_CREATIONS))],
) -> AclCreateOut:
    """CreateAcls (needs ALTER on the cluster): one result per binding, in order. A binding Kafka would refuse
    (CLUSTER not named kafka-cluster, empty name, principal not ``Type:Name``) fails alone with Kafka's
    message; creating an ACL that exists succeeds and stores nothing new."""
    items = body if isinstance(body, list) else [body]
    results = state.services.acls.create_acls([item.to_binding() for item in items], actor=caller.actor())
    out = [
        AclCreateResultOut(
            ok=result.succeeded,
            acl=AclOut.of(result.binding, result.acl_id),
            error=str(result.error) if result.error is not None else None,
        )
        for result in results
    ]
    created = sum(1 for result in out if result.ok)
    return AclCreateOut(results=out, created=created, failed=len(out) - created)


@router.delete(
    "",
    response_model=AclDeleteOut,
    summary="Delete every ACL matching a filter",
    responses={400: {"model": ErrorOut}},
)
def delete_acls(
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.DELETE_ACLS, refused=refusals.ACL_DELETION))],
    acl_filter: Annotated[AclFilterIn | None, Body()] = None,
    delete_all: Annotated[
        bool, Query(alias="all", description="Needed to delete with an empty filter (every ACL).")
    ] = False,
) -> AclDeleteOut:
    """DeleteAcls with one filter (needs ALTER on the cluster); returns what was deleted. A filter that matches
    every ACL (no body, or every field omitted or ANY) is refused unless ``?all=true`` is given. Beware
    pattern_type MATCH: it deletes every ACL that applies to the named resource, wildcards and prefixes included."""
    chosen = (acl_filter or AclFilterIn()).to_filter()
    if chosen == AclBindingFilter.ANY and not delete_all:
        raise HTTPException(400, "The filter is empty and would delete every ACL; give ?all=true to do that.")
    result = state.services.acls.delete_acls([chosen], actor=caller.actor())[0]
    raise_for(result.error)  # unreachable: this schema admits no UNKNOWN codes; answered as any refused item
    deleted = sorted((AclOut.stored(acl) for acl in result.removed_acls), key=_order)
    return AclDeleteOut(deleted=deleted, count=len(deleted))


def _order(acl: AclOut) -> tuple[str, ...]:
    return (
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )

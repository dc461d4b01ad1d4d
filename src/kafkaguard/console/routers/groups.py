"""``/api/groups``: principal groups (kafkaguard's, beyond Kafka). Listing needs what listing ACLs needs (DESCRIBE
on the cluster); changing a group changes what its ACLs grant, so it needs what creating ACLs needs (ALTER)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console import refusals
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.schemas import ErrorOut, GroupListOut, GroupOut, MembersIn, Principal, Text
from kafkaguard.model.group import group_name

router = APIRouter(
    prefix="/api/groups",
    tags=["groups"],
    responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 429: {"model": ErrorOut}},
)

GroupName = Annotated[Text, Path(description="The group's name (ops), or its principal (Group:ops).")]


def _group(state: ConsoleState, name: str) -> GroupOut:
    stored = group_name(name)
    members = state.services.groups.groups().get(stored, ())
    return GroupOut(name=stored, principal=f"Group:{stored}", members=list(members))


@router.get("", response_model=GroupListOut, summary="List principal groups")
def list_groups(
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.DESCRIBE_ACLS))],
) -> GroupListOut:
    """Every group with its members (a group exists while it has members)."""
    state.services.groups.poll()
    groups = [
        GroupOut(name=name, principal=f"Group:{name}", members=list(members))
        for name, members in state.services.groups.groups().items()
    ]
    return GroupListOut(groups=groups, count=len(groups))


@router.post("/{name}/members", response_model=GroupOut, summary="Add members to a group")
def add_members(
    name: GroupName,
    body: MembersIn,
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.CREATE_ACLS, refused=refusals.MEMBER_ADDITIONS))],
) -> GroupOut:
    """Add principals (creating the group). Refused with 422 and what to fix: a bad group name, ``User:*``, or a
    group as a member (groups do not nest)."""
    state.services.groups.add_members(name, body.members, actor=caller.actor())
    return _group(state, name)


@router.delete("/{name}/members/{principal}", response_model=GroupOut, summary="Remove a member from a group")
def remove_member(
    name: GroupName,
    principal: Annotated[Principal, Path()],
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.DELETE_ACLS, refused=refusals.MEMBER_REMOVAL))],
) -> GroupOut:
    """Remove one principal (a principal not in the group is no error); returns the group afterwards."""
    state.services.groups.remove_members(name, [principal], actor=caller.actor())
    return _group(state, name)


@router.delete("/{name}", response_model=GroupOut, summary="Remove every member of a group")
def delete_group(
    name: GroupName,
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.DELETE_ACLS, refused=refusals.GROUP_DELETION))],
) -> GroupOut:
    """Remove every member; returns the members it had. The group's ACLs stay and apply to no one."""
    removed = state.services.groups.delete_group(name, actor=caller.actor())
    return GroupOut(name=group_name(name), principal=f"Group:{group_name(name)}", members=list(removed))

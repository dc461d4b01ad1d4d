"""``/api/users``: SCRAM users (KIP-554): list, set a password, delete. Never a salt or a key in a response."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.console import refusals
from kafkaguard.console.auth import Caller
from kafkaguard.console.dependencies import ConsoleState, console_state, require
from kafkaguard.console.item_errors import raise_for
from kafkaguard.console.schemas import (
    CredentialOut,
    ErrorOut,
    MechanismName,
    PasswordIn,
    Text,
    UserDeletedOut,
    UserListOut,
    UserOut,
)
from kafkaguard.scram import ScramMechanism
from kafkaguard.service.credentials import ScramDeletion

router = APIRouter(
    prefix="/api/users",
    tags=["users"],
    responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, 429: {"model": ErrorOut}},
)

UserName = Annotated[Text, Path(min_length=1, description="The user name (principal User:<name>).")]


def _mechanism_name(mechanism: ScramMechanism) -> MechanismName:
    return "SCRAM-SHA-512" if mechanism is ScramMechanism.SCRAM_SHA_512 else "SCRAM-SHA-256"


@router.get("", response_model=UserListOut, summary="List SCRAM users")
def list_users(
    state: Annotated[ConsoleState, Depends(console_state)],
    _caller: Annotated[Caller, Depends(require(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS))],
) -> UserListOut:
    """DescribeUserScramCredentials for every user (needs DESCRIBE on the cluster): mechanisms and iterations."""
    users = [
        UserOut(
            name=description.user,
            credentials=[
                CredentialOut(mechanism=_mechanism_name(info.mechanism), iterations=info.iterations)
                for info in description.credentials
            ],
        )
        for description in state.services.credentials.describe()
    ]
    return UserListOut(users=users, count=len(users))


@router.put(
    "/{name}",
    response_model=UserOut,
    summary="Set a user's password for one mechanism",
)
def set_password(
    name: UserName,
    body: PasswordIn,
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, refused=refusals.PASSWORD))],
) -> UserOut:
    """AlterUserScramCredentials upsertion (needs ALTER on the cluster). The server draws a random salt and
    derives the keys; the password is not stored. Returns the user's credentials afterwards."""
    mechanism = ScramMechanism.from_name(body.mechanism)
    result = state.services.credentials.upsert_password(
        name, mechanism, body.password.get_secret_value(), body.iterations, actor=caller.actor()
    )
    raise_for(result.error)
    return _describe_one(state, name)


@router.delete(
    "/{name}",
    response_model=UserDeletedOut,
    summary="Delete a user's credentials",
    responses={404: {"model": ErrorOut}},
)
def delete_user(
    name: UserName,
    state: Annotated[ConsoleState, Depends(console_state)],
    caller: Annotated[Caller, Depends(require(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, refused=refusals.USER_DELETION))],
    mechanism: Annotated[MechanismName | None, Query(description="Only this mechanism (default: all).")] = None,
) -> UserDeletedOut:
    """AlterUserScramCredentials deletions (needs ALTER on the cluster): the named mechanism, or every mechanism
    the user has. Deleting what does not exist is a 404 with Kafka's message."""
    if mechanism is not None:
        chosen = [ScramMechanism.from_name(mechanism)]
    else:
        description = state.services.credentials.describe([name])[0]
        chosen = [info.mechanism for info in description.credentials]
        raise_for(description.error)
    deletions = [ScramDeletion(user=name, mechanism=m) for m in chosen]
    result = state.services.credentials.alter(deletions=deletions, actor=caller.actor())[0]
    raise_for(result.error)
    return UserDeletedOut(name=name, deleted=[_mechanism_name(m) for m in chosen])


def _describe_one(state: ConsoleState, name: str) -> UserOut:
    description = state.services.credentials.describe([name])[0]
    return UserOut(
        name=name,
        credentials=[
            CredentialOut(mechanism=_mechanism_name(info.mechanism), iterations=info.iterations)
            for info in description.credentials
        ],
    )

"""DescribeUserScramCredentials and AlterUserScramCredentials (API keys 50, 51), KIP-554 as SEMANTICS.md §11.3,
§11.4 and §16.5–§16.6 describe them. Only mechanisms and iteration counts ever leave the server.

A refused AlterUserScramCredentials is recorded in the management history (``service.refused``): a
``scram.deleted`` or ``scram.upserted`` event per deletion and upsertion as sent (user, mechanism, iterations; never
the salt or salted password it carried), bounded per request and per principal; the answer is the same either way."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ItemError, KafkaErrorCode
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.builders import (
    alter_user_scram_credentials_response,
    alter_user_scram_credentials_result,
    credential_info,
    describe_user_scram_credentials_response,
    describe_user_scram_credentials_result,
)
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkaguard.protocol.scope import RequestScope
from kafkaguard.protocol.wire_errors import error_fields
from kafkaguard.service.credentials import ScramDeletion, ScramUpsertion, mechanism_name
from kafkaguard.service.events import scram_event


async def describe_user_scram_credentials(
    scope: RequestScope, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    cls: type[DescribeUserScramCredentialsResponse] = response_schema(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, scope.api_version
    )
    names = [user.name for user in request.users] if request.users else None
    if not scope.authorize(REQUIREMENTS[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS]).request_allowed:
        # Kafka: top-level error with a null message, and one result per requested user without its name.
        results = tuple(
            describe_user_scram_credentials_result(
                cls,
                user="",
                error_code=ErrorCode.cluster_authorization_failed,
                error_message=None,
                credential_infos=(),
            )
            for _ in names or ()
        )
        return describe_user_scram_credentials_response(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            results=results,
        )
    descriptions = await asyncio.to_thread(scope.services.credentials.describe, names)
    results = tuple(
        describe_user_scram_credentials_result(
            cls,
            user=description.user,
            # Kafka's generated classes default a nullable string to "": a success carries "", not null.
            **error_fields(description.error, on_success=""),
            credential_infos=tuple(
                credential_info(cls, mechanism=info.mechanism.code, iterations=info.iterations)
                for info in description.credentials
            ),
        )
        for description in descriptions
    )
    return describe_user_scram_credentials_response(
        cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message="", results=results
    )


async def alter_user_scram_credentials(
    scope: RequestScope, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    cls: type[AlterUserScramCredentialsResponse] = response_schema(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, scope.api_version
    )
    if not scope.authorize(REQUIREMENTS[ApiKey.ALTER_USER_SCRAM_CREDENTIALS]).request_allowed:
        # Kafka: one result per distinct user named, sorted by name, all with the same error.
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        denied = ItemError(
            KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"Request {ApiKey.ALTER_USER_SCRAM_CREDENTIALS.api_name} is not authorized.",
        )
        actor = scope.actor()
        # (user, mechanism, iterations): what an event may say of an item; None iterations for a deletion.
        items = [(d.name, int(d.mechanism), None) for d in request.deletions] + [
            (u.name, int(u.mechanism), int(u.iterations)) for u in request.upsertions
        ]
        await scope.refuse(
            items,
            lambda item: scram_event(
                "scram.deleted" if item[2] is None else "scram.upserted",
                actor,
                item[0],
                mechanism_name(item[1]),
                item[2],
                denied,
            ),
        )
        results = tuple(alter_user_scram_credentials_result(cls, user=user, **error_fields(denied)) for user in users)
        return alter_user_scram_credentials_response(cls, throttle_time=NO_THROTTLE, results=results)
    deletions = [ScramDeletion(user=d.name, mechanism=int(d.mechanism)) for d in request.deletions]
    upsertions = [
        ScramUpsertion(
            user=u.name,
            mechanism=int(u.mechanism),
            iterations=int(u.iterations),
            salt=bytes(u.salt),
            salted_password=bytes(u.salted_password),
        )
        for u in request.upsertions
    ]
    outcomes = await asyncio.to_thread(scope.services.credentials.alter, deletions, upsertions, actor=scope.actor())
    results = tuple(
        alter_user_scram_credentials_result(
            cls,
            user=outcome.user,
            **error_fields(outcome.error),
        )
        for outcome in outcomes
    )
    return alter_user_scram_credentials_response(cls, throttle_time=NO_THROTTLE, results=results)

"""DescribeClientQuotas and AlterClientQuotas (API keys 48, 49; KIP-546), as Kafka 3.9's KRaft broker and controller
answer them (see ``service.quotas``). Describe answers from the quota service's in-memory snapshot on the event
loop; alter runs on a worker thread (it may resolve an ip entity's host name, and it writes to the store). A refused
AlterClientQuotas is recorded in the management history (``service.refused``: a ``quota.altered`` event per entity
as sent, with every key it asked for), bounded per request and per principal; the answer is the same either way."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kio.static.primitive import f64

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.model import ItemError, KafkaErrorCode
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.builders import (
    alter_client_quotas_entity_data,
    alter_client_quotas_entry_data,
    alter_client_quotas_response,
    describe_client_quotas_entity_data,
    describe_client_quotas_entry_data,
    describe_client_quotas_response,
    value_data,
)
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafkaguard.protocol.scope import RequestScope
from kafkaguard.protocol.wire_errors import error_fields
from kafkaguard.service.events import quota_entity_event
from kafkaguard.service.quotas import QuotaAlteration, QuotaFilterComponent, QuotaOp, java_entity
from kafkaguard.store.ports import quota_entity

_DENIED = ItemError(KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED)


async def describe_client_quotas(
    scope: RequestScope, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    cls: type[DescribeClientQuotasResponse] = response_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, scope.api_version)
    if not scope.authorize(REQUIREMENTS[ApiKey.DESCRIBE_CLIENT_QUOTAS]).request_allowed:
        # Kafka: a top-level error (its default text, so a null message) and null entries.
        return describe_client_quotas_response(cls, throttle_time=NO_THROTTLE, **error_fields(_DENIED), entries=None)
    components = [
        QuotaFilterComponent(entity_type=c.entity_type, match_type=int(c.match_type), match=c.match)
        for c in request.components
    ]
    description = scope.services.quotas.describe(components, strict=request.strict)
    if description.entries is None:
        return describe_client_quotas_response(
            cls, throttle_time=NO_THROTTLE, **error_fields(description.error), entries=None
        )
    entries = tuple(
        describe_client_quotas_entry_data(
            cls,
            entity=tuple(
                describe_client_quotas_entity_data(cls, entity_type=t, entity_name=n) for t, n in record.entity
            ),
            values=tuple(value_data(cls, key=key, value=f64(value)) for key, value in record.values.items()),
        )
        for record in description.entries
    )
    # Kafka's KRaft broker leaves the message at the schema's default, "" (not null), on success.
    return describe_client_quotas_response(
        cls, throttle_time=NO_THROTTLE, **error_fields(None, on_success=""), entries=entries
    )


async def alter_client_quotas(scope: RequestScope, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    cls: type[AlterClientQuotasResponse] = response_schema(ApiKey.ALTER_CLIENT_QUOTAS, scope.api_version)
    if not scope.authorize(REQUIREMENTS[ApiKey.ALTER_CLIENT_QUOTAS]).request_allowed:
        # Kafka (AlterClientQuotasRequest.getErrorResponse): every entry as sent, in order, with the error's
        # default text.
        denied = tuple(
            alter_client_quotas_entry_data(
                cls,
                **error_fields(_DENIED, default_text=True),
                entity=tuple(
                    alter_client_quotas_entity_data(cls, entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
            for entry in request.entries
        )
        actor = scope.actor()
        entries: Sequence[Any] = request.entries
        await scope.refuse(
            entries,
            lambda entry: quota_entity_event(
                actor,
                quota_entity(java_entity([(e.entity_type, e.entity_name) for e in entry.entity])),
                {op.key: None if op.remove else float(op.value) for op in entry.ops},
                _DENIED,
            ),
        )
        return alter_client_quotas_response(cls, throttle_time=NO_THROTTLE, entries=denied)
    alterations = [
        QuotaAlteration(
            entity=tuple((e.entity_type, e.entity_name) for e in entry.entity),
            ops=tuple(QuotaOp(key=op.key, value=float(op.value), remove=op.remove) for op in entry.ops),
        )
        for entry in request.entries
    ]
    results = await asyncio.to_thread(
        scope.services.quotas.alter, alterations, actor=scope.actor(), validate_only=request.validate_only
    )
    entries = tuple(
        alter_client_quotas_entry_data(
            cls,
            **error_fields(result.error, default_text=True),
            entity=tuple(alter_client_quotas_entity_data(cls, entity_type=t, entity_name=n) for t, n in result.entity),
        )
        for result in results
    )
    return alter_client_quotas_response(cls, throttle_time=NO_THROTTLE, entries=entries)

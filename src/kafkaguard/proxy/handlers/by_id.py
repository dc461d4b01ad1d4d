"""Topic ids to names for the handlers of requests that name topics by id (Fetch v13+, DeleteTopics v6): the
proxy's ``topic_ids``, asked of this connection's upstream when an id is not known (or, ``fresh``, to confirm it)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any
from uuid import UUID

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.proxy.scope import ProxyScope
from kafkaguard.proxy.topic_ids import resolve


async def topic_names(scope: ProxyScope, ids: Collection[UUID | None], *, fresh: bool = False) -> dict[UUID, str]:
    """The names of those of ``ids`` the upstream has; an id absent from the answer does not exist there. ``fresh``:
    ask the upstream about every one of ``ids``, whatever is remembered."""

    async def call(api_key: ApiKey, api_version: int, body: Any) -> Any:
        await scope.outbox.flushed()  # the proxy's own request waits for the answers relayed before it
        return await scope.upstream.call(api_key, api_version, body)

    return await resolve(call, ids, scope.nodes.topic_ids, fresh=fresh)

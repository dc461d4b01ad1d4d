"""The group administration APIs (DescribeGroups, ListGroups, DeleteGroups, OffsetDelete), as KafkaApis."""

from __future__ import annotations

from typing import Any

from kafkaguard.authorizer.requests import ApiKey

#: API → handler; merged into ``proxy.connection.HANDLERS``.
HANDLERS: dict[ApiKey, Any] = {}

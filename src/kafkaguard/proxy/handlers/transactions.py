"""The transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers,
DescribeTransactions, ListTransactions): authorized as ``KafkaApis`` does."""

from __future__ import annotations

from typing import Any

from kafkaguard.authorizer.requests import ApiKey

#: API → handler; merged into ``proxy.connection.HANDLERS``.
HANDLERS: dict[ApiKey, Any] = {}

"""A write the store could not take because it is unreachable: one per-item error for every service.

A PostgreSQL store that is down or restarting raises ``StoreUnavailableError`` (retriable). The services answer
every item of such a write with Kafka's REQUEST_TIMED_OUT and the store's reason — a retriable error every Kafka
client retries — instead of failing the whole request, so the server puts Kafka's code on the wire for each item
and the console answers 503 (``console.item_errors``), through the one per-item error model.
"""

from __future__ import annotations

from kafkaguard.model import ItemError, KafkaErrorCode
from kafkaguard.store import StoreUnavailableError


def unavailable(error: StoreUnavailableError) -> ItemError:
    return ItemError(KafkaErrorCode.REQUEST_TIMED_OUT, str(error))

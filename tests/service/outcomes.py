"""Reading a per-item outcome (``error: ItemError | None``) as the (code, text) pair the service tests compare."""

from __future__ import annotations

from typing import Protocol

from kafkaguard.model import ItemError, KafkaErrorCode


class Outcome(Protocol):
    @property
    def error(self) -> ItemError | None: ...


def code_of(outcome: Outcome) -> KafkaErrorCode:
    """NONE for a success, else the item's Kafka error code."""
    return KafkaErrorCode.NONE if outcome.error is None else outcome.error.code


def message_of(outcome: Outcome) -> str | None:
    """None for a success, else the item's message (Kafka's default text when it has none of its own)."""
    return None if outcome.error is None else outcome.error.text

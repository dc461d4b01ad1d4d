"""The one place a per-item outcome (``model.ItemError``, or None for success) becomes a wire error code and
message.

The code table is built once, by Kafka's error name, and checked against kio's number at import: a code whose name
or number kio does not know fails here, not in a response. The message follows one of Kafka's two rules, chosen by
the API (each handler says which, as Kafka's own handler for that API does):

- ``ApiError.fromThrowable`` (the default): null when the message is Kafka's default text for the code;
- ``messageWithFallback`` (``default_text=True``; DeleteTopics, AlterClientQuotas): the default text when the item
  has no message of its own.

A success is ``ErrorCode.none`` with ``on_success`` as its message: null for most APIs, ``""`` for the APIs whose
Kafka handler sets an empty string (SEMANTICS.md §15.14).
"""

from __future__ import annotations

from typing import TypedDict

from kio.schema.errors import ErrorCode

from kafkaguard.model import ItemError, KafkaErrorCode


def _table() -> dict[KafkaErrorCode, ErrorCode]:
    table = {code: ErrorCode[code.name.lower()] for code in KafkaErrorCode}
    mismatched = [code.name for code, wire in table.items() if wire.value != code.code]
    if mismatched:  # pragma: no cover - kio's codes are Kafka's, never renumbered
        raise AssertionError(f"kio numbers these Kafka errors differently: {mismatched}")
    return table


_WIRE: dict[KafkaErrorCode, ErrorCode] = _table()


class ErrorFields(TypedDict):
    """The ``error_code`` and ``error_message`` fields of a response entity, to pass to ``build(...)``."""

    error_code: ErrorCode
    error_message: str | None


def wire_error(error: ItemError | None) -> ErrorCode:
    """The wire code of one item's outcome, for the entities that carry a code and no message (Metadata's)."""
    return ErrorCode.none if error is None else _WIRE[error.code]


def error_fields(error: ItemError | None, *, on_success: str | None = None, default_text: bool = False) -> ErrorFields:
    """The wire fields of one item's outcome (see the module docstring for the two message rules)."""
    if error is None:
        return ErrorFields(error_code=ErrorCode.none, error_message=on_success)
    return ErrorFields(error_code=_WIRE[error.code], error_message=error.text if default_text else error.wire_message)

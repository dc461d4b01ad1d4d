"""The one place a per-item service outcome becomes a kio wire ``ErrorCode`` (issue 17, first step).

The table is built once, by Kafka's error name, and checked against the wire code at import: a service code
whose name or number kio does not know fails here, not in a response."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkaguard.service.errors import KafkaErrorCode


def _table() -> dict[KafkaErrorCode, ErrorCode]:
    table = {code: ErrorCode[code.name.lower()] for code in KafkaErrorCode}
    mismatched = [code.name for code, wire in table.items() if wire.value != code.code]
    if mismatched:  # pragma: no cover - kio's codes are Kafka's, never renumbered
        raise AssertionError(f"kio numbers these Kafka errors differently: {mismatched}")
    return table


_WIRE: dict[KafkaErrorCode, ErrorCode] = _table()


def wire_error(code: KafkaErrorCode) -> ErrorCode:
    """kio's ``ErrorCode`` for a service's per-item Kafka error code (same name, same number)."""
    return _WIRE[code]

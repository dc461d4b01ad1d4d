"""Kafka's error codes as the service layer reports them per item (SEMANTICS.md §10).

The server puts ``code`` on the wire as is; ``default_message`` is Kafka's text, which the wire rule of §10
replaces by null (``wire_message``).
"""

from __future__ import annotations

from enum import IntEnum


class KafkaErrorCode(IntEnum):
    """Kafka ``Errors`` codes (never renumbered)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    INVALID_REQUEST = 42
    SECURITY_DISABLED = 54
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93

    @property
    def code(self) -> int:
        return int(self)

    @property
    def default_message(self) -> str | None:
        return _DEFAULT_MESSAGES.get(self)

    def wire_message(self, message: str | None) -> str | None:
        """Kafka's rule (``ApiError.fromThrowable``): null for UNKNOWN_SERVER_ERROR and for the default text."""
        if self is KafkaErrorCode.UNKNOWN_SERVER_ERROR or message == self.default_message:
            return None
        return message

    def __str__(self) -> str:
        return self.name


_DEFAULT_MESSAGES: dict[KafkaErrorCode, str] = {
    KafkaErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM: "The broker does not support the requested SASL mechanism.",
    KafkaErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details."
    ),
    KafkaErrorCode.SECURITY_DISABLED: "Security features are disabled.",
    KafkaErrorCode.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    KafkaErrorCode.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    KafkaErrorCode.UNACCEPTABLE_CREDENTIAL: "Requested credential would not meet criteria for acceptability.",
}

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
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    SECURITY_DISABLED = 54
    TOPIC_DELETION_DISABLED = 73
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    UNKNOWN_TOPIC_ID = 100

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
    KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    KafkaErrorCode.LEADER_NOT_AVAILABLE: (
        "There is no leader for this topic-partition as we are in the middle of a leadership election."
    ),
    KafkaErrorCode.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    KafkaErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM: "The broker does not support the requested SASL mechanism.",
    KafkaErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
    KafkaErrorCode.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    KafkaErrorCode.INVALID_PARTITIONS: "Number of partitions is below 1.",
    KafkaErrorCode.INVALID_REPLICATION_FACTOR: (
        "Replication factor is below 1 or larger than the number of available brokers."
    ),
    KafkaErrorCode.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    KafkaErrorCode.INVALID_CONFIG: "Configuration is invalid.",
    KafkaErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details."
    ),
    KafkaErrorCode.SECURITY_DISABLED: "Security features are disabled.",
    KafkaErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    KafkaErrorCode.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    KafkaErrorCode.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    KafkaErrorCode.UNACCEPTABLE_CREDENTIAL: "Requested credential would not meet criteria for acceptability.",
    KafkaErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
}

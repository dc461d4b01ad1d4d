"""One per-item outcome for every batch API: Kafka's error code and message for an item that failed.

Kafka answers a batch (CreateAcls, DeleteAcls, AlterUserScramCredentials, CreateTopics, AlterClientQuotas …) item
by item: each item succeeds or carries an ``ApiError`` (a code and an optional message, SEMANTICS.md §10). Every
result type of kafkaguard does the same with ``error: ItemError | None`` (None = succeeded), so there is one shape
to map: the server maps it to the wire in ``protocol.wire_errors``, the console to HTTP in ``console.item_errors``.

Example: deleting the credential of a user that has none gives
``ItemError(KafkaErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")``;
``str()`` of it is the message, ``.text`` falls back to Kafka's default text when there is no message, and
``.wire_message`` follows Kafka's ``ApiError.fromThrowable`` rule (null when the message is the default text).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class KafkaErrorCode(IntEnum):
    """Kafka ``Errors`` codes that kafkaguard gives per item (never renumbered; ``protocol.wire_errors`` checks each
    against kio's name and number at import)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    REQUEST_TIMED_OUT = 7
    LEADER_NOT_AVAILABLE = 5
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
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
    KafkaErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
    KafkaErrorCode.LEADER_NOT_AVAILABLE: (
        "There is no leader for this topic-partition as we are in the middle of a leadership election."
    ),
    KafkaErrorCode.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    KafkaErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
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
    KafkaErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    KafkaErrorCode.OPERATION_NOT_ATTEMPTED: (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs where some "
        "operations in the batch failed, causing the broker to respond without trying the rest."
    ),
    KafkaErrorCode.SECURITY_DISABLED: "Security features are disabled.",
    KafkaErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    KafkaErrorCode.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    KafkaErrorCode.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    KafkaErrorCode.UNACCEPTABLE_CREDENTIAL: "Requested credential would not meet criteria for acceptability.",
    KafkaErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
}


@dataclass(frozen=True, slots=True)
class ItemError:
    """Why one item of a batch failed: Kafka's code and, when Kafka gives one, its own message."""

    code: KafkaErrorCode
    message: str | None = None

    @property
    def text(self) -> str:
        """The message, else Kafka's default text for the code (``ApiError.messageWithFallback``)."""
        return self.message if self.message is not None else (self.code.default_message or self.code.name)

    @property
    def wire_message(self) -> str | None:
        """The message as Kafka puts it on the wire after ``ApiError.fromThrowable``: null for the default text."""
        return self.code.wire_message(self.text)

    @property
    def summary(self) -> str:
        """``CODE: text``, as the CLI and the console show an item's error to a person."""
        return f"{self.code.name}: {self.text}"

    def __str__(self) -> str:
        return self.text

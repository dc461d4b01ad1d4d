"""The one place a per-item Kafka error (``model.ItemError``) becomes an HTTP status in the console's REST API.

A route that gets a failed item raises ``ItemRefusedError``; the app's domain-error handler answers it with the
status of ``HTTP_STATUS`` (400 for a Kafka error not listed there) and the message ``CODE: text``, in the same
JSON shape as every other answer with that status (a 422 is FastAPI's list of errors plus one ``message`` line).
"""

from __future__ import annotations

from types import MappingProxyType

from kafkaguard.errors import KafkaguardError
from kafkaguard.model import ItemError, KafkaErrorCode

_CODE = KafkaErrorCode

#: Kafka's per-item errors as HTTP: input the caller must fix is 422 (as a request body that fails validation),
#: a missing resource 404, a duplicate 409, a denial 403, a retriable condition 503, a server error 500.
HTTP_STATUS = MappingProxyType(
    {
        _CODE.INVALID_REQUEST: 422,
        _CODE.INVALID_CONFIG: 422,
        _CODE.INVALID_TOPIC_EXCEPTION: 422,
        _CODE.INVALID_PARTITIONS: 422,
        _CODE.INVALID_REPLICATION_FACTOR: 422,
        _CODE.INVALID_REPLICA_ASSIGNMENT: 422,
        _CODE.UNACCEPTABLE_CREDENTIAL: 422,
        _CODE.UNSUPPORTED_SASL_MECHANISM: 422,
        _CODE.UNSUPPORTED_VERSION: 422,
        _CODE.RESOURCE_NOT_FOUND: 404,
        _CODE.UNKNOWN_TOPIC_OR_PARTITION: 404,
        _CODE.UNKNOWN_TOPIC_ID: 404,
        _CODE.DUPLICATE_RESOURCE: 409,
        _CODE.TOPIC_ALREADY_EXISTS: 409,
        _CODE.TOPIC_AUTHORIZATION_FAILED: 403,
        _CODE.CLUSTER_AUTHORIZATION_FAILED: 403,
        _CODE.LEADER_NOT_AVAILABLE: 503,
        _CODE.REQUEST_TIMED_OUT: 503,
        _CODE.UNKNOWN_SERVER_ERROR: 500,
    }
)


class ItemRefusedError(KafkaguardError):
    """A console request whose one item Kafka's rules refused; ``status`` is its HTTP status."""

    def __init__(self, error: ItemError) -> None:
        super().__init__(error.summary)
        self.error = error

    @property
    def status(self) -> int:
        return HTTP_STATUS.get(self.error.code, 400)


def raise_for(error: ItemError | None) -> None:
    """Nothing for a success; else the ``ItemRefusedError`` the domain-error handler answers."""
    if error is not None:
        raise ItemRefusedError(error)

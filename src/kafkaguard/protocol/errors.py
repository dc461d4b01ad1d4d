"""Errors of the Kafka-protocol layer. Each one closes only the connection it happened on."""

from __future__ import annotations

from kafkaguard.errors import KafkaguardError


class ProtocolError(KafkaguardError):
    """Bytes that are not a valid Kafka request; the connection is closed with a log line."""

    #: The client sent the bytes (the violation is then charged to its principal or its address,
    #: ``protocol.violations``); False for bytes that came from elsewhere, such as an upstream broker's answer to the
    #: proxy.
    sent_by_client = True


class FrameError(ProtocolError):
    """A frame with a bad or oversized length, or a stream that ended inside one."""


class FrameTooLargeError(FrameError):
    """A frame longer than its limit (``api_key``: the API whose limit it is, before login), refused before it was
    read."""

    def __init__(self, message: str, size: int, limit: int, api_key: int | None = None) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit
        self.api_key = api_key


class HeaderError(ProtocolError):
    """A request header that cannot be decoded."""


class TaggedFieldsError(ProtocolError):
    """A tagged-field section with more fields than its reader allows, or a field running past its end
    (``protocol.varint.skip_tagged_fields``). Each reader turns it into its own error, as ``VarintTooLong``."""


class VarintTooLong(ProtocolError):
    """An unsigned varint of more than 5 bytes (``protocol.varint``: Kafka's are int32 varints). Each reader turns it
    into its own error (a header's, a body's length check, an upstream answer's walk)."""

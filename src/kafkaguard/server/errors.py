"""Errors of the Kafka-protocol layer. Each one closes only the connection it happened on."""

from __future__ import annotations

from kafkaguard.errors import KafkaguardError


class ProtocolError(KafkaguardError):
    """Bytes that are not a valid Kafka request; the connection is closed with a log line."""


class FrameError(ProtocolError):
    """A frame with a bad or oversized length, or a stream that ended inside one."""


class HeaderError(ProtocolError):
    """A request header that cannot be decoded."""

"""The raw Kafka client of the tests now lives in ``tests/wire.py`` (shared with the benchmarks); these names are
re-exported so that the modules importing them from here keep working."""

from __future__ import annotations

from tests.wire import (
    API_VERSIONS_KEY,
    AUTO_CREATE,
    Wire,
    create_acl,
    decode_api_versions_v0,
    decode_response,
    encode_request,
    frame,
    metadata,
)

__all__ = [
    "API_VERSIONS_KEY",
    "AUTO_CREATE",
    "Wire",
    "create_acl",
    "decode_api_versions_v0",
    "decode_response",
    "encode_request",
    "frame",
    "metadata",
]

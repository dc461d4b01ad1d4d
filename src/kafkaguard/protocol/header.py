"""Request headers, decoded by hand because kio raises on unknown tagged fields and clients may send them.

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16
length). Header v2 (flexible requests) adds tagged fields: an unsigned-varint count, then per field a varint tag,
a varint size and that many bytes, all of which we skip. client_id keeps its non-compact encoding in v2.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkaguard.protocol.errors import HeaderError, TaggedFieldsError, VarintTooLong
from kafkaguard.protocol.varint import skip_tagged_fields

_FIXED = struct.Struct(">hhih")
#: Tagged fields we are willing to skip in one header (a sane bound against a hostile count).
_MAX_TAGGED_FIELDS = 64


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): enough to answer even a request we cannot decode further.

    :raises HeaderError: fewer than 8 bytes.
    """
    if len(frame) < 8:
        raise HeaderError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, correlation_id


def decode_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """The header and the offset where the request body starts.

    :raises HeaderError: truncated header, invalid UTF-8 client id, or malformed tagged fields.
    """
    if len(frame) < _FIXED.size:
        raise HeaderError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, id_size = _FIXED.unpack_from(frame, 0)
    offset = _FIXED.size
    client_id: str | None = None
    if id_size >= 0:
        end = offset + id_size
        if end > len(frame):
            raise HeaderError("client_id runs past the end of the request")
        try:
            client_id = frame[offset:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise HeaderError("client_id is not valid UTF-8") from e
        offset = end
    elif id_size != -1:
        raise HeaderError(f"invalid client_id length {id_size}")
    if flexible:
        try:
            offset = skip_tagged_fields(frame, offset, len(frame), _MAX_TAGGED_FIELDS)
        except TaggedFieldsError as e:
            raise HeaderError(f"request header: {e}") from None
        except IndexError:  # only ``uvarint`` indexes here: a varint cut off by the end of the request
            raise HeaderError("truncated varint") from None
        except VarintTooLong:
            raise HeaderError("varint longer than 5 bytes") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset

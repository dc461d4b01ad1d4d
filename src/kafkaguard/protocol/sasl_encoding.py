"""SaslHandshake and SaslAuthenticate responses written by hand, byte for byte what kio's writers write.

Why by hand: every login answers one SaslHandshake and one to three SaslAuthenticate, and kio's generic writer took
~9 µs for a SaslAuthenticate response of four fields (on the machine of docs/benchmarks.md, "Figures from the
code"); these take about one. ``codec.writer_for`` returns them in place of kio's for the versions below, so a
handler still builds and returns kio's own entities. ``tests/protocol/test_sasl_encoding.py`` compares the bytes
with kio's for generated values of every field.

Cost: one ``bytes`` join per response, linear in the token and message sizes.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse as SaslAuthenticateResponseV0
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse as SaslAuthenticateResponseV1
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse as SaslAuthenticateResponseV2
from kio.schema.sasl_handshake.v0.response import SaslHandshakeResponse as SaslHandshakeResponseV0
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse as SaslHandshakeResponseV1
from kio.serial.errors import OutOfBoundValue

from kafkaguard.protocol.varint import uvarint_bytes

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16_MAX = 2**15 - 1
_I32_MAX = 2**31 - 1


def _legacy_string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    encoded = value.encode()
    if len(encoded) > _I16_MAX:
        raise OutOfBoundValue(f"String is too long for legacy string format ({len(encoded)} > {_I16_MAX})")
    return _I16.pack(len(encoded)) + encoded


def _legacy_bytes(value: bytes) -> bytes:
    if len(value) > _I32_MAX:
        raise OutOfBoundValue(f"Bytes is too long for legacy string format ({len(value)} > {_I32_MAX})")
    return _I32.pack(len(value)) + value


def _compact(value: bytes | None) -> bytes:
    return b"\x00" if value is None else uvarint_bytes(len(value) + 1) + value


def _milliseconds(response: SaslAuthenticateResponseV1 | SaslAuthenticateResponseV2) -> bytes:
    return _I64.pack(round(response.session_lifetime.total_seconds() * 1000))  # as kio's write_timedelta_i64


def _legacy_fields(response: SaslAuthenticateResponseV0 | SaslAuthenticateResponseV1) -> bytes:
    return (
        _I16.pack(response.error_code.value)
        + _legacy_string(response.error_message)
        + _legacy_bytes(response.auth_bytes)
    )


def _authenticate_v0(buffer: io.BytesIO, response: SaslAuthenticateResponseV0) -> None:
    buffer.write(_legacy_fields(response))


def _authenticate_v1(buffer: io.BytesIO, response: SaslAuthenticateResponseV1) -> None:
    buffer.write(_legacy_fields(response) + _milliseconds(response))  # v1 adds the session's lifetime


def _authenticate_v2(buffer: io.BytesIO, response: SaslAuthenticateResponseV2) -> None:
    message = response.error_message
    buffer.write(
        _I16.pack(response.error_code.value)
        + _compact(None if message is None else message.encode())
        + _compact(response.auth_bytes)
        + _milliseconds(response)
        + b"\x00"  # no tagged fields
    )


def _handshake(buffer: io.BytesIO, response: SaslHandshakeResponseV0 | SaslHandshakeResponseV1) -> None:
    mechanisms = response.mechanisms
    buffer.write(
        _I16.pack(response.error_code.value)
        + _I32.pack(len(mechanisms))
        + b"".join(_legacy_string(mechanism) for mechanism in mechanisms)
    )


#: The hand-written writers, by kio response class (``codec.writer_for``).
SASL_WRITERS: dict[type[Any], Callable[[io.BytesIO, Any], None]] = {
    SaslAuthenticateResponseV0: _authenticate_v0,
    SaslAuthenticateResponseV1: _authenticate_v1,
    SaslAuthenticateResponseV2: _authenticate_v2,
    SaslHandshakeResponseV0: _handshake,
    SaslHandshakeResponseV1: _handshake,
}

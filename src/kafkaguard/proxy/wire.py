"""The proxy's side of the wire towards the upstream cluster: encoding requests, decoding responses.

Requests the proxy changes (a Produce without its denied topics, a Fetch without a session) are encoded with the
client's own header values (correlation id, client id), so the upstream's answer can go back unchanged when the
proxy has nothing to merge. Responses are decoded only when the proxy must read or change them; before kio reads
one, every length in it is checked against the bytes that remain (``protocol.lengths``), as for a client's request:
an upstream is trusted with data, not with the proxy's memory.
"""

from __future__ import annotations

import io
import struct

from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.errors import KafkaguardError
from kafkaguard.protocol.codec import DECODE_ERRORS, reader_for, request_schema, response_schema, writer_for
from kafkaguard.protocol.errors import ProtocolError
from kafkaguard.protocol.lengths import check_body

_CORRELATION = struct.Struct(">i")


class ClientGone(KafkaguardError):
    """Passing an answer on failed on the client's side (it reset or closed its connection meanwhile): the client
    connection ends, and the upstream connection with it, but the upstream did nothing wrong (not counted among its
    failures, not logged as one). ``UpstreamConnection.pass_answer_on`` turns it into its own failure."""


class UpstreamProtocolError(ProtocolError):
    """An upstream answer the proxy cannot read: it closes the client connection it belongs to, nothing more."""

    sent_by_client = False  # the client is not to blame: nothing is charged to it


def encode_request(
    api_key: ApiKey, api_version: int, correlation_id: int, client_id: str | None, body: Entity
) -> bytes:
    """A request payload (no length prefix): the header version the schema names, then ``body``."""
    schema = request_schema(api_key, api_version)
    header_cls = schema.__header_schema__
    header = header_cls(
        request_api_key=i16(api_key),
        request_api_version=i16(api_version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    writer_for(header_cls)(buffer, header)
    writer_for(schema)(buffer, body)
    return buffer.getvalue()


def response_header_size(api_key: ApiKey, api_version: int, payload: bytes) -> int:
    """Bytes of the response header at the start of ``payload``: v0 (the correlation id) for ApiVersions and
    non-flexible versions, else v1 (plus tagged fields, read with kio)."""
    if api_key is ApiKey.API_VERSIONS or not response_schema(api_key, api_version).__flexible__:
        return 4
    try:
        check_body(ResponseHeaderV1, payload, 0, max_items=None)
        return int(reader_for(ResponseHeaderV1)(payload, 0)[1])
    except (ProtocolError, *DECODE_ERRORS) as e:
        raise UpstreamProtocolError(f"unreadable {api_key.api_name} v{api_version} response header: {e}") from e


def correlation_id_of(payload: bytes) -> int:
    """The correlation id every response starts with."""
    if len(payload) < 4:
        raise UpstreamProtocolError(f"a response of {len(payload)} bytes has no correlation id")
    return int(_CORRELATION.unpack_from(payload)[0])


def request_correlation_id(payload: bytes) -> int:
    """The correlation id of a request payload (after its int16 API key and version)."""
    return int(_CORRELATION.unpack_from(payload, 4)[0])


def decode_response(api_key: ApiKey, api_version: int, payload: bytes) -> Entity:
    """The kio response body of a response payload (no length prefix).

    :raises UpstreamProtocolError: lengths that do not fit, or bytes kio cannot read as that response.
    """
    offset = response_header_size(api_key, api_version, payload)
    schema = response_schema(api_key, api_version)
    try:
        check_body(schema, payload, offset, max_items=None)  # a trusted upstream's answer: bounded by its bytes
        decoded: Entity = reader_for(schema)(payload, offset)[0]
        return decoded
    except ProtocolError as e:
        raise UpstreamProtocolError(f"malformed {api_key.api_name} v{api_version} response: {e}") from e
    except DECODE_ERRORS as e:
        raise UpstreamProtocolError(f"malformed {api_key.api_name} v{api_version} response: {e}") from e

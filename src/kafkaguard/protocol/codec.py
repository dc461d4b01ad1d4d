"""Request decoding and response encoding with kio's generated types, for the API versions a connection offers
(``Versions``: the server's are ``server.versions``, the proxy's ``proxy.versions``).

What kio does not do is done here: the request header (see ``header``), checking every length a body declares
against the bytes that remain before kio reads it (see ``lengths``: kio's native reader would otherwise reserve
memory from a count taken from the wire and abort the process), ignoring trailing bytes after a request body
(confluent-kafka sends one extra byte in AlterUserScramCredentials), and ApiVersions' rules — a request
version above ours still gets an answer (v0 with UNSUPPORTED_VERSION and our versions, so the client can pick),
and ApiVersions responses always use response header v0.

Why ``Any`` stays here: the schema of an (API key, version) is looked up at run time, among hundreds of generated
classes; the typed edges are the handlers' own (``apis.Handler``, the proxy's dispatch), which name their versions.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NewType, TypeVar, cast

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.protocol import Entity

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.errors import ProtocolError
from kafkaguard.protocol.framing import encode_frame
from kafkaguard.protocol.header import RequestHeader, decode_header, peek_header
from kafkaguard.protocol.lengths import DEFAULT_MAX_ITEMS, check_body
from kafkaguard.protocol.sasl_encoding import SASL_WRITERS

#: A response body encoded by hand (see ``handlers.acl_encoding``), written after the response header as it is.
PreEncoded = NewType("PreEncoded", bytes)

# What kio's decoders raise on bad bytes, besides its own SerialError.
DECODE_ERRORS = (SerialError, ValueError, KeyError, TypeError, OverflowError, IndexError)


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    header: RequestHeader
    api_key: ApiKey
    #: A kio request payload of the header's version: a member of the API's request union (``protocol.routes``).
    body: Entity


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A request whose body its dispatcher walks from the frame itself: its header, and where its body starts."""

    header: RequestHeader
    api_key: ApiKey
    body_at: int


class UnsupportedRequest(ProtocolError):
    """An API or version this server does not offer. ``api_key``/``api_version``/``correlation_id`` come from
    the header so that ApiVersions can still be answered."""

    def __init__(self, message: str, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


T = TypeVar("T")

#: API → (lowest, highest) version offered; the server's is ``server.versions.SERVER_VERSIONS``, the proxy's is
#: negotiated (``proxy.versions``).
Versions = Mapping[ApiKey, tuple[int, int]]


#: Every API by its code: a dict lookup where ``ApiKey(code)`` (an enum call, ~0.7 µs) ran three times a request.
_API_KEYS: dict[int, ApiKey] = {int(key): key for key in ApiKey}


def is_supported(api_key: int, api_version: int, versions: Versions) -> bool:
    key = _API_KEYS.get(api_key)
    if key is None:
        return False
    found = versions.get(key)
    return found is not None and found[0] <= api_version <= found[1]


def decode_request(frame: bytes, versions: Versions, *, max_items: int = DEFAULT_MAX_ITEMS) -> DecodedRequest:
    """Header and body of one request frame. Call it only for a request the connection may send in its state:
    before authentication, only ApiVersions and SASL bodies are decoded (``connection`` checks the header first).

    :raises UnsupportedRequest: an API or version ``versions`` does not offer.
    :raises ProtocolError: bytes that do not decode as that request, including a length or count that the bytes
        after it cannot hold (``lengths.LengthError``), checked before kio allocates anything, and a body whose
        arrays carry more than ``max_items`` elements together (``lengths.TooManyItemsError``).
    """
    api_key, api_version, correlation_id = peek_header(frame)
    if not is_supported(api_key, api_version, versions):
        raise UnsupportedRequest(
            f"API key {api_key} version {api_version} is not supported", api_key, api_version, correlation_id
        )
    schema = request_schema(api_key, api_version)
    header, offset = decode_header(frame, flexible=schema.__flexible__)
    key = _API_KEYS[api_key]  # supported, so known
    return DecodedRequest(header, key, decode_body(key, api_version, frame, offset, max_items))


def decode_request_head(frame: bytes, versions: Versions) -> RequestHead:
    """Only the header of one request frame, for an API its dispatcher reads from the bytes itself
    (``connection.Dispatcher.walked``); the same checks as ``decode_request`` before the body.

    :raises UnsupportedRequest: an API or version ``versions`` does not offer.
    :raises HeaderError: a header that does not decode.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    if not is_supported(api_key, api_version, versions):
        raise UnsupportedRequest(
            f"API key {api_key} version {api_version} is not supported", api_key, api_version, correlation_id
        )
    header, offset = decode_header(frame, flexible=request_schema(api_key, api_version).__flexible__)
    return RequestHead(header, _API_KEYS[api_key], offset)


def decode_body(api_key: ApiKey, api_version: int, frame: bytes, offset: int, max_items: int) -> Entity:
    """The body of ``frame`` from ``offset`` (after its header), lengths checked before kio reads it.

    :raises ProtocolError: as ``decode_request``."""
    schema = request_schema(api_key, api_version)
    check_body(schema, frame, offset, max_items=max_items)
    try:
        body, _consumed = reader_for(schema)(frame, offset)  # trailing bytes are ignored on purpose
    except DECODE_ERRORS as e:
        raise ProtocolError(f"malformed {api_key.api_name} v{api_version} request: {e}") from e
    return cast(Entity, body)


def encode_response(api_key: ApiKey, api_version: int, correlation_id: int, body: Any) -> bytes:
    """One framed response: response header (v0 for ApiVersions and non-flexible APIs, else v1) and body.

    ``body`` is a kio response entity (one made by ``constant_response`` is written from its bytes), or the body's
    bytes already encoded (handlers that write large responses by hand, see ``handlers.acl_encoding``).
    """
    buffer = io.BytesIO()
    write_response_header(buffer, api_key, api_version, correlation_id)
    if isinstance(body, bytes):
        buffer.write(body)
    elif (constant := _CONSTANT_BODIES.get(id(body))) is not None and constant[0] is body:
        buffer.write(constant[1])
    else:
        writer_for(type(body))(buffer, body)
    return encode_frame(buffer.getvalue())


#: Bodies answered again and again (``constant_response``), by identity: the entity (kept alive, so its id stays
#: its own) and its bytes. A memo: emptied when full, which costs only encoding them again.
_CONSTANT_BODIES: dict[int, tuple[object, bytes]] = {}
_CONSTANT_BODIES_MAX = 256


def constant_response(body: T) -> T:
    """``body`` (a kio response entity, immutable), its encoding remembered for ``encode_response``. For answers
    every connection gets the same, such as ApiVersions': encoding its ~60 entries was a large share of the
    server's time on connections that only connect, ask ApiVersions and close (``bench_regression``; see
    docs/benchmarks.md, "Figures from the code")."""
    buffer = io.BytesIO()
    writer_for(type(body))(buffer, body)
    if len(_CONSTANT_BODIES) >= _CONSTANT_BODIES_MAX:
        _CONSTANT_BODIES.clear()
    _CONSTANT_BODIES[id(body)] = (body, buffer.getvalue())
    return body


def write_response_header(buffer: io.BytesIO, api_key: ApiKey, api_version: int, correlation_id: int) -> None:
    """The response header: v0 for ApiVersions and non-flexible versions, else v1 (with its tagged fields).

    Written by hand: a header is the correlation id (int32) and, in v1, an empty tagged-field section (one zero
    byte), and every response has one — building and writing kio's header entity was a visible share of a SCRAM
    login's server time (see docs/benchmarks.md, "Figures from the code").
    ``tests/protocol/test_constant_responses.py`` checks the bytes against kio's."""
    flexible = api_key is not ApiKey.API_VERSIONS and response_schema(api_key, api_version).__flexible__
    buffer.write(_HEADER_V1.pack(correlation_id, 0) if flexible else _HEADER_V0.pack(correlation_id))


_HEADER_V0 = struct.Struct(">i")
_HEADER_V1 = struct.Struct(">iB")


_REQUEST_SCHEMAS: dict[tuple[int, int], type[Any]] = {}
_RESPONSE_SCHEMAS: dict[tuple[int, int], type[Any]] = {}


def request_schema(api_key: int, api_version: int) -> type[Any]:
    # kio resolves schemas by import path on every call; the server asks thousands of times a second.
    schema = _REQUEST_SCHEMAS.get((api_key, api_version))
    if schema is None:
        schema = _REQUEST_SCHEMAS[(api_key, api_version)] = cast(type[Any], load_request_schema(api_key, api_version))
    return schema


def response_schema(api_key: ApiKey, api_version: int) -> type[Any]:
    schema = _RESPONSE_SCHEMAS.get((api_key, api_version))
    if schema is None:
        schema = _RESPONSE_SCHEMAS[(api_key, api_version)] = cast(type[Any], load_response_schema(api_key, api_version))
    return schema


_READERS: dict[type[Any], Callable[[bytes, int], tuple[Any, int]]] = {}
#: kio's writers, made once per schema; a few written by hand where a login's time went (``sasl_encoding``).
_WRITERS: dict[type[Any], Callable[[io.BytesIO, Any], None]] = dict(SASL_WRITERS)


def reader_for(schema: type[Any]) -> Callable[[bytes, int], tuple[Any, int]]:
    reader = _READERS.get(schema)
    if reader is None:  # built once per schema: kio compiles a reader per entity type
        reader = _READERS[schema] = cast(Callable[[bytes, int], tuple[Any, int]], entity_reader(schema))
    return reader


def writer_for(schema: type[Any]) -> Callable[[io.BytesIO, Any], None]:
    writer = _WRITERS.get(schema)
    if writer is None:
        writer = _WRITERS[schema] = cast(Callable[[io.BytesIO, Any], None], entity_writer(schema))
    return writer

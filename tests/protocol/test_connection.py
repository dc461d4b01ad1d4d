"""``Connection`` without sockets: frames go in through an ``asyncio.StreamReader`` fed by the test, answers come
out through a writer that records them. The connection sees only its ``ListenerContext`` (services, broker, audit),
so these tests build one from a real store in a temporary directory."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kafkaguard.bootstrap import Services, build_services
from kafkaguard.config import Listener, load_settings
from kafkaguard.protocol import codec
from kafkaguard.protocol import connection as connection_module
from kafkaguard.protocol.connection import Connection
from kafkaguard.protocol.scope import BrokerInfo, ListenerContext
from kafkaguard.server.dispatch import ServerDispatcher
from tests.wire import decode_response, encode_request, frame


class RecordingWriter:
    """The parts of ``asyncio.StreamWriter`` a connection uses; what it writes is kept in ``data``."""

    def __init__(self) -> None:
        self.data = io.BytesIO()
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return ("10.0.0.7", 50000) if name == "peername" else None

    def write(self, data: bytes) -> None:
        self.data.write(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        return None

    def frames(self) -> list[bytes]:
        raw, out, offset = self.data.getvalue(), [], 0
        while offset < len(raw):
            size = int.from_bytes(raw[offset : offset + 4], "big")
            out.append(raw[offset + 4 : offset + 4 + size])
            offset += 4 + size
        return out


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    built = build_services(load_settings(None, data_dir=tmp_path / "data", super_users="User:admin"))
    yield built
    built.close()


def run(services: Services, listener: str, *payloads: bytes) -> RecordingWriter:
    """Feed ``payloads`` as frames, then end of stream; return what the connection wrote."""

    async def go() -> RecordingWriter:
        reader = asyncio.StreamReader()
        for payload in payloads:
            reader.feed_data(frame(payload))
        reader.feed_eof()
        writer = RecordingWriter()
        context = ListenerContext(services, Listener.parse(listener), BrokerInfo(1, "broker", 9092, "c1"))
        await Connection(context, ServerDispatcher(context), reader, writer).run()  # type: ignore[arg-type]
        return writer

    return asyncio.run(go())


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


def metadata_all() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_api_versions_is_answered_before_login(services: Services):
    writer = run(
        services,
        "SASL_PLAINTEXT://127.0.0.1:0",
        encode_request(api_versions(), 5),
    )
    (answer,) = writer.frames()
    correlation_id, body = decode_response(answer, 18, 3)
    assert correlation_id == 5 and body.error_code.value == 0
    assert writer.closed  # at end of stream


def test_nothing_but_sasl_is_decoded_before_login(services: Services, monkeypatch: pytest.MonkeyPatch):
    decoded: list[bytes] = []
    real = codec.decode_request

    def spy(data: bytes, versions: Any, *, max_items: int = 10_000) -> Any:
        decoded.append(data)
        return real(data, versions, max_items=max_items)

    monkeypatch.setattr(connection_module, "decode_request", spy)
    handshake = encode_request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    writer = run(services, "SASL_PLAINTEXT://127.0.0.1:0", handshake, encode_request(metadata_all(), 2))
    assert decoded == [handshake]  # the Metadata body was never decoded
    assert len(writer.frames()) == 1  # the handshake's answer only: Metadata closed the connection
    assert writer.closed


def test_plaintext_is_anonymous_and_denied_by_default(services: Services):
    writer = run(services, "PLAINTEXT://127.0.0.1:0", encode_request(metadata_all(), 9))
    (answer,) = writer.frames()
    correlation_id, body = decode_response(answer, 3, 12)
    assert correlation_id == 9
    assert body.brokers[0].host == "broker" and body.cluster_id == "c1"  # the broker of the context
    assert body.topics == ()


def test_a_hostile_count_closes_this_connection_only(services: Services):
    hostile = encode_request(metadata_all(), 3)[:-4] + b"\x81\xde\xa0\xcb\x05"  # topics: 1.5e9 elements
    writer = run(services, "PLAINTEXT://127.0.0.1:0", hostile, encode_request(metadata_all(), 4))
    assert writer.frames() == []  # closed at the hostile frame, before the next one
    assert writer.closed


def test_an_unsupported_api_versions_version_gets_v0_with_our_versions(services: Services):
    newer = bytearray(encode_request(api_versions(), 11))
    newer[2:4] = (99).to_bytes(2, "big")
    writer = run(services, "SASL_PLAINTEXT://127.0.0.1:0", bytes(newer))
    (answer,) = writer.frames()
    correlation_id, body = decode_response(answer, 18, 0)
    assert correlation_id == 11 and body.error_code.value == 35  # UNSUPPORTED_VERSION
    assert {int(k.api_key) for k in body.api_keys} >= {3, 17, 18, 29, 30, 31, 36}

"""``proxy.wire``: requests the proxy encodes carry the client's header values and decode as a broker reads them;
responses are decoded with the header their version has, and an upstream answer the proxy cannot read — too short,
lengths that do not fit, junk — is an ``UpstreamProtocolError`` (never a crash, never the client's fault). The
KIP-848 answers the proxy relays carry no broker address, and those it decodes are length-checked like the rest."""

from __future__ import annotations

import dataclasses
import struct
import typing
from typing import Any

import pytest
from kio.schema.consumer_group_describe.v0 import response as describe_response
from kio.schema.consumer_group_heartbeat.v0 import response as heartbeat_response
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v0.response import HeartbeatResponse as HeartbeatV0
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse as HeartbeatV4
from kio.schema.metadata.v12.response import MetadataResponse

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import decode_request, encode_response, response_schema
from kafkaguard.proxy.wire import (
    UpstreamProtocolError,
    correlation_id_of,
    decode_response,
    encode_request,
    request_correlation_id,
    response_header_size,
)
from tests.proxy.fake_kafka import zero
from tests.proxy.memory_upstream import VERSIONS, entity
from tests.server.hostile import hostile_bodies


def test_a_request_carries_the_clients_header_values():
    body = entity(HeartbeatRequest, group_id="feed-g", generation_id=3)
    payload = encode_request(ApiKey.HEARTBEAT, 4, 77, "client-9", body)
    decoded = decode_request(payload, VERSIONS)
    assert (decoded.header.correlation_id, decoded.header.client_id, decoded.body) == (77, "client-9", body)
    assert request_correlation_id(payload) == 77


@pytest.mark.parametrize(
    ("api_key", "version", "size"),
    [(ApiKey.HEARTBEAT, 0, 4), (ApiKey.HEARTBEAT, 4, 5), (ApiKey.API_VERSIONS, 3, 4)],
)
def test_the_response_header_is_the_one_its_version_has(api_key: ApiKey, version: int, size: int):
    payload = struct.pack(">i", 5) + b"\x00" + bytes(16)  # correlation id, an empty tag section (flexible), body
    assert response_header_size(api_key, version, payload) == size


@pytest.mark.parametrize(("version", "cls"), [(0, HeartbeatV0), (4, HeartbeatV4)])
def test_a_response_decodes_at_its_version(version: int, cls: type):
    answer = entity(cls, error_code=ErrorCode.rebalance_in_progress)
    payload = encode_response(ApiKey.HEARTBEAT, version, 5, answer)[4:]
    assert correlation_id_of(payload) == 5
    assert decode_response(ApiKey.HEARTBEAT, version, payload) == answer


def test_an_answer_without_a_correlation_id_is_a_protocol_error():
    with pytest.raises(UpstreamProtocolError, match="no correlation id"):
        correlation_id_of(b"\x00\x01")


@pytest.mark.parametrize(
    "damage",
    [
        lambda payload: payload[: len(payload) // 2],  # cut short
        lambda payload: payload[:5] + b"\xff" * (len(payload) - 5),  # lengths that do not fit
        lambda payload: payload[:4] + b"\x05\x81",  # a tag section it cannot hold
    ],
)
def test_an_unreadable_answer_is_a_protocol_error_not_a_crash(damage):
    payload = encode_response(ApiKey.METADATA, 12, 5, zero(MetadataResponse))[4:]
    assert decode_response(ApiKey.METADATA, 12, payload) == zero(MetadataResponse)
    with pytest.raises(UpstreamProtocolError):
        decode_response(ApiKey.METADATA, 12, damage(payload))


# --------------------------------------------------------------------------------------------- addresses


def address_fields(cls: type[Any], path: str = "") -> set[str]:
    """Every field of a response entity, nested ones included, whose name says it holds a host or a port."""
    found = set()
    for each in dataclasses.fields(cls):
        name = f"{path}{each.name}"
        if any(word in each.name for word in ("host", "port", "endpoint")):
            found.add(name)
        for arg in typing.get_args(each.type) or (each.type,):
            for inner in typing.get_args(arg) or (arg,):
                if dataclasses.is_dataclass(inner) and isinstance(inner, type):
                    found |= address_fields(inner, f"{name}.")
    return found


def test_the_answers_carry_no_broker_address():
    """Why the proxy relays them without rewriting: the heartbeat names the member and its assignment by topic id;
    the description's only address is each member's ``client_host``, the address the upstream saw the member
    connect from (the proxy's own outbound address), never a broker's."""
    assert address_fields(heartbeat_response.ConsumerGroupHeartbeatResponse) == set()
    assert address_fields(describe_response.ConsumerGroupDescribeResponse) == {"groups.members.client_host"}


# ------------------------------------------------------------------------------- hostile upstream answers

DECODED_ANSWERS = [
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0),
    (ApiKey.OFFSET_COMMIT, 9),
    (ApiKey.OFFSET_FETCH, 9),
]


@pytest.mark.parametrize(("api_key", "version"), DECODED_ANSWERS, ids=lambda v: str(v))
def test_a_hostile_upstream_answer_is_a_protocol_error_not_an_allocation(api_key: ApiKey, version: int):
    """The answers these handlers decode (to merge refusals, check assignments, fill operations) go through the same
    length check as requests: a hostile first length is refused before kio reserves anything."""
    bodies = hostile_bodies(response_schema(api_key, version))
    assert len(bodies) > 3
    for label, body in bodies:
        payload = struct.pack(">i", 5) + b"\x00" + body  # correlation id, the flexible header's empty tag section
        try:
            decode_response(api_key, version, payload)
        except UpstreamProtocolError:
            continue
        pytest.fail(f"{api_key.name} v{version} {label}: decoded")

"""ApiVersions' answer is made and encoded once per (version, error, versions offered) and reused: the bytes are
exactly kio's encoding of a freshly built answer, for every version, for the v0 refusal of a newer client, and for a
proxy's negotiated versions."""

from __future__ import annotations

import io
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.api_versions import NO_FEATURES, Features, _api_versions, api_versions_response
from kafkaguard.protocol.codec import Versions, encode_response, writer_for
from kafkaguard.protocol.framing import encode_frame
from kafkaguard.server.versions import SERVER_VERSIONS

LOW, HIGH = SERVER_VERSIONS[ApiKey.API_VERSIONS]


def fresh_encoding(
    correlation_id: int, version: int, error: ErrorCode, versions: Versions, features: Features = NO_FEATURES
) -> bytes:
    """The frame as encoded without any memo: header v0 (always, for ApiVersions), then kio's writer."""
    body = _api_versions(version, error, versions, features)
    buffer = io.BytesIO()
    buffer.write(correlation_id.to_bytes(4, "big", signed=True))
    writer_for(type(body))(buffer, body)
    return encode_frame(buffer.getvalue())


@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
@pytest.mark.parametrize("error", [ErrorCode.none, ErrorCode.unsupported_version])
def test_the_reused_answer_is_byte_identical_to_a_fresh_one(version: int, error: ErrorCode):
    first = api_versions_response(version, SERVER_VERSIONS, error)
    assert api_versions_response(version, SERVER_VERSIONS, error) is first  # made once
    for correlation_id in (0, 7, 2**31 - 1):
        assert encode_response(ApiKey.API_VERSIONS, version, correlation_id, first) == fresh_encoding(
            correlation_id, version, error, SERVER_VERSIONS
        )


def test_other_versions_offered_get_their_own_answer():
    negotiated: Versions = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (4, 12)}  # what a proxy could offer
    ours = api_versions_response(3, SERVER_VERSIONS)
    theirs = api_versions_response(3, negotiated)
    assert theirs is not ours
    assert {int(k.api_key) for k in theirs.api_keys} == {int(ApiKey.API_VERSIONS), int(ApiKey.METADATA)}
    assert encode_response(ApiKey.API_VERSIONS, 3, 5, theirs) == fresh_encoding(5, 3, ErrorCode.none, negotiated)
    # an equal mapping that is another object is answered from its own entry, never from a stale id
    again = dict(negotiated)
    assert api_versions_response(3, again) == theirs


@pytest.mark.parametrize("correlation_id", [0, 1, 99, 2**31 - 1, -1, -(2**31)])
@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 2),
                                                  (ApiKey.METADATA, 8), (ApiKey.METADATA, 12),
                                                  (ApiKey.API_VERSIONS, 3)])  # fmt: skip
def test_the_hand_written_response_header_is_kios(api_key: ApiKey, version: int, correlation_id: int) -> None:
    from kio.schema.response_header.v0.header import ResponseHeader as V0
    from kio.schema.response_header.v1.header import ResponseHeader as V1
    from kio.static.primitive import i32

    from kafkaguard.protocol.codec import response_schema, write_response_header

    ours, kios = io.BytesIO(), io.BytesIO()
    write_response_header(ours, api_key, version, correlation_id)
    flexible = api_key is not ApiKey.API_VERSIONS and response_schema(api_key, version).__flexible__
    header = V1 if flexible else V0
    writer_for(header)(kios, header(correlation_id=i32(correlation_id)))
    assert ours.getvalue() == kios.getvalue()
    assert len(ours.getvalue()) == (5 if flexible else 4)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("mechanisms", [("SCRAM-SHA-256",), ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")])
def test_the_remembered_handshake_answer_is_kios_encoding(version: int, mechanisms: tuple[str, ...]) -> None:
    from kafkaguard.protocol.builders import sasl_handshake_response
    from kafkaguard.protocol.codec import response_schema
    from kafkaguard.protocol.sasl import accepted_handshake

    cls = response_schema(ApiKey.SASL_HANDSHAKE, version)
    fresh = sasl_handshake_response(cls, error_code=ErrorCode.none, mechanisms=mechanisms)
    remembered = accepted_handshake(version, mechanisms)
    assert remembered is accepted_handshake(version, mechanisms)  # made once
    assert encode_response(ApiKey.SASL_HANDSHAKE, version, 7, remembered) == encode_response(
        ApiKey.SASL_HANDSHAKE, version, 7, fresh
    )


FEATURES = Features(
    supported=(("metadata.version", 1, 21), ("group.version", 0, 1)),
    finalized=(("metadata.version", 21, 21), ("group.version", 1, 1)),
    epoch=42,
)


@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
def test_features_are_answered_from_v3_and_min_0_ones_from_v4(version: int):
    made = api_versions_response(version, SERVER_VERSIONS, features=FEATURES)
    answer: Any = made  # its version's fields, read below
    assert api_versions_response(version, SERVER_VERSIONS, features=FEATURES) is made  # made once, as without features
    assert encode_response(ApiKey.API_VERSIONS, version, 5, answer) == fresh_encoding(
        5, version, ErrorCode.none, SERVER_VERSIONS, FEATURES
    )
    if version < 3:
        assert getattr(answer, "supported_features", None) is None  # v0-v2 have no features at all
        return
    supported = {f.name: (int(f.min_version), int(f.max_version)) for f in answer.supported_features}
    # Kafka 3.9 omits a supported feature whose minimum is 0 below v4 (KAFKA-17492): clients before 3.9 fail on it
    assert supported == ({"metadata.version": (1, 21), "group.version": (0, 1)} if version >= 4
                         else {"metadata.version": (1, 21)})  # fmt: skip
    assert {f.name: int(f.max_version_level) for f in answer.finalized_features} == {
        "metadata.version": 21, "group.version": 1,
    }  # fmt: skip
    assert int(answer.finalized_features_epoch) == 42
    assert api_versions_response(version, SERVER_VERSIONS) is not answer  # without features: its own answer
    assert getattr(api_versions_response(version, SERVER_VERSIONS), "finalized_features_epoch", -1) == -1

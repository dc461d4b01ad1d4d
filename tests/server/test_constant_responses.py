"""ApiVersions' answer is made and encoded once per (version, error, versions offered) and reused: the bytes are
exactly kio's encoding of a freshly built answer, for every version, for the v0 refusal of a newer client, and for a
proxy's negotiated versions."""

from __future__ import annotations

import io

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.api_versions import _api_versions, api_versions_response
from kafkaguard.protocol.codec import SUPPORTED_VERSIONS, Versions, encode_response, writer_for
from kafkaguard.protocol.framing import encode_frame

LOW, HIGH = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]


def fresh_encoding(correlation_id: int, version: int, error: ErrorCode, versions: Versions) -> bytes:
    """The frame as encoded without any memo: header v0 (always, for ApiVersions), then kio's writer."""
    body = _api_versions(version, error, versions)
    buffer = io.BytesIO()
    buffer.write(correlation_id.to_bytes(4, "big", signed=True))
    writer_for(type(body))(buffer, body)
    return encode_frame(buffer.getvalue())


@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
@pytest.mark.parametrize("error", [ErrorCode.none, ErrorCode.unsupported_version])
def test_the_reused_answer_is_byte_identical_to_a_fresh_one(version: int, error: ErrorCode):
    first = api_versions_response(version, error)
    assert api_versions_response(version, error) is first  # made once
    for correlation_id in (0, 7, 2**31 - 1):
        assert encode_response(ApiKey.API_VERSIONS, version, correlation_id, first) == fresh_encoding(
            correlation_id, version, error, SUPPORTED_VERSIONS
        )


def test_other_versions_offered_get_their_own_answer():
    negotiated: Versions = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (4, 12)}  # what a proxy could offer
    ours = api_versions_response(3)
    theirs = api_versions_response(3, versions=negotiated)
    assert theirs is not ours
    assert {int(k.api_key) for k in theirs.api_keys} == {int(ApiKey.API_VERSIONS), int(ApiKey.METADATA)}
    assert encode_response(ApiKey.API_VERSIONS, 3, 5, theirs) == fresh_encoding(5, 3, ErrorCode.none, negotiated)
    # an equal mapping that is another object is answered from its own entry, never from a stale id
    again = dict(negotiated)
    assert api_versions_response(3, versions=again) == theirs

"""The ApiVersions (18) answer: which APIs and versions a connection offers (the server's, or what the proxy
negotiated with its upstream). Every connection asks first, and every connection of a listener gets the same
answer, so it is made once and kept (``codec.constant_response``)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol import builders  # qualified: this module's own names (api_version, …) are taken
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import SUPPORTED_VERSIONS, Versions, constant_response, response_schema
from kafkaguard.protocol.messages import ApiVersionsResponse

#: The answers made so far, by (version, error, the versions mapping's identity). A versions mapping is never
#: changed once made (the server's, or what the proxy negotiated); it is kept in the entry so that its id stays its
#: own.
_ANSWERS: dict[tuple[int, ErrorCode, int], tuple[Versions, ApiVersionsResponse]] = {}
_ANSWERS_MAX = 64


def api_versions_response(
    api_version: int, error: ErrorCode = ErrorCode.none, versions: Versions = SUPPORTED_VERSIONS
) -> ApiVersionsResponse:
    """``versions`` as ApiVersions ``api_version`` answers them; also the v0 answer to an ApiVersions version we do
    not support (with UNSUPPORTED_VERSION), so that the client can retry with one we do."""
    key = (api_version, error, id(versions))
    made = _ANSWERS.get(key)
    if made is not None and made[0] is versions:
        return made[1]
    response = constant_response(_api_versions(api_version, error, versions))
    if len(_ANSWERS) >= _ANSWERS_MAX:
        _ANSWERS.clear()
    _ANSWERS[key] = (versions, response)
    return response


def _api_versions(api_version: int, error: ErrorCode, versions: Versions) -> ApiVersionsResponse:
    cls: type[ApiVersionsResponse] = response_schema(ApiKey.API_VERSIONS, api_version)
    keys = tuple(
        builders.api_version(cls, api_key=key.value, min_version=low, max_version=high)
        for key, (low, high) in sorted(versions.items())
    )
    return builders.api_versions_response(cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)

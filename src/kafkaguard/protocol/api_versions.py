"""The ApiVersions (18) answer: which APIs and versions a connection offers (the server's, or what the proxy
negotiated with its upstream), and from v3 the cluster's features (KIP-584: ``SupportedFeatures``,
``FinalizedFeatures``, ``FinalizedFeaturesEpoch``, tagged fields) — the proxy's, filtered to what it offers
(``proxy.versions.negotiate_features``); the server has none. Every connection asks first, and every connection of
a listener gets the same answer, so it is made once and kept (``codec.constant_response``)."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol import builders  # qualified: this module's own names (api_version, …) are taken
from kafkaguard.protocol.build import NO_THROTTLE
from kafkaguard.protocol.codec import Versions, constant_response, response_schema
from kafkaguard.protocol.messages import ApiVersionsResponse

#: ApiVersions v3 is the first with features (tagged fields).
_FEATURES_FROM = 3
#: ApiVersions v4 is the first whose supported features may have a minimum version of 0 (KAFKA-17011).
_ZERO_MIN_FROM = 4


@dataclass(frozen=True, slots=True)
class Features:
    """What ApiVersions v3+ says of the cluster's features. ``supported``: (name, min version, max version) of the
    features the broker can run; ``finalized``: (name, min level, max level) of those the cluster runs (level 0 is
    "off" and never listed); ``epoch``: the finalized features' epoch, -1 unknown."""

    supported: tuple[tuple[str, int, int], ...] = ()
    finalized: tuple[tuple[str, int, int], ...] = ()
    epoch: int = -1


#: No features (the server's; a proxy whose upstream says none).
NO_FEATURES = Features()

#: The answers made so far, by (version, error, the versions mapping's identity, the features' identity). Neither is
#: ever changed once made (the server's, or what the proxy negotiated); both are kept in the entry so that their ids
#: stay their own.
_ANSWERS: dict[tuple[int, ErrorCode, int, int], tuple[Versions, Features, ApiVersionsResponse]] = {}
_ANSWERS_MAX = 64


def api_versions_response(
    api_version: int,
    versions: Versions,
    error: ErrorCode = ErrorCode.none,
    features: Features = NO_FEATURES,
) -> ApiVersionsResponse:
    """``versions`` (and, from v3, ``features``) as ApiVersions ``api_version`` answers them; also the v0 answer to
    an ApiVersions version we do not support (with UNSUPPORTED_VERSION), so that the client can retry with one we
    do."""
    key = (api_version, error, id(versions), id(features))
    made = _ANSWERS.get(key)
    if made is not None and made[0] is versions and made[1] is features:
        return made[2]
    response = constant_response(_api_versions(api_version, error, versions, features))
    if len(_ANSWERS) >= _ANSWERS_MAX:
        _ANSWERS.clear()
    _ANSWERS[key] = (versions, features, response)
    return response


def _api_versions(
    api_version: int, error: ErrorCode, versions: Versions, features: Features = NO_FEATURES
) -> ApiVersionsResponse:
    cls: type[ApiVersionsResponse] = response_schema(ApiKey.API_VERSIONS, api_version)
    keys = tuple(
        builders.api_version(cls, api_key=key.value, min_version=low, max_version=high)
        for key, (low, high) in sorted(versions.items())
    )
    if features is NO_FEATURES or api_version < _FEATURES_FROM:  # the fields' defaults; v0-v2 have none of them
        return builders.api_versions_response(cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)
    supported = tuple(
        builders.supported_feature_key(cls, name=name, min_version=low, max_version=high)
        for name, low, high in features.supported
        # Kafka omits these below v4: "some older clients will have deserialization problems if a feature's minimum
        # supported level is 0" (ApiVersionsResponse.maybeFilterSupportedFeatureKeys, 3.9; KAFKA-17492)
        if low > 0 or api_version >= _ZERO_MIN_FROM
    )
    finalized = tuple(
        builders.finalized_feature_key(cls, name=name, min_version_level=low, max_version_level=high)
        for name, low, high in features.finalized
    )
    return builders.api_versions_response(
        cls,
        error_code=error,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
        supported_features=supported,
        finalized_features=finalized,
        finalized_features_epoch=features.epoch,
    )

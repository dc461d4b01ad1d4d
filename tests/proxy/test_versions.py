"""``proxy.versions``: what the proxy offers, given what the upstream serves. Metadata v1-v3 are forwarded as v4
(they cannot say "without auto-creation"), so they are offered exactly when the upstream serves v4."""

from __future__ import annotations

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsRequestV4

from kafkaguard.authorizer.requests import REQUIREMENTS, ApiKey
from kafkaguard.protocol.api_versions import Features
from kafkaguard.proxy.versions import (
    CAPS,
    FEATURES,
    FORWARDED_FROM,
    forwarded_version,
    negotiate,
    negotiate_features,
    servable_level,
)
from tests.proxy.fake_kafka import FakeKafka, fake_kafka, start_proxy
from tests.wire import Wire

METADATA = ApiKey.METADATA


@pytest.mark.parametrize(
    ("upstream", "offered"),
    [
        ((0, 12), (1, 12)),  # Kafka 3.9
        ((4, 13), (1, 12)),  # Kafka 4.0 dropped v0-v3: the proxy still serves them, at v4
        ((0, 3), None),  # an upstream without v4: v1-v3 could only go as they are, creating what they name
        ((5, 12), (5, 12)),
    ],
)
def test_metadata_is_offered_below_v4_only_when_the_upstream_serves_v4(upstream, offered):
    versions = negotiate({int(METADATA): upstream}, [METADATA])
    assert versions.get(METADATA) == offered


@pytest.mark.parametrize(("version", "forwarded"), [(1, 4), (2, 4), (3, 4), (4, 4), (12, 12)])
def test_metadata_below_v4_is_forwarded_at_v4(version, forwarded):
    assert forwarded_version(METADATA, version) == forwarded


def test_apis_without_a_floor_are_forwarded_at_the_client_version():
    assert set(FORWARDED_FROM) == {METADATA}
    assert all(forwarded_version(key, high) == high for key, (_low, high) in CAPS.items())
    assert forwarded_version(ApiKey.FETCH, 4) == 4


# --------------------------------------------------------------------------------- features (ApiVersions v3+)

#: A Kafka 4.0 cluster with both new protocols on: what its ApiVersions v4 says (levels from Kafka's enums).
UPSTREAM_FEATURES = Features(
    supported=(("metadata.version", 7, 25), ("kraft.version", 0, 1), ("group.version", 0, 1),
               ("transaction.version", 0, 2), ("share.version", 0, 1)),
    finalized=(("metadata.version", 25, 25), ("kraft.version", 1, 1), ("group.version", 1, 1),
               ("transaction.version", 2, 2), ("share.version", 1, 1)),
    epoch=7,
)  # fmt: skip
#: What a proxy offers without the KIP-848 handlers and with Produce up to v11 (this branch's caps).
WITHOUT_KIP848: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11), ApiKey.END_TXN: (0, 3), ApiKey.TXN_OFFSET_COMMIT: (0, 3), ApiKey.OFFSET_COMMIT: (2, 8),
}  # fmt: skip
WITH_KIP848 = WITHOUT_KIP848 | {ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 0), ApiKey.OFFSET_COMMIT: (2, 9)}


def finalized(features: Features) -> dict[str, int]:
    return {name: high for name, _low, high in features.finalized}


def test_features_are_capped_at_what_the_offered_apis_serve():
    got = negotiate_features(UPSTREAM_FEATURES, WITHOUT_KIP848)
    # no ConsumerGroupHeartbeat: no group.version at all (level 0 is "off", never listed); Produce v11 only:
    # transactions v1 (Java's producer turns v2 on at transaction.version >= 2); share.version is unknown: dropped
    assert finalized(got) == {"metadata.version": 25, "kraft.version": 1, "transaction.version": 1}
    assert {name: (low, high) for name, low, high in got.supported} == {
        "metadata.version": (7, 25), "kraft.version": (0, 1), "group.version": (0, 0), "transaction.version": (0, 1),
    }  # fmt: skip
    assert got.epoch == 7


def test_group_version_is_forwarded_once_the_consumer_protocol_is_offered():
    got = negotiate_features(UPSTREAM_FEATURES, WITH_KIP848)
    assert finalized(got)["group.version"] == 1
    # ConsumerGroupHeartbeat without OffsetCommit v9: the coordinator would refuse the new consumer's commits
    half = WITH_KIP848 | {ApiKey.OFFSET_COMMIT: (2, 8)}
    assert "group.version" not in finalized(negotiate_features(UPSTREAM_FEATURES, half))


def test_transaction_version_2_needs_every_api_of_transactions_v2():
    v2 = WITHOUT_KIP848 | {ApiKey.PRODUCE: (3, 12), ApiKey.END_TXN: (0, 5), ApiKey.TXN_OFFSET_COMMIT: (0, 5)}
    assert finalized(negotiate_features(UPSTREAM_FEATURES, v2))["transaction.version"] == 2
    for api in (ApiKey.PRODUCE, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT):
        short = v2 | {api: (0, v2[api][1] - 1)}
        assert finalized(negotiate_features(UPSTREAM_FEATURES, short))["transaction.version"] == 1, api.api_name


@pytest.mark.parametrize(
    ("name", "level"),
    [("metadata.version", 2**15 - 1), ("group.version", 0), ("transaction.version", 1), ("share.version", -1),
     ("test.feature.version", -1)],
)  # fmt: skip
def test_servable_levels(name: str, level: int):
    assert servable_level(name, WITHOUT_KIP848) == level


def test_a_level_above_what_the_proxy_knows_is_capped():
    future = Features(finalized=(("group.version", 2, 2),), supported=(("group.version", 2, 3),), epoch=1)
    got = negotiate_features(future, WITH_KIP848)
    assert got.finalized == (("group.version", 1, 1),)  # level 2's client behaviour is unknown: fail closed
    assert got.supported == ()  # the broker cannot run level 1 (min 2): not offered


def test_every_api_a_feature_needs_is_one_the_proxy_can_authorize():
    """A rule naming an API the proxy has no version cap for could never be met; one with a version above the
    API's highest Kafka version would be a typo."""
    for name, rule in FEATURES.items():
        for level, needs in rule.needs.items():
            for api, version in needs.items():
                assert api in REQUIREMENTS, f"{name} level {level}: {api.api_name} is not an API kafkaguard knows"
                assert 0 <= version <= 20, f"{name} level {level}: {api.api_name} v{version}"


def test_the_proxy_answers_the_upstreams_features_filtered(tmp_path):
    """End to end: the proxy reads its upstream's features at start (asking ApiVersions v4, so min-0 features are
    there) and a client's ApiVersions v3 / v4 gets them filtered by what this proxy offers."""
    with fake_kafka(FakeKafka(features=UPSTREAM_FEATURES)) as upstream:
        proxy = start_proxy(tmp_path, upstream.address)
        try:
            offered = proxy.server.versions  # type: ignore[attr-defined]
            with Wire(proxy.sasl) as wire:
                v3 = wire.request(ApiVersionsRequestV3(client_software_name="t", client_software_version="1"))
                v4 = wire.request(ApiVersionsRequestV4(client_software_name="t", client_software_version="1"))
        finally:
            proxy.stop()
    asked = [r.header.api_version for r in upstream.received if r.api_key is ApiKey.API_VERSIONS]
    assert 4 in asked
    expected = negotiate_features(UPSTREAM_FEATURES, offered)
    consumer_protocol = ApiKey.CONSUMER_GROUP_HEARTBEAT in offered and offered[ApiKey.OFFSET_COMMIT][1] >= 9
    assert ("group.version" in finalized(expected)) == consumer_protocol  # whichever helper's handlers are merged
    for answer in (v3, v4):
        assert {f.name: int(f.max_version_level) for f in answer.finalized_features} == finalized(expected)
        assert int(answer.finalized_features_epoch) == 7
    assert {f.name for f in v4.supported_features} == {name for name, _low, _high in expected.supported}
    assert {f.name for f in v3.supported_features} == {n for n, low, _high in expected.supported if low > 0}

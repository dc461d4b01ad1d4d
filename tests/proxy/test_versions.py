"""``proxy.versions``: what the proxy offers, given what the upstream serves. Metadata v1-v3 are forwarded as v4
(they cannot say "without auto-creation"), so they are offered exactly when the upstream serves v4."""

from __future__ import annotations

import pytest

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.proxy.versions import CAPS, FORWARDED_FROM, forwarded_version, negotiate

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

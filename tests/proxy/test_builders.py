"""``proxy.builders``' generated ``rebuild_*`` of requests: typed wrappers of ``rebuild_request``, as strict."""

from __future__ import annotations

import pytest

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import WideningRequestError, build
from kafkaguard.protocol.codec import request_schema
from kafkaguard.proxy.builders import rebuild_metadata_request
from kafkaguard.proxy.messages import MetadataRequest


def _metadata(version: int) -> MetadataRequest:
    built: MetadataRequest = build(request_schema(ApiKey.METADATA, version), topics=None)
    return built


def test_a_change_the_version_has_is_applied() -> None:
    changed = rebuild_metadata_request(_metadata(4), allow_auto_topic_creation=False)
    assert getattr(changed, "allow_auto_topic_creation") is False  # noqa: B009 - v4+ only


def test_a_value_the_version_cannot_say_is_refused_not_dropped() -> None:
    # Metadata v1-v3 has no allow_auto_topic_creation: its absence means True, so False cannot go upstream
    with pytest.raises(WideningRequestError, match="allow_auto_topic_creation"):
        rebuild_metadata_request(_metadata(1), allow_auto_topic_creation=False)
    assert rebuild_metadata_request(_metadata(1), allow_auto_topic_creation=True) == _metadata(1)

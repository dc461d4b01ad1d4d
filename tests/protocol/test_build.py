"""``server.build``: responses drop what their version lacks; requests the proxy sends never drop a field whose value
differs from what its absence means (the Metadata v1-v3 auto-creation bypass of issue 24 came from such a drop)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.build import (
    NO_THROTTLE,
    WideningRequestError,
    absent_value,
    build,
    build_request,
    convert_request,
    convert_response,
    nested,
    rebuild,
    rebuild_request,
)
from kafkaguard.protocol.codec import request_schema, response_schema

METADATA_V1, METADATA_V4 = request_schema(ApiKey.METADATA, 1), request_schema(ApiKey.METADATA, 4)


def metadata_v1(*names: str) -> object:
    topic_cls = nested(METADATA_V1, "MetadataRequestTopic")
    return METADATA_V1(topics=tuple(topic_cls(name=name) for name in names))


@pytest.mark.parametrize(
    ("api_key", "version", "name", "expected"),
    [
        (ApiKey.METADATA, 1, "allow_auto_topic_creation", True),  # kio's default, declared from v4
        (ApiKey.FETCH, 4, "session_id", 0),
        (ApiKey.FETCH, 4, "session_epoch", -1),
        (ApiKey.FETCH, 4, "forgotten_topics_data", ()),  # an array: empty
        (ApiKey.FETCH, 4, "rack_id", ""),
        (ApiKey.METADATA, 4, "include_topic_authorized_operations", False),  # no default: the type's zero
        (ApiKey.LIST_OFFSETS, 1, "isolation_level", 0),
        (ApiKey.JOIN_GROUP, 0, "group_instance_id", None),
    ],
)
def test_absent_value_is_what_kafka_reads_for_a_missing_field(api_key, version, name, expected):
    assert absent_value(request_schema(api_key, version), name) == expected


def test_absent_value_of_a_field_no_version_declares_is_a_type_error():
    with pytest.raises(TypeError, match="no field 'no_such_field'"):
        absent_value(METADATA_V1, "no_such_field")


def test_uuid_absence_is_the_zero_uuid_or_none():
    topic_cls = nested(METADATA_V1, "MetadataRequestTopic")
    assert absent_value(topic_cls, "topic_id") == uuid.UUID(int=0)
    assert build_request(topic_cls, name="t", topic_id=None) == topic_cls(name="t")
    with pytest.raises(WideningRequestError):
        build_request(topic_cls, name="t", topic_id=uuid.uuid4())  # v1 cannot name a topic by id


def test_rebuild_drops_silently_but_rebuild_request_refuses_a_value_absence_would_change():
    """The bypass: v1 has no allow_auto_topic_creation; ``rebuild`` dropped False, Kafka read true. Fails before
    the fix (``rebuild_request`` did not exist; the proxy used ``rebuild``)."""
    request = metadata_v1("feed-x")
    assert rebuild(request, allow_auto_topic_creation=False) == request  # dropped: fine for a response, not here
    with pytest.raises(WideningRequestError, match=r"allow_auto_topic_creation.*False would be read as True"):
        rebuild_request(request, allow_auto_topic_creation=False)
    assert rebuild_request(request, allow_auto_topic_creation=True) == request  # what absence means anyway


def test_requests_keep_values_their_version_has():
    request = rebuild_request(METADATA_V4(topics=None), allow_auto_topic_creation=False)
    assert request.allow_auto_topic_creation is False
    fetch_v4 = request_schema(ApiKey.FETCH, 4)
    body = fetch_v4(replica_id=-1, max_wait=timedelta(0), min_bytes=1, topics=())
    assert rebuild_request(body, session_id=0, session_epoch=-1, forgotten_topics_data=()) == body
    with pytest.raises(WideningRequestError, match="session_epoch"):
        rebuild_request(body, session_epoch=3)


def test_names_no_version_declares_are_type_errors_for_requests_too():
    with pytest.raises(TypeError, match="declares no field 'topicz'"):
        rebuild_request(metadata_v1(), topicz=())


def test_convert_request_up_keeps_the_meaning_of_a_missing_field():
    upgraded = convert_request(metadata_v1("a", "b"), METADATA_V4)
    assert type(upgraded) is METADATA_V4
    assert upgraded.allow_auto_topic_creation is True  # v1's absence, said aloud
    assert [t.name for t in upgraded.topics] == ["a", "b"]
    assert type(upgraded.topics[0]) is nested(METADATA_V4, "MetadataRequestTopic")


def test_convert_request_down_refuses_what_the_lower_version_cannot_say():
    asking = METADATA_V4(topics=(), allow_auto_topic_creation=False)
    with pytest.raises(WideningRequestError):
        convert_request(asking, METADATA_V1)
    assert convert_request(METADATA_V4(topics=(), allow_auto_topic_creation=True), METADATA_V1) == METADATA_V1(
        topics=()
    )


def test_convert_response_drops_what_the_client_version_lacks():
    v4, v1 = response_schema(ApiKey.METADATA, 4), response_schema(ApiKey.METADATA, 1)
    broker_cls = nested(v4, "MetadataResponseBroker")
    answer = build(v4, throttle_time=NO_THROTTLE, brokers=(broker_cls(node_id=1, host="h", port=9, rack=None),),
                   cluster_id="c", controller_id=1, topics=())  # fmt: skip
    converted = convert_response(answer, v1)
    assert type(converted) is v1
    assert type(converted.brokers[0]) is nested(v1, "MetadataResponseBroker")
    assert converted.brokers[0].host == "h"
    assert not hasattr(converted, "cluster_id")

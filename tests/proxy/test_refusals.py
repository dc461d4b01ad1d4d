"""``proxy.refusals``: a refused topic's partitions as Kafka answers them, from one typed function per API."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import ItemError, KafkaErrorCode
from kafkaguard.protocol.build import nested
from kafkaguard.protocol.codec import response_schema
from kafkaguard.protocol.replies import Close
from kafkaguard.proxy.handlers.produce import _refused, _refused_topic
from kafkaguard.proxy.handlers.transactions import _refused_producers
from kafkaguard.proxy.messages import PRODUCE
from kafkaguard.proxy.produce_request import ProducedTopic
from kafkaguard.proxy.refusals import TOPIC_DENIED, code_and_message, refused_topics, with_refused
from kafkaguard.proxy.scope import ProxyScope


def test_every_partition_named_gets_the_error_and_kafkas_placeholders() -> None:
    cls = response_schema(ApiKey.PRODUCE, 9)
    refused: Any = _refused(cls, [ProducedTopic("orders", (0, 2))], TOPIC_DENIED)  # v9: error_message
    [topic] = refused
    assert topic.name == "orders"
    assert [(p.index, p.error_code, p.error_message, p.base_offset) for p in topic.partition_responses] == [
        (0, ErrorCode.topic_authorization_failed, None, -1),
        (2, ErrorCode.topic_authorization_failed, None, -1),
    ]
    assert type(topic) is nested(cls, "TopicProduceResponse")  # the response's own version of the entity


def test_refused_topics_answers_each_key_with_its_partitions() -> None:
    cls = response_schema(ApiKey.PRODUCE, 3)
    topics = refused_topics(_refused_topic, cls, [("a", [1]), ("b", [])], TOPIC_DENIED)
    assert [(t.name, [p.index for p in t.partition_responses]) for t in topics] == [("a", [1]), ("b", [])]


def test_bare_indexes_and_the_default_text_rule() -> None:
    cls = response_schema(ApiKey.DESCRIBE_PRODUCERS, 0)
    answer = _refused_producers(cls, "orders", [1], TOPIC_DENIED)
    [partition] = answer.partitions
    assert (partition.partition_index, partition.error_message) == (1, "Topic authorization failed.")


def test_an_entity_without_a_message_gets_the_code_alone() -> None:
    assert code_and_message(TOPIC_DENIED) == {"error_code": ErrorCode.topic_authorization_failed}
    denied = ItemError(KafkaErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert code_and_message(denied, code="c", message="m") == {
        "c": ErrorCode.invalid_request,
        "m": "Duplicate topic name.",
    }


def test_nothing_allowed_is_answered_here_without_going_upstream() -> None:
    own = Close("the proxy's own answer")
    scope = cast(ProxyScope, object())  # never read: nothing goes upstream

    def merged(_answer: object) -> Close:
        raise AssertionError("nothing was forwarded")

    assert asyncio.run(with_refused(scope, PRODUCE, None, own=lambda: own, merged=merged)) is own

"""``proxy.refusals``: a refused topic's partitions as Kafka answers them, from one description per API."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import ItemError, KafkaErrorCode
from kafkaguard.protocol.build import build, nested
from kafkaguard.protocol.codec import request_schema, response_schema
from kafkaguard.proxy.refusals import TOPIC_DENIED, PartitionRefusal, code_and_message

PRODUCE = PartitionRefusal(
    "TopicProduceResponse", "PartitionProduceResponse", partitions="partition_data", index="index",
    answer_partitions="partition_responses", answer_index="index", message="error_message",
    placeholders={"base_offset": -1, "log_append_time": None, "log_start_offset": -1, "record_errors": ()},
)  # fmt: skip


def _produce_topic(version: int, name: str, indexes: tuple[int, ...]) -> Any:
    cls = request_schema(ApiKey.PRODUCE, version)
    partition_cls = nested(cls, "PartitionProduceData")
    partitions = tuple(build(partition_cls, index=i, records=None) for i in indexes)
    return build(nested(cls, "TopicProduceData"), name=name, partition_data=partitions)


def test_every_partition_named_gets_the_error_and_kafkas_placeholders() -> None:
    cls = response_schema(ApiKey.PRODUCE, 9)
    [topic] = PRODUCE.refused(cls, [_produce_topic(9, "orders", (0, 2))], TOPIC_DENIED)
    assert topic.name == "orders"
    assert [(p.index, p.error_code, p.error_message, p.base_offset) for p in topic.partition_responses] == [
        (0, ErrorCode.topic_authorization_failed, None, -1),
        (2, ErrorCode.topic_authorization_failed, None, -1),
    ]


def test_bare_indexes_and_the_default_text_rule() -> None:
    producers = PartitionRefusal(
        "TopicResponse", "PartitionResponse", partitions="partition_indexes", index=None, message="error_message",
        default_text=True, placeholders={"active_producers": ()},
    )  # fmt: skip
    cls = response_schema(ApiKey.DESCRIBE_PRODUCERS, 0)
    answer = producers.topic_answer(cls, "orders", [1], TOPIC_DENIED)
    [partition] = answer.partitions
    assert (partition.partition_index, partition.error_message) == (1, "Topic authorization failed.")


def test_an_entity_without_a_message_gets_the_code_alone() -> None:
    assert code_and_message(TOPIC_DENIED) == {"error_code": ErrorCode.topic_authorization_failed}
    denied = ItemError(KafkaErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert code_and_message(denied, code="c", message="m") == {
        "c": ErrorCode.invalid_request,
        "m": "Duplicate topic name.",
    }

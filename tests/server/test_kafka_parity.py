"""Regression tests for the differences the differential suite (tests/kafka/differential) found between kafkaguard
and a real Kafka 3.9 broker, each fixed to Kafka's answer; they run without Kafka."""

from __future__ import annotations

from datetime import timedelta

from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from kafkaguard.config import SecurityProtocol
from tests.kafka.differential.runner import (
    CLUSTER,
    CREATE,
    DESCRIBE,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    acl_filter,
    create_acls,
    creation,
    delete_acls,
    describe_acls,
    describe_scram,
    metadata_request,
)
from tests.server.wire import Wire
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle

FIVE_SECONDS = i32Timedelta.parse(timedelta(seconds=5))


def admin_wire(server: ServerHandle) -> Wire:
    wire = Wire(server.address(SecurityProtocol.SASL_PLAINTEXT))
    wire.login(ADMIN, ADMIN_PASSWORD)
    return wire


def test_successful_acl_answers_carry_kafkas_empty_message(server: ServerHandle):
    with admin_wire(server) as wire:
        created = wire.request(create_acls(creation(TOPIC, "parity-ok", LITERAL, "User:parity", READ)))
        assert [(r.error_code.value, r.error_message) for r in created.results] == [(0, "")]
        described = wire.request(describe_acls(TOPIC, "parity-ok", LITERAL))
        assert (described.error_code.value, described.error_message) == (0, "")
        deleted = wire.request(delete_acls(acl_filter(TOPIC, "parity-ok", LITERAL)))
        assert deleted.filter_results[0].error_message is None  # Kafka sends null here
        scram = wire.request(describe_scram(ADMIN))
        assert (scram.error_code.value, scram.error_message) == (0, "")
        assert [(r.error_code.value, r.error_message) for r in scram.results] == [(0, "")]


def test_unrecognised_codes_are_answered_as_kafka_39_answers_them(server: ServerHandle):
    with admin_wire(server) as wire:
        for request in (describe_acls(operation=16), describe_acls(9), describe_acls(TOPIC, None, 5)):
            answer = wire.request(request)
            assert (answer.error_code.value, answer.error_message, answer.resources) == (0, "", ())
        zero = wire.request(describe_acls(operation=0))
        assert zero.error_code.value == 42 and "operation" in zero.error_message  # §16.3
        created = wire.request(create_acls(
            creation(9, "parity-x", LITERAL, "User:p", READ), creation(TOPIC, "parity-x", 5, "User:p", READ),
            creation(TOPIC, "parity-x", LITERAL, "User:p", 16), creation(TOPIC, "parity-x", LITERAL, "User:p", READ, 4),
            creation(CLUSTER, "other", LITERAL, "User:p", 16), creation(TOPIC, "", LITERAL, "User:p", 16),
        ))  # fmt: skip
        assert [(r.error_code.value, r.error_message) for r in created.results] == [
            (42, "Invalid resourceType UNKNOWN"),
            (42, "Invalid patternType UNKNOWN"),
            (42, "Invalid operation UNKNOWN"),
            (42, "Invalid permissionType UNKNOWN"),
            (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (42, "Invalid empty resource name"),
        ]
        deleted = wire.request(delete_acls(acl_filter(operation=16), acl_filter(9), acl_filter(TOPIC, None, 5),
                                           acl_filter(permission=4), acl_filter(9, operation=16)))  # fmt: skip
        assert [(r.error_code.value, r.error_message) for r in deleted.filter_results] == [
            (42, "Unknown entryFilter."),
            (42, "Unknown patternFilter."),
            (42, "Unknown patternFilter."),
            (42, "Unknown entryFilter."),
            (42, "Unknown patternFilter."),
        ]


def test_topic_answers_for_a_user_with_create_only(server: ServerHandle):
    server.add_user("parity-low", "low-secret")
    with admin_wire(server) as wire:
        for name, operation in (("parity-mine", CREATE), ("parity-absent", DESCRIBE)):
            wire.request(create_acls(creation(TOPIC, name, PREFIXED, "User:parity-low", operation)))
    with Wire(server.address(SecurityProtocol.SASL_PLAINTEXT)) as low:
        low.login("parity-low", "low-secret")
        topics = tuple(
            CreatableTopic(
                name=TopicName(n), num_partitions=i32(1), replication_factor=i16(1), assignments=(), configs=()
            )
            for n in ("parity-mine-1", "parity-other")
        )
        created = low.request(CreateTopicsRequest(topics=topics, timeout=FIVE_SECONDS))
        mine, other = created.topics
        # created, but without DESCRIBE_CONFIGS the caller sees no configs, partition count or replication factor
        assert (mine.error_code.value, mine.topic_config_error_code, mine.num_partitions, mine.replication_factor,
                mine.configs) == (0, 29, -1, -1, ())  # fmt: skip
        assert (other.error_code.value, other.error_message, other.topic_config_error_code, other.configs) == (
            29, "Authorization failed.", 0, ()
        )  # fmt: skip
        deleted = low.request(DeleteTopicsRequest(
            topics=tuple(DeleteTopicState(name=TopicName(n), topic_id=None) for n in ("parity-other", "parity-absent-2")
                         ),
            timeout=FIVE_SECONDS,
        ))  # fmt: skip
        # DESCRIBE, then existence, then DELETE: a missing topic the caller may describe is UNKNOWN_TOPIC_OR_PARTITION
        assert sorted((r.name, r.error_code.value, r.error_message) for r in deleted.responses) == [
            ("parity-absent-2", 3, "This server does not host this topic-partition."),
            ("parity-other", 29, "Topic authorization failed."),
        ]
        answer = low.request(metadata_request(["parity-absent-1"], auto_create=False, topic_ops=True))
        (topic,) = answer.topics
        # absent but describable: UNKNOWN_TOPIC_OR_PARTITION with the caller's operations on it (DESCRIBE = bit 8)
        assert (topic.error_code.value, topic.topic_authorized_operations) == (3, 1 << 8)

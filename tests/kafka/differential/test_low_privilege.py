"""A low-privilege user's view, against Kafka 3.9 and kafkaguard with identical users and ACLs: the admin APIs
without cluster rights, CreateTopics with CREATE on a prefix only, DeleteTopics with and without DELETE/DESCRIBE,
Metadata visibility and DescribeCluster (SEMANTICS.md §13)."""

from __future__ import annotations

import datetime

import kio.schema.metadata.v10.request as metadata_v10
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from tests.kafka.differential.runner import (
    AUTO_CREATED_AT_ONCE,
    CLUSTER,
    CREATE,
    DELETE,
    DESCRIBE,
    LITERAL,
    NOT_AUTHORIZED_TEXT,
    PREFIXED,
    READ,
    SCRAM_ALL_UNAUTHORIZED,
    TOPIC,
    TOPIC_CONFIGS,
    Pair,
    Target,
    acl_filter,
    alter_scram,
    create_acls,
    creation,
    delete_acls,
    describe_acls,
    describe_scram,
    metadata_request,
    new_user,
    pair,
    upsertion,
)

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


def create_topics(*names: str, partitions: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=TopicName(n), num_partitions=i32(partitions), replication_factor=i16(1), assignments=(), configs=()
            )
            for n in names
        ),
        timeout=TIMEOUT,
    )


def delete_topics(*names: str) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(
        topics=tuple(DeleteTopicState(name=TopicName(n), topic_id=None) for n in names), timeout=TIMEOUT
    )


def metadata_v10_request(*names: str) -> metadata_v10.MetadataRequest:
    """Metadata v10: the last version with the cluster's authorized operations."""
    return metadata_v10.MetadataRequest(
        topics=tuple(metadata_v10.MetadataRequestTopic(topic_id=None, name=TopicName(n)) for n in names),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


def test_a_low_privilege_users_view(admin: Pair, targets: tuple[Target, Target]):
    t = admin.token
    low, password = f"{t}-low", "low-secret"
    me = f"User:{low}"
    new_user(admin, low, password)
    admin.step("the low user's ACLs", create_acls(
        creation(TOPIC, f"{t}-mine", PREFIXED, me, CREATE),
        creation(TOPIC, f"{t}-del", LITERAL, me, DELETE),
        creation(TOPIC, f"{t}-del", LITERAL, me, DESCRIBE),
        creation(TOPIC, f"{t}-delonly", LITERAL, me, DELETE),
        creation(TOPIC, f"{t}-vis", LITERAL, me, READ),
        creation(TOPIC, f"{t}-gone", LITERAL, me, DELETE),
        creation(TOPIC, f"{t}-auto", LITERAL, me, DESCRIBE),
        creation(TOPIC, f"{t}-descmissing", LITERAL, me, DESCRIBE),
        creation(TOPIC, f"{t}-made", PREFIXED, me, DESCRIBE),
        creation(TOPIC, f"{t}-made", PREFIXED, me, CREATE),
    ), settle=True)  # fmt: skip
    admin.step("the admin creates topics", create_topics(
        f"{t}-del", f"{t}-delonly", f"{t}-vis", f"{t}-hidden", f"{t}-nodel"
    ), TOPIC_CONFIGS, settle=True)  # fmt: skip
    kafka, guard = targets
    with pair(kafka, guard, low, password, t) as user:
        user.step("DescribeAcls without cluster DESCRIBE", describe_acls(), NOT_AUTHORIZED_TEXT)
        user.step("CreateAcls without cluster ALTER", create_acls(
            creation(TOPIC, f"{t}-x", LITERAL, me, READ), creation(TOPIC, f"{t}-y", LITERAL, me, READ)
        ), NOT_AUTHORIZED_TEXT)  # fmt: skip
        user.step("DeleteAcls without cluster ALTER", delete_acls(acl_filter(principal=me), acl_filter(TOPIC)),
                  NOT_AUTHORIZED_TEXT)  # fmt: skip
        user.step("DescribeUserScramCredentials without cluster DESCRIBE", describe_scram(low, f"{t}-other"))
        user.step("DescribeUserScramCredentials (all) without cluster DESCRIBE", describe_scram(all_users=True),
                  SCRAM_ALL_UNAUTHORIZED, timeout=5)  # fmt: skip
        user.step("AlterUserScramCredentials without cluster ALTER", alter_scram(
            deletions=((f"{t}-zz", 1),), upsertions=(upsertion(low, "new"), upsertion(f"{t}-aa", "x"))
        ), NOT_AUTHORIZED_TEXT)  # fmt: skip
        user.step("AlterUserScramCredentials, empty, without cluster ALTER", alter_scram())
        user.step("CreateTopics with CREATE on a prefix only", create_topics(f"{t}-mine-1", f"{t}-other"), settle=True)
        user.step("CreateTopics of an existing topic under the prefix", create_topics(f"{t}-mine-1"))
        user.step("DeleteTopics with and without DELETE/DESCRIBE", delete_topics(
            f"{t}-del", f"{t}-delonly", f"{t}-nodel", f"{t}-gone", f"{t}-absent", f"{t}-vis", f"{t}-descmissing"
        ), settle=True)  # fmt: skip
        user.step("Metadata: all topics", metadata_request(None), mine=True)
        user.step("Metadata: named topics", metadata_request(
            [f"{t}-vis", f"{t}-hidden", f"{t}-mine-1", f"{t}-auto", f"{t}-absent"]
        ))  # fmt: skip
        user.step("Metadata: auto-creation without CREATE", metadata_request([f"{t}-auto"], auto_create=True))
        user.step("Metadata: no topics", metadata_request([]))
        user.step("Metadata: auto-creation with DESCRIBE and CREATE", metadata_request(
            [f"{t}-made-1"], auto_create=True
        ), AUTO_CREATED_AT_ONCE, settle=True)  # fmt: skip
        user.step("Metadata: the auto-created topic", metadata_request([f"{t}-made-1"]))
        user.step("Metadata v10 with cluster and topic operations", metadata_v10_request(f"{t}-vis", f"{t}-hidden"))
        user.step("DescribeCluster", DescribeClusterRequest(include_cluster_authorized_operations=False))
        user.step("DescribeCluster with authorized operations",
                  DescribeClusterRequest(include_cluster_authorized_operations=True))  # fmt: skip
        admin.step("grant cluster DESCRIBE", create_acls(creation(CLUSTER, "kafka-cluster", LITERAL, me, DESCRIBE)),
                   settle=True)  # fmt: skip
        user.step("DescribeCluster with authorized operations, with DESCRIBE",
                  DescribeClusterRequest(include_cluster_authorized_operations=True))  # fmt: skip
        user.step("Metadata v10 with cluster DESCRIBE", metadata_v10_request(f"{t}-vis"))
        user.step("DescribeAcls with cluster DESCRIBE", describe_acls(principal=me), mine=True)
        user.step("DescribeUserScramCredentials with cluster DESCRIBE", describe_scram(low))
        user.step("CreateAcls with DESCRIBE only", create_acls(creation(TOPIC, f"{t}-x", LITERAL, me, READ)),
                  NOT_AUTHORIZED_TEXT)  # fmt: skip
    admin.step("admin: DescribeCluster with authorized operations",
               DescribeClusterRequest(include_cluster_authorized_operations=True))  # fmt: skip
    admin.step("admin: Metadata all topics", metadata_request(None), mine=True)
    admin.step("admin: Metadata v10 with cluster and topic operations", metadata_v10_request(f"{t}-vis", f"{t}-hidden"))
    admin.step("admin: delete the topics", delete_topics(
        f"{t}-delonly", f"{t}-vis", f"{t}-hidden", f"{t}-nodel", f"{t}-mine-1", f"{t}-made-1"
    ), settle=True)  # fmt: skip
    admin.step("admin: remove the ACLs", delete_acls(acl_filter(principal=me)), settle=True, mine=True)
    admin.step("admin: remove the user's SHA-256", alter_scram(deletions=((low, 1),)), settle=True)
    admin.step("admin: remove the user's SHA-512", alter_scram(deletions=((low, 2),)), settle=True)

"""What the refused-change tests share (``serve`` and ``proxy`` alike): the wire requests a user without ALTER sends,
the answers Kafka gives them, and ``kafkaguard acls history`` run as a subprocess on the target's data directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.types import TopicName
from kio.static.primitive import f64, i8, i16, i32, i32Timedelta

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")

# Kafka's codes: TOPIC 2; pattern types ANY 1, MATCH 2, LITERAL 3, PREFIXED 4; operation ANY 1, READ 3; ALLOW 3
TOPIC, ANY, MATCH, LITERAL, PREFIXED, READ, ALLOW = 2, 1, 2, 3, 4, 3, 3
#: A salt and a salted password a refused upsertion carries: neither may appear in any event or output.
SALT = bytes(range(16, 48))
SALTED_PASSWORD = bytes(range(100, 132))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_acls(*names: str, principal: str = "User:bob") -> CreateAclsRequest:
    return CreateAclsRequest(creations=tuple(
        AclCreation(resource_type=i8(TOPIC), resource_name=name, resource_pattern_type=i8(LITERAL),
                    principal=principal, host="*", operation=i8(READ), permission_type=i8(ALLOW))
        for name in names
    ))  # fmt: skip


def grant_cluster_describe(principal: str) -> CreateAclsRequest:
    """ALLOW ``principal`` DESCRIBE on the cluster: it may read the ACLs (as ``apply`` does first), not change them."""
    return CreateAclsRequest(creations=(
        AclCreation(resource_type=i8(4), resource_name="kafka-cluster", resource_pattern_type=i8(LITERAL),
                    principal=principal, host="*", operation=i8(8), permission_type=i8(ALLOW)),
    ))  # fmt: skip


def delete_acls(name: str, principal: str | None = "User:bob") -> DeleteAclsRequest:
    return DeleteAclsRequest(filters=(
        DeleteAclsFilter(resource_type_filter=i8(TOPIC), resource_name_filter=name, pattern_type_filter=i8(MATCH),
                         principal_filter=principal, host_filter=None, operation=i8(ANY), permission_type=i8(ANY)),
    ))  # fmt: skip


def alter_scram(deleted: str, upserted: str) -> AlterUserScramCredentialsRequest:
    return AlterUserScramCredentialsRequest(
        deletions=(ScramCredentialDeletion(name=deleted, mechanism=i8(1)),),
        upsertions=(ScramCredentialUpsertion(name=upserted, mechanism=i8(2), iterations=i32(8192), salt=SALT,
                                             salted_password=SALTED_PASSWORD),),
    )  # fmt: skip


def alter_quotas(user: str) -> AlterClientQuotasRequest:
    return AlterClientQuotasRequest(
        entries=(EntryData(entity=(EntityData(entity_type="user", entity_name=user),),
                           ops=(OpData(key="producer_byte_rate", value=f64(1024.0), remove=False),
                                OpData(key="consumer_byte_rate", value=f64(0.0), remove=True))),),
        validate_only=False,
    )  # fmt: skip


def create_topics(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=tuple(CreatableTopic(name=TopicName(name), num_partitions=i32(1), replication_factor=i16(1),
                                    assignments=(), configs=()) for name in names),
        timeout=i32Timedelta.parse(timedelta(seconds=5)), validate_only=False,
    )  # fmt: skip


def delete_topics(*topics: str | uuid.UUID) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(
        topics=tuple(
            DeleteTopicState(name=None, topic_id=topic) if isinstance(topic, uuid.UUID)
            else DeleteTopicState(name=TopicName(topic), topic_id=uuid.UUID(int=0))
            for topic in topics
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
    )  # fmt: skip


def environment(**extra: str) -> dict[str, str]:
    """The test process's environment without its KAFKAGUARD_* settings (and with ``extra``)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("KAFKAGUARD_")}, **extra}


def history(data_dir: Path, *options: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(KAFKAGUARD), "acls", "history", "--data-dir", str(data_dir), "--limit", "1000",
                           *options], capture_output=True, text=True, timeout=60, env=environment(COLUMNS="1000"),
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def history_json(data_dir: Path, *options: str) -> list[dict[str, Any]]:
    """``kafkaguard acls history --output json``: each event's line, newest first."""
    return [json.loads(line) for line in history(data_dir, "--output", "json", *options).stdout.splitlines()]


def history_table(data_dir: Path, *options: str) -> str:
    return history(data_dir, *options).stdout


def assert_refused_by(event: dict[str, Any], principal: str, interface: str, request_id: str, result: str,
                      message: str) -> None:  # fmt: skip
    """The event's actor and outcome: who, from loopback, through which door, which request, Kafka's error."""
    data = event["data"]
    assert data["actor"] == {"principal": principal, "address": "127.0.0.1", "interface": interface,
                             "request_id": request_id}  # fmt: skip
    assert (data["result"], data["error_message"]) == (result, message)

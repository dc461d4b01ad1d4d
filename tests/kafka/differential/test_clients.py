"""The client-visible outcome through confluent-kafka (librdkafka 2.16) and kafka-python, against Kafka 3.9 and
kafkaguard: the same calls, their results or errors reduced to comparable values."""

from __future__ import annotations

import warnings
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from tests.kafka.differential.runner import Pair, Target, acl_filter, alter_scram, delete_acls, new_user

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka.admin import (  # type: ignore[import-untyped]
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType


def confluent(target: Target, user: str, password: str) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": f"{target.address[0]}:{target.address[1]}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
    })  # fmt: skip


def kafka_python(target: Target, user: str, password: str) -> Any:
    return KafkaAdminClient(
        bootstrap_servers=f"{target.address[0]}:{target.address[1]}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user, sasl_plain_password=password,
        request_timeout_ms=10000,
    )  # fmt: skip


def outcome(call: Any) -> Any:
    """A future's value, or the Kafka error code it raised."""
    try:
        return call()
    except KafkaException as e:
        return ("error", e.args[0].code())


def bindings(found: Any) -> Any:
    return sorted(str(b) for b in found) if isinstance(found, list) else found


def test_client_libraries_see_the_same(admin: Pair, targets: tuple[Target, Target]):
    t = admin.token
    low, password = f"{t}-low", "low-secret"
    new_user(admin, low, password)
    anyone: Any = None
    mine = AclBindingFilter(ResourceType.TOPIC, f"{t}-c", ResourcePatternType.ANY, anyone, anyone,
                            AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    good = AclBinding(ResourceType.TOPIC, f"{t}-c", ResourcePatternType.LITERAL, f"User:{low}", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    bad = AclBinding(ResourceType.TOPIC, "", ResourcePatternType.LITERAL, f"User:{low}", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    results: dict[str, list[Any]] = {}
    for target in targets:
        out = results.setdefault(target.name, [])
        su = confluent(target, target.admin, target.admin_password)
        created = su.create_acls([good, bad])
        out.append([outcome(lambda f=created[b]: f.result(timeout=30)) for b in (good, bad)])
        user = confluent(target, low, password)
        out.append(bindings(outcome(lambda c=user: c.describe_acls(mine).result(timeout=30))))
        out.append(outcome(lambda c=user: c.create_acls([good])[good].result(timeout=30)))
        kp = kafka_python(target, low, password)
        try:
            kp_filter = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                  permission_type=ACLPermissionType.ANY,
                                  resource_pattern=ResourcePatternFilter(KpResourceType.TOPIC, f"{t}-c",
                                                                         ACLResourcePatternType.ANY))  # fmt: skip
            try:
                found, error = kp.describe_acls(kp_filter)
                out.append(("kafka-python describe_acls", len(found), type(error).__name__))
            except Exception as e:  # noqa: BLE001 - the exception's class is the client-visible outcome
                out.append(("kafka-python describe_acls raised", type(e).__name__))
        finally:
            kp.close()
    kafka, guard = results["kafka"], results["kafkaguard"]
    labels = ["confluent create_acls (valid, empty name) as admin", "confluent describe_acls as low user",
              "confluent create_acls as low user", "kafka-python describe_acls as low user"]  # fmt: skip
    for label, k, g in zip(labels, kafka, guard, strict=True):
        admin.compare(label, k, g)
    admin.step("cleanup", delete_acls(acl_filter(principal=f"User:{low}")), settle=True, mine=True)
    for mechanism in (1, 2):
        admin.step(f"remove {low} ({mechanism})", alter_scram(deletions=((low, mechanism),)), settle=True)

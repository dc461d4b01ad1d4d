"""confluent-kafka (librdkafka) AdminClient against a real kafkaguard server, over SASL_PLAINTEXT with SCRAM-SHA-256
and SCRAM-SHA-512 and over SASL_SSL: users created over the wire log in, ACLs are created, described with every
filter kind and deleted, and everything without the right ACL is refused with Kafka's error codes.

librdkafka quirks: its Python ``describe_acls`` returns ``[]`` instead of raising when the broker answers
CLUSTER_AUTHORIZATION_FAILED at the top level, so that denial is asserted through the audit log here (and with
kafka-python, which raises, in ``test_e2e_kafka_python``); and an unauthorized ``describe_user_scram_credentials``
crashes the client process (see below), so it is not asked.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# The names confluent_kafka.admin re-exports, from where they are defined (its stubs do not re-export them).
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.admin._scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.cimpl import NewTopic

from kafkaguard.config import SecurityProtocol
from tests.actors import ACTOR
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import AUTO_CREATE, Wire, create_acl, metadata

pytestmark = pytest.mark.integration

TIMEOUT = 10.0
TRANSPORTS = [
    pytest.param(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-256", id="sasl_plaintext-sha256"),
    pytest.param(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-512", id="sasl_plaintext-sha512"),
    pytest.param(SecurityProtocol.SASL_SSL, "SCRAM-SHA-256", id="sasl_ssl-sha256"),
    pytest.param(SecurityProtocol.SASL_SSL, "SCRAM-SHA-512", id="sasl_ssl-sha512"),
]
RDKAFKA_LOG = logging.getLogger("rdkafka")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def client(
    server: ServerHandle,
    user: str | None = ADMIN,
    password: str | None = ADMIN_PASSWORD,
    protocol: SecurityProtocol = SecurityProtocol.SASL_PLAINTEXT,
    mechanism: str = "SCRAM-SHA-256",
    **extra: Any,
) -> AdminClient:
    conf: dict[str, Any] = {
        "bootstrap.servers": server.bootstrap(protocol),
        "security.protocol": protocol.value,
        "logger": RDKAFKA_LOG,
        "socket.timeout.ms": 5000,
    }
    if protocol.uses_sasl:
        conf |= {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if protocol.uses_tls:
        conf["ssl.ca.location"] = str(server.tls.certfile)
    conf |= extra
    return AdminClient(conf)


def kafka_error(excinfo: pytest.ExceptionInfo[KafkaException]) -> KafkaError:
    error = excinfo.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def binding(restype: ResourceType, name: str, pattern: ResourcePatternType, principal: str, op: AclOperation) -> Any:
    return AclBinding(restype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def acl_filter(restype: Any, name: Any, pattern: Any, principal: Any = None, op: Any = AclOperation.ANY) -> Any:
    """A filter; None means "any" for name, principal and host (the stubs type them as str)."""
    any_host: Any = None
    return AclBindingFilter(restype, name, pattern, principal, any_host, op, AclPermissionType.ANY)


def describe(admin: AdminClient, acl_filter_: Any) -> set[Any]:
    return set(admin.describe_acls(acl_filter_, request_timeout=TIMEOUT).result(TIMEOUT))


def create_user(admin: AdminClient, user: str, password: str) -> None:
    """Both mechanisms in one request (KIP-554, SEMANTICS.md §16.6): confluent-kafka sends them together."""
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
            ),
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
            ),
        ]
    )
    assert futures.keys() == {user}
    assert futures[user].result(TIMEOUT) is None


def user_description(admin: AdminClient, user: str) -> Any:
    """DescribeUserScramCredentials for one user (raises KafkaException with that user's error)."""
    futures: Any = admin.describe_user_scram_credentials([user])
    return futures[user].result(TIMEOUT)


def denied_in_audit(server: ServerHandle, principal: str, api: str) -> list[dict[str, Any]]:
    return [
        r
        for r in server.audit_records()
        if r["principal"] == principal and r["api"] == api and r["decision"] == "DENIED"
    ]


@pytest.mark.parametrize(("protocol", "mechanism"), TRANSPORTS)
def test_user_created_over_the_wire_logs_in_and_needs_acls(server: ServerHandle, protocol, mechanism):
    admin = client(server, protocol=protocol, mechanism="SCRAM-SHA-512")
    user, password = unique("user"), "pw-" + uuid.uuid4().hex
    create_user(admin, user, password)

    described = user_description(admin, user)
    infos = {(info.mechanism, info.iterations) for info in described.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)}

    # The new user logs in with the transport and mechanism under test.
    as_user = client(server, user, password, protocol, mechanism)
    cluster: Any = as_user.list_topics(timeout=TIMEOUT)
    assert cluster.cluster_id == server.server.cluster_id
    assert cluster.controller_id == 1

    # No ACL yet: every admin API answers CLUSTER_AUTHORIZATION_FAILED.
    principal = f"User:{user}"
    new_acl = binding(ResourceType.TOPIC, unique("t"), ResourcePatternType.LITERAL, principal, AclOperation.READ)
    with pytest.raises(KafkaException) as create_denied:
        as_user.create_acls([new_acl], request_timeout=TIMEOUT)[new_acl].result(TIMEOUT)
    assert kafka_error(create_denied).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    any_topic = acl_filter(ResourceType.TOPIC, None, ResourcePatternType.ANY)
    with pytest.raises(KafkaException) as delete_denied:
        as_user.delete_acls([any_topic], request_timeout=TIMEOUT)[any_topic].result(TIMEOUT)
    assert kafka_error(delete_denied).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    alteration = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"new")
    with pytest.raises(KafkaException) as alter_denied:
        as_user.alter_user_scram_credentials([alteration])[user].result(TIMEOUT)
    assert kafka_error(alter_denied).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # DescribeUserScramCredentials is not asked here: librdkafka 2.16 aborts the process on any response with a
    # top-level error (rd_kafka_DescribeUserScramCredentialsResponse_parse stores a static or alloca'd string as
    # the result's errstr, which is later freed), as it would against Kafka. kafka-python and the raw-wire tests
    # assert that denial.

    # librdkafka turns a top-level CLUSTER_AUTHORIZATION_FAILED into an empty list: the audit log shows the denial.
    assert describe(as_user, acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY)) == set()
    denials = denied_in_audit(server, principal, "DescribeAcls")
    assert denials
    assert {(r["operation"], r["resource_type"], r["resource_name"], r["rule"]) for r in denials} == {
        ("DESCRIBE", "CLUSTER", "kafka-cluster", "DefaultDeny")
    }
    assert {r["rule"] for r in denied_in_audit(server, principal, "CreateAcls")} == {"DefaultDeny"}

    # Granted ALTER on the cluster (which implies DESCRIBE), the user manages ACLs.
    grant = binding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, AclOperation.ALTER)
    assert admin.create_acls([grant])[grant].result(TIMEOUT) is None
    assert as_user.create_acls([new_acl])[new_acl].result(TIMEOUT) is None
    assert describe(as_user, acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY, principal)) == {
        grant,
        new_acl,
    }
    allowed = [
        r
        for r in server.audit_records()
        if r["principal"] == principal and r["api"] == "CreateAcls" and r["decision"] == "ALLOWED"
    ]
    assert allowed
    assert all(r["rule"].startswith("MatchingAcl(") for r in allowed)


@pytest.mark.parametrize(("protocol", "mechanism"), TRANSPORTS[:3])
def test_describe_filters_and_delete(server: ServerHandle, protocol, mechanism):
    admin = client(server, protocol=protocol, mechanism=mechanism)
    principal = f"User:{unique('owner')}"
    topic = unique("orders")  # every name is unique to this test, the principal too
    exact = binding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, AclOperation.READ)
    wildcard = binding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, principal, AclOperation.DESCRIBE)
    prefix = binding(ResourceType.TOPIC, topic[:8], ResourcePatternType.PREFIXED, principal, AclOperation.WRITE)
    same_name_prefixed = binding(ResourceType.TOPIC, topic, ResourcePatternType.PREFIXED, principal, AclOperation.ALL)
    unrelated_prefix = binding(ResourceType.TOPIC, "zzz", ResourcePatternType.PREFIXED, principal, AclOperation.READ)
    other_literal = binding(ResourceType.TOPIC, topic + "-x", ResourcePatternType.LITERAL, principal, AclOperation.READ)
    group = binding(ResourceType.GROUP, topic, ResourcePatternType.LITERAL, principal, AclOperation.READ)
    everything = [exact, wildcard, prefix, same_name_prefixed, unrelated_prefix, other_literal, group]
    futures = admin.create_acls(everything, request_timeout=TIMEOUT)
    assert all(future.result(TIMEOUT) is None for future in futures.values())

    def topic_filter(name: Any, pattern: ResourcePatternType) -> set[Any]:
        return describe(admin, acl_filter(ResourceType.TOPIC, name, pattern, principal))

    assert describe(admin, acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY, principal)) == set(everything)
    assert topic_filter(topic, ResourcePatternType.LITERAL) == {exact}
    assert topic_filter("*", ResourcePatternType.LITERAL) == {wildcard}  # only the wildcard ACL itself
    assert topic_filter(topic[:8], ResourcePatternType.PREFIXED) == {prefix}
    assert topic_filter(None, ResourcePatternType.PREFIXED) == {prefix, same_name_prefixed, unrelated_prefix}
    assert topic_filter(topic, ResourcePatternType.ANY) == {exact, same_name_prefixed}  # not the wildcard
    # MATCH: what authorize() would consider for this topic: the literal, the wildcard, every matching prefix.
    assert topic_filter(topic, ResourcePatternType.MATCH) == {exact, wildcard, prefix, same_name_prefixed}
    assert topic_filter(None, ResourcePatternType.MATCH) == set(everything) - {group}
    assert describe(
        admin, acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, principal, AclOperation.READ)
    ) == {exact}
    assert describe(admin, acl_filter(ResourceType.GROUP, None, ResourcePatternType.ANY, principal)) == {group}

    # Two filters that both match `exact`: it is listed under each and deleted once.
    by_name = acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal)
    by_operation = acl_filter(ResourceType.TOPIC, None, ResourcePatternType.ANY, principal, AclOperation.READ)
    deleted = admin.delete_acls([by_name, by_operation], request_timeout=TIMEOUT)
    assert set(deleted[by_name].result(TIMEOUT)) == {exact}
    assert set(deleted[by_operation].result(TIMEOUT)) == {exact, unrelated_prefix, other_literal}
    remaining = {wildcard, prefix, same_name_prefixed, group}
    assert describe(admin, acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY, principal)) == remaining

    # A MATCH delete takes everything that applies to the topic; a filter matching nothing is no error.
    match = acl_filter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, principal)
    nothing = acl_filter(ResourceType.TOPIC, unique("none"), ResourcePatternType.LITERAL, principal)
    deleted = admin.delete_acls([match, nothing], request_timeout=TIMEOUT)
    assert set(deleted[match].result(TIMEOUT)) == {wildcard, prefix, same_name_prefixed}
    assert deleted[nothing].result(TIMEOUT) == []
    assert describe(admin, acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY, principal)) == {group}


def test_scram_alterations_edge_cases(server: ServerHandle):
    admin = client(server)
    user, missing, weak = unique("edge"), unique("missing"), unique("weak")
    create_user(admin, user, "pw")

    def outcome(alterations: list[Any]) -> dict[str, int]:
        codes: dict[str, int] = {}
        for name, future in admin.alter_user_scram_credentials(alterations).items():
            try:
                future.result(TIMEOUT)
                codes[name] = KafkaError.NO_ERROR
            except KafkaException as e:
                codes[name] = e.args[0].code()
        return codes

    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    # The same user and mechanism twice, and an upsertion with a deletion of the same user: DUPLICATE_RESOURCE.
    assert outcome(
        [UserScramCredentialUpsertion(user, sha256, b"a"), UserScramCredentialUpsertion(user, sha256, b"b")]
    ) == {user: KafkaError.DUPLICATE_RESOURCE}
    assert outcome(
        [
            UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512),
            UserScramCredentialUpsertion(user, sha256, b"c"),
        ]
    ) == {user: KafkaError.DUPLICATE_RESOURCE}
    # Below the 4096 minimum; deleting a credential that does not exist; other users are unaffected.
    too_few = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4095)
    assert outcome(
        [
            UserScramCredentialUpsertion(weak, too_few, b"x"),
            UserScramCredentialDeletion(missing, ScramMechanism.SCRAM_SHA_256),
            UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512),
        ]
    ) == {
        weak: KafkaError.UNACCEPTABLE_CREDENTIAL,
        missing: KafkaError.RESOURCE_NOT_FOUND,
        user: KafkaError.NO_ERROR,
    }
    # The failed requests changed nothing; the deletion did.
    described = user_description(admin, user)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    with pytest.raises(KafkaException) as not_found:
        user_description(admin, weak)
    assert kafka_error(not_found).code() == KafkaError.RESOURCE_NOT_FOUND
    # The description carries the user and (mechanism, iterations) only.
    assert set(vars(described)) == {"user", "scram_credential_infos"}
    assert all(set(vars(info)) == {"mechanism", "iterations"} for info in described.scram_credential_infos)


def test_wrong_password_is_an_authentication_error(server: ServerHandle):
    errors: list[KafkaError] = []
    bad = client(server, ADMIN, "not-the-password", error_cb=errors.append)
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=2)
    for _ in range(50):  # error_cb runs from poll(); wait for the report, not a fixed time
        if errors:
            break
        bad.poll(0.1)
    assert errors
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        in errors[0].str()
    )


def test_auto_create_only_user_cannot_create_topics(server: ServerHandle):
    """KIP-755: AUTO_CREATE lets Metadata create the topic; CreateTopics still needs CREATE."""
    user, password = unique("auto"), "pw-auto"
    topic = unique("auto-topic")
    server.add_user(user, password)
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        # No Python client knows operation 15, so the grant goes over the raw wire.
        assert create_acl(wire, resource_type=2, name=topic, pattern_type=3, principal=f"User:{user}", operation=8) == 0
        assert (
            create_acl(
                wire, resource_type=2, name=topic, pattern_type=3, principal=f"User:{user}", operation=AUTO_CREATE
            )
            == 0
        )
    as_user = client(server, user, password)
    futures = as_user.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT)
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(TIMEOUT)
    assert kafka_error(refused).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = client(server)
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics

    with Wire(server.sasl) as wire:
        wire.login(user, password)
        (created,) = metadata(wire, [topic]).topics
    assert (created.name, created.error_code.value, len(created.partitions)) == (topic, 0, 1)
    assert topic in admin.list_topics(timeout=TIMEOUT).topics


def test_plaintext_principal_is_anonymous(server: ServerHandle):
    admin = client(server)  # kept referenced: a client collected before its futures resolve fails them
    anonymous = client(server, None, None, SecurityProtocol.PLAINTEXT)
    name = unique("anon")
    wanted = binding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", AclOperation.READ)
    with pytest.raises(KafkaException) as denied:
        anonymous.create_acls([wanted])[wanted].result(TIMEOUT)
    assert kafka_error(denied).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert denied_in_audit(server, "User:ANONYMOUS", "CreateAcls")

    grant = binding(
        ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", AclOperation.ALTER
    )
    assert admin.create_acls([grant])[grant].result(TIMEOUT) is None
    try:
        assert anonymous.create_acls([wanted])[wanted].result(TIMEOUT) is None
        assert wanted in describe(anonymous, acl_filter(ResourceType.TOPIC, name, ResourcePatternType.LITERAL))
    finally:
        every_anonymous = acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:ANONYMOUS")
        admin.delete_acls([every_anonymous])[every_anonymous].result(TIMEOUT)


def test_group_and_cidr_acls_through_the_server_with_confluent_kafka(server: ServerHandle):
    """Kafka clients manage Group: ACLs unchanged; a member's open connection is allowed on its next request once
    it joins, a DENY on the group from a block holding the client wins, an invalid block is refused on the wire."""
    admin = client(server)
    group, user, password = unique("ops"), unique("member"), "pw-" + uuid.uuid4().hex
    create_user(admin, user, password)
    alter_cluster = AclBinding(
        ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, f"Group:{group}", "127.0.0.0/8",
        AclOperation.ALTER, AclPermissionType.ALLOW,
    )  # fmt: skip
    assert admin.create_acls([alter_cluster])[alter_cluster].result(TIMEOUT) is None
    bad_block = AclBinding(
        ResourceType.TOPIC, unique("t"), ResourcePatternType.LITERAL, f"Group:{group}", "10.0.0.0/33",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([bad_block])[bad_block].result(TIMEOUT)
    assert kafka_error(refused).code() == KafkaError.INVALID_REQUEST
    assert "Invalid CIDR notation '10.0.0.0/33'" in kafka_error(refused).str()

    member = client(server, user, password)  # one connection, kept across the membership change
    new_acl = binding(ResourceType.TOPIC, unique("t"), ResourcePatternType.LITERAL, f"User:{user}", AclOperation.READ)
    with pytest.raises(KafkaException) as before:
        member.create_acls([new_acl], request_timeout=TIMEOUT)[new_acl].result(TIMEOUT)
    assert kafka_error(before).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    server.services.groups.add_members(group, [f"User:{user}"], actor=ACTOR)
    assert member.create_acls([new_acl])[new_acl].result(TIMEOUT) is None
    allowed = [r for r in server.audit_records() if r["principal"] == f"User:{user}" and r["api"] == "CreateAcls"]
    assert any(r["decision"] == "ALLOWED" and f"principal=Group:{group}" in r["rule"] for r in allowed)

    deny = AclBinding(
        ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, f"Group:{group}", "127.0.0.1/32",
        AclOperation.ALTER, AclPermissionType.DENY,
    )  # fmt: skip
    assert admin.create_acls([deny])[deny].result(TIMEOUT) is None
    with pytest.raises(KafkaException) as after:
        member.create_acls([new_acl], request_timeout=TIMEOUT)[new_acl].result(TIMEOUT)
    assert kafka_error(after).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

"""kafka-python (3.0) KafkaAdminClient and KafkaProducer against a real kafkaguard server, over SASL_PLAINTEXT with
SCRAM-SHA-256 and SCRAM-SHA-512 and over SASL_SSL.

kafka-python raises on a top-level CLUSTER_AUTHORIZATION_FAILED (confluent-kafka does not), so every denial of the
admin APIs is asserted here through the client's own errors. kafka-python imports emit DeprecationWarnings
(importlib.resources.read_text/open_text) which the suite would turn into errors: they are filtered for the import
and, narrowly, for these tests.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import pytest

from kafkaguard.config import SecurityProtocol
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import AUTO_CREATE, Wire, create_acl

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    import kafka.errors as Errors  # type: ignore[import-untyped]
    from kafka import KafkaProducer
    from kafka.admin import (  # type: ignore[import-untyped]
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.admin._users import (  # type: ignore[import-untyped]
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

TRANSPORTS = [
    pytest.param(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-256", id="sasl_plaintext-sha256"),
    pytest.param(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-512", id="sasl_plaintext-sha512"),
    pytest.param(SecurityProtocol.SASL_SSL, "SCRAM-SHA-256", id="sasl_ssl-sha256"),
]
ANY_PATTERN = ACLResourcePatternType.ANY


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def connection_config(
    server: ServerHandle,
    user: str | None = ADMIN,
    password: str | None = ADMIN_PASSWORD,
    protocol: SecurityProtocol = SecurityProtocol.SASL_PLAINTEXT,
    mechanism: str = "SCRAM-SHA-256",
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": server.bootstrap(protocol),
        "security_protocol": protocol.value,
        "request_timeout_ms": 10_000,
    }
    if protocol.uses_sasl:
        config |= {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    if protocol.uses_tls:
        config["ssl_cafile"] = str(server.tls.certfile)
    return config


class Admin:
    """A KafkaAdminClient that is closed at the end of the test."""

    def __init__(self) -> None:
        self.clients: list[Any] = []

    def __call__(self, server: ServerHandle, *args: Any, **kwargs: Any) -> Any:
        client = KafkaAdminClient(bootstrap_timeout_ms=10_000, **connection_config(server, *args, **kwargs))
        self.clients.append(client)
        return client


@pytest.fixture
def admin_client():
    factory = Admin()
    yield factory
    for client in factory.clients:
        client.close()


def acl(principal: str, op: ACLOperation, rtype: ResourceType, name: str, pattern: ACLResourcePatternType) -> Any:
    return ACL(principal, "*", op, ACLPermissionType.ALLOW, ResourcePattern(rtype, name, pattern))


def acl_filter(
    rtype: ResourceType, name: str | None, pattern: ACLResourcePatternType, principal: str | None = None, op=None
) -> Any:
    return ACLFilter(
        principal, None, op or ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(rtype, name, pattern)
    )


def key(entry: Any) -> tuple[Any, ...]:
    p = entry.resource_pattern
    return (entry.principal, entry.host, entry.operation, entry.permission_type, p.resource_type, p.resource_name,
            p.pattern_type)  # fmt: skip


def described(admin: Any, acl_filter_: Any) -> set[tuple[Any, ...]]:
    acls, error = admin.describe_acls(acl_filter_)
    assert error is Errors.NoError
    return {key(a) for a in acls}


@pytest.mark.parametrize(("protocol", "mechanism"), TRANSPORTS)
def test_user_created_over_the_wire_logs_in_and_is_refused_without_acls(
    server: ServerHandle, admin_client, protocol, mechanism
):
    admin = admin_client(server, protocol=protocol, mechanism="SCRAM-SHA-512")
    user, password = unique("kp-user"), "pw-" + uuid.uuid4().hex
    upsert = [
        UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_256, password, iterations=4096),
        UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_512, password, iterations=10_000),
    ]
    assert admin.alter_user_scram_credentials(upsert) == {user: None}
    description = admin.describe_user_scram_credentials([user])
    assert description == {
        user: {
            "error": None,
            "credential_infos": [
                {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 4096},
                {"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 10_000},
            ],
        }
    }

    as_user = admin_client(server, user, password, protocol, mechanism)
    assert as_user.describe_cluster()["cluster_id"] == server.server.cluster_id

    everything = acl_filter(ResourceType.ANY, None, ANY_PATTERN)
    with pytest.raises(Errors.ClusterAuthorizationFailedError, match="DescribeAcls v3 is not authorized"):
        as_user.describe_acls(everything)
    wanted = acl(f"User:{user}", ACLOperation.READ, ResourceType.TOPIC, unique("t"), ACLResourcePatternType.LITERAL)
    created = as_user.create_acls([wanted])
    assert created["succeeded"] == []
    assert created["failed"] == [Errors.ClusterAuthorizationFailedError]
    ((_, matching, error),) = as_user.delete_acls([everything])
    assert (matching, error) == ([], Errors.ClusterAuthorizationFailedError)
    altered = as_user.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])
    assert altered == {user: "Request AlterUserScramCredentials is not authorized."}
    with pytest.raises(Errors.ClusterAuthorizationFailedError):
        as_user.describe_user_scram_credentials([user])
    with pytest.raises(Errors.ClusterAuthorizationFailedError):
        as_user.describe_user_scram_credentials()
    # The failed alteration changed nothing: the user still logs in with SCRAM-SHA-512.
    assert admin.describe_user_scram_credentials([user])[user]["error"] is None

    # DESCRIBE on the cluster is enough to describe ACLs, not to change them.
    grant = acl(
        f"User:{user}", ACLOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster", ACLResourcePatternType.LITERAL
    )
    assert admin.create_acls([grant])["failed"] == []
    assert key(grant) in described(as_user, everything)
    assert as_user.create_acls([wanted])["failed"] == [Errors.ClusterAuthorizationFailedError]


@pytest.mark.parametrize(("protocol", "mechanism"), TRANSPORTS[1:])
def test_describe_filters_and_delete(server: ServerHandle, admin_client, protocol, mechanism):
    admin = admin_client(server, protocol=protocol, mechanism=mechanism)
    principal = f"User:{unique('kp-owner')}"
    topic = unique("payments")
    literal, prefixed = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
    exact = acl(principal, ACLOperation.READ, ResourceType.TOPIC, topic, literal)
    wildcard = acl(principal, ACLOperation.DESCRIBE, ResourceType.TOPIC, "*", literal)
    prefix = acl(principal, ACLOperation.WRITE, ResourceType.TOPIC, topic[:6], prefixed)
    unrelated = acl(principal, ACLOperation.READ, ResourceType.TOPIC, "zzz", prefixed)
    group = acl(principal, ACLOperation.READ, ResourceType.GROUP, topic, literal)
    everything = [exact, wildcard, prefix, unrelated, group]
    result = admin.create_acls(everything)
    assert result["failed"] == []
    assert len(result["succeeded"]) == len(everything)

    def topics(name: str | None, pattern: ACLResourcePatternType, op=None) -> set[tuple[Any, ...]]:
        return described(admin, acl_filter(ResourceType.TOPIC, name, pattern, principal, op))

    assert described(admin, acl_filter(ResourceType.ANY, None, ANY_PATTERN, principal)) == {key(a) for a in everything}
    assert topics(topic, literal) == {key(exact)}
    assert topics(topic[:6], prefixed) == {key(prefix)}
    assert topics(None, prefixed) == {key(prefix), key(unrelated)}
    assert topics(topic, ANY_PATTERN) == {key(exact)}
    assert topics(topic, ACLResourcePatternType.MATCH) == {key(exact), key(wildcard), key(prefix)}
    assert topics(topic, ACLResourcePatternType.MATCH, ACLOperation.WRITE) == {key(prefix)}

    both = acl_filter(ResourceType.TOPIC, topic, ACLResourcePatternType.MATCH, principal)
    reads = acl_filter(ResourceType.ANY, None, ANY_PATTERN, principal, ACLOperation.READ)
    (first, first_matching, first_error), (second, second_matching, second_error) = admin.delete_acls([both, reads])
    assert (first, second) == (both, reads)
    assert first_error is second_error is Errors.NoError
    assert {key(a) for a in first_matching} == {key(exact), key(wildcard), key(prefix)}
    assert {key(a) for a in second_matching} == {key(exact), key(unrelated), key(group)}  # exact under both
    assert described(admin, acl_filter(ResourceType.ANY, None, ANY_PATTERN, principal)) == set()


def test_scram_alterations_edge_cases(server: ServerHandle, admin_client):
    admin = admin_client(server)
    user, weak, many, missing = unique("kp-edge"), unique("kp-weak"), unique("kp-many"), unique("kp-missing")
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, sha256, "pw")]) == {user: None}
    outcome = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(user, sha512, "a"),
            UserScramCredentialUpsertion(user, sha512, "b"),
            UserScramCredentialUpsertion(weak, sha256, "c", iterations=4095),
            UserScramCredentialUpsertion(many, sha256, "d", iterations=16_385),
            UserScramCredentialDeletion(missing, sha256),
        ]
    )
    assert outcome == {
        user: "A user credential cannot be altered twice in the same request",
        weak: "Too few iterations",
        many: "Too many iterations",
        missing: "Attempt to delete a user credential that does not exist",
    }
    assert admin.describe_user_scram_credentials([user, weak]) == {
        user: {"error": None, "credential_infos": [{"mechanism": sha256, "iterations": 4096}]},
        weak: {"error": f"Attempt to describe a user credential that does not exist: {weak}", "credential_infos": []},
    }


def test_auto_create_through_metadata_but_not_create_topics(server: ServerHandle, admin_client):
    """KIP-755: a user with only AUTO_CREATE (and DESCRIBE) on a prefix gets topics created by a producer's
    Metadata request, and TOPIC_AUTHORIZATION_FAILED from CreateTopics."""
    user, password, prefix = unique("kp-auto"), "pw-auto", unique("kp-auto-topic")
    server.add_user(user, password)
    with Wire(server.sasl) as wire:
        wire.login(ADMIN, ADMIN_PASSWORD)
        for operation in (AUTO_CREATE, 8):  # kafka-python has no AUTO_CREATE: granted over the raw wire
            code = create_acl(
                wire, resource_type=2, name=prefix, pattern_type=4, principal=f"User:{user}", operation=operation
            )
            assert code == 0

    as_user = admin_client(server, user, password)
    with pytest.raises(Errors.TopicAuthorizationFailedError):
        as_user.create_topics([NewTopic(f"{prefix}-direct", 1, 1)])
    assert f"{prefix}-direct" not in admin_client(server).list_topics()

    producer = KafkaProducer(max_block_ms=10_000, **connection_config(server, user, password))
    try:
        assert producer.partitions_for(f"{prefix}-auto") == {0}
    finally:
        producer.close()
    assert f"{prefix}-auto" in admin_client(server).list_topics()
    allowed = [
        r
        for r in server.audit_records()
        if r["principal"] == f"User:{user}" and r["operation"] == "AUTO_CREATE" and r["decision"] == "ALLOWED"
    ]
    assert {r["resource_name"] for r in allowed} == {f"{prefix}-auto"}
    assert all(r["api"] == "Metadata" and r["rule"].startswith("MatchingAcl(") for r in allowed)


def test_plaintext_principal_is_anonymous(server: ServerHandle, admin_client):
    anonymous = admin_client(server, None, None, SecurityProtocol.PLAINTEXT)
    own_acls = acl_filter(ResourceType.ANY, None, ANY_PATTERN, "User:ANONYMOUS")
    with pytest.raises(Errors.ClusterAuthorizationFailedError):
        anonymous.describe_acls(own_acls)
    cluster, literal = ResourceType.CLUSTER, ACLResourcePatternType.LITERAL
    grant = acl("User:ANONYMOUS", ACLOperation.DESCRIBE, cluster, "kafka-cluster", literal)
    admin = admin_client(server)
    assert admin.create_acls([grant])["failed"] == []
    try:
        assert described(anonymous, own_acls) == {key(grant)}
    finally:
        admin.delete_acls([own_acls])


def test_wrong_password_fails_the_login(server: ServerHandle):
    """kafka-python reports a failed bootstrap, not the SASL error: its transport drops the bytes it read when the
    same read loop then sees the server close the connection (kafka/net/transport.py ``_sock_recv``), and Kafka
    closes after the failure response too. The server's counter and the raw-wire test show the real answer."""
    failed_before = server.server.logins.failed
    with pytest.raises(Errors.KafkaTimeoutError):
        KafkaAdminClient(bootstrap_timeout_ms=1_000, **connection_config(server, ADMIN, "wrong-password"))
    assert server.server.logins.failed > failed_before

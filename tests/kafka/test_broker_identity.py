"""The test broker's identity listeners (``identity_kafka``) do what Kafka does, for confluent-kafka and kafka-python:

* MTLS: a client certificate is the principal ``ssl.principal.mapping.rules`` makes of its subject (a RULE for
  ``OU=kafkaguard``, DEFAULT otherwise), as an ACL only that principal matches and the authorizer log show;
* OAUTH: a token signed by the JWKS file's key is accepted (its ``sub`` is the principal); one signed by another key
  under the same key id is refused, and the broker says why (the signature, not a jose4j failure).
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD
from tests.kafka.identity_broker import IdentityKafka
from tests.kafka.tokens import SigningKey

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaConsumer  # type: ignore[import-untyped]
    from kafka.errors import KafkaError as KafkaPythonError  # type: ignore[import-untyped]
    from kafka.net.sasl.oauth import AbstractTokenProvider  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def topic(identity_kafka: IdentityKafka) -> Iterator[str]:
    """A topic only User:alice (a certificate's mapped subject) and User:carol (a token's sub) may describe."""
    name = f"identity-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": identity_kafka.broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN,
                         "sasl.password": ADMIN_PASSWORD})  # fmt: skip
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            name,
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for user in ("alice", "carol")
    ]
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT)
    time.sleep(0.5)  # the ACLs reach the broker's authorizer from its controller
    yield name


def decision(principal: str, verdict: str, topic: str) -> str:
    """Kafka's authorizer log line (its start) for a DESCRIBE of ``topic`` from 127.0.0.1."""
    return (f"Principal = {principal} is {verdict} operation = DESCRIBE from host = 127.0.0.1 on resource = "
            f"Topic:LITERAL:{topic}")  # fmt: skip


def topic_error(config: dict[str, Any], topic: str) -> KafkaError | None:
    """The error the broker answers ``topic``'s metadata with for this client (None: described)."""
    metadata = AdminClient(config).list_topics(topic=topic, timeout=TIMEOUT)
    error: KafkaError | None = metadata.topics[topic].error
    return error


def test_a_client_certificate_is_the_principal_the_mapping_rules_make_of_its_subject(
    identity_kafka: IdentityKafka, topic: str
) -> None:
    alice = identity_kafka.client_certificate("CN=Alice,OU=kafkaguard,O=Example", "alice")
    bob = identity_kafka.client_certificate("CN=Bob,O=Other", "bob")

    assert topic_error(identity_kafka.ssl_config(*alice), topic) is None  # the RULE: User:alice, allowed
    denied = topic_error(identity_kafka.ssl_config(*bob), topic)
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    decisions = identity_kafka.broker.authorizer_log.read_text()
    assert decision("User:alice", "Allowed", topic) in decisions
    assert decision("User:CN=Bob,O=Other", "Denied", topic) in decisions


def test_kafka_python_logs_in_with_a_client_certificate(identity_kafka: IdentityKafka, topic: str) -> None:
    certfile, keyfile = identity_kafka.client_certificate("CN=Alice,OU=kafkaguard,O=Example", "alice-kp")
    consumer = KafkaConsumer(bootstrap_servers=identity_kafka.broker.mtls_bootstrap, security_protocol="SSL",
                             ssl_cafile=str(identity_kafka.ca_file), ssl_certfile=str(certfile),
                             ssl_keyfile=str(keyfile), request_timeout_ms=15000)  # fmt: skip
    try:
        assert consumer.partitions_for_topic(topic) == {0}
    finally:
        consumer.close()


def oauth_config(identity_kafka: IdentityKafka, token: str) -> dict[str, Any]:
    return {"bootstrap.servers": identity_kafka.broker.oauth_bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER", "ssl.ca.location": str(identity_kafka.ca_file),
            "oauth_cb": lambda _config: (token, time.time() + 300)}  # fmt: skip


def test_a_token_signed_by_the_jwks_key_is_accepted_and_its_sub_is_the_principal(
    identity_kafka: IdentityKafka, topic: str
) -> None:
    assert topic_error(oauth_config(identity_kafka, identity_kafka.token("carol")), topic) is None
    denied = topic_error(oauth_config(identity_kafka, identity_kafka.token("dave")), topic)
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    decisions = identity_kafka.broker.authorizer_log.read_text()
    assert decision("User:carol", "Allowed", topic) in decisions


def refusals(identity_kafka: IdentityKafka) -> int:
    """How often the broker has said a token's signature did not verify (its validator's WARN line)."""
    log = (identity_kafka.broker.workdir / "broker.log").read_text(errors="replace")
    return log.count("Could not validate the access token: JWS signature is invalid")


def forged_token(identity_kafka: IdentityKafka, subject: str) -> str:
    """A token like a good one, signed by another key under the same key id."""
    return SigningKey.create(identity_kafka.signing_key.kid).sign(subject, **identity_kafka.token_claims())


def test_a_token_signed_by_another_key_is_refused(identity_kafka: IdentityKafka, topic: str) -> None:
    before = refusals(identity_kafka)
    with pytest.raises(KafkaException):
        forged = oauth_config(identity_kafka, forged_token(identity_kafka, "carol"))
        AdminClient(forged).list_topics(topic=topic, timeout=5)
    assert refusals(identity_kafka) > before


class _Token(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, value: str) -> None:
        self.value = value

    def token(self) -> str:
        return self.value


def kafka_python_consumer(identity_kafka: IdentityKafka, token: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=identity_kafka.broker.oauth_bootstrap, security_protocol="SASL_SSL",
                         sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=_Token(token),
                         ssl_cafile=str(identity_kafka.ca_file), request_timeout_ms=10000,
                         bootstrap_timeout_ms=5000)  # fmt: skip


def test_kafka_python_logs_in_with_a_token_and_is_refused_with_a_forged_one(
    identity_kafka: IdentityKafka, topic: str
) -> None:
    consumer = kafka_python_consumer(identity_kafka, identity_kafka.token("carol"))
    try:
        assert consumer.partitions_for_topic(topic) == {0}
    finally:
        consumer.close()
    before = refusals(identity_kafka)
    with pytest.raises(KafkaPythonError):  # it cannot bootstrap: the broker closes every login
        kafka_python_consumer(identity_kafka, forged_token(identity_kafka, "carol")).partitions_for_topic(topic)
    assert refusals(identity_kafka) > before

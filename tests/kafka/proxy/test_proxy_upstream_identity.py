"""``kafkaguard proxy`` logs in to the upstream with a client certificate (the broker's MTLS listener) or with
OAUTHBEARER tokens from a client-credentials token endpoint (its OAUTH listener), instead of SCRAM.

The broker (``identity_kafka``) maps the certificate ``CN=kafkaguard-proxy,OU=kafkaguard,…`` and the token subject
``kafkaguard-proxy`` to ``User:kafkaguard-proxy``, a super user there: its authorizer log shows that principal
producing and fetching what a client of the proxy produced and consumed. A token signed by a key the broker does not
trust stops the proxy at start with the broker's refusal.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kafkaguard.errors import InvalidConfigError
from tests.kafka.identity_broker import PROXY_PRINCIPAL, PROXY_SUBJECT, IdentityKafka
from tests.kafka.proxy.conftest import start_proxy
from tests.kafka.tokens import SigningKey, TokenEndpoint
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle

CLIENT_SECRET = "proxy-client-secret"  # noqa: S105 - the test token endpoint's client secret
TIMEOUT = 30.0


def through(proxy: ServerHandle, **extra: Any) -> dict[str, Any]:
    """kafkaguard's admin (a super user of the proxy's store) on the proxy's SASL_PLAINTEXT listener."""
    host, port = proxy.sasl
    return {"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD,
            **extra}  # fmt: skip


def produce_and_consume(proxy: ServerHandle) -> str:
    """Create a topic, write a message and read it back, all through the proxy; the topic's name."""
    topic = f"upstream-identity-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(through(proxy))  # kept until the result is in (its handle ends with it)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    producer = Producer(through(proxy))
    producer.produce(topic, b"through the proxy")
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(through(proxy, **{"group.id": topic, "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([topic])
        message = consumer.poll(TIMEOUT)
        while message is not None and message.error():
            message = consumer.poll(TIMEOUT)
        assert message is not None and message.value() == b"through the proxy"
    finally:
        consumer.close()
    return topic


def upstream_decisions(identity_kafka: IdentityKafka, topic: str) -> set[str]:
    """The operations the broker allowed on ``topic``, and to whom, as its authorizer log says."""
    found = set()
    for line in identity_kafka.broker.authorizer_log.read_text().splitlines():
        if f"on resource = Topic:LITERAL:{topic} " in line and " is Allowed operation = " in line:
            principal = line.split("Principal = ", 1)[1].split(" ", 1)[0]
            operation = line.split(" operation = ", 1)[1].split(" ", 1)[0]
            found.add(f"{principal} {operation}")
    return found


@pytest.fixture
def mtls_proxy(identity_kafka: IdentityKafka, tmp_path: Path) -> Iterator[ServerHandle]:
    certfile, keyfile = identity_kafka.client_certificate(PROXY_SUBJECT, "kafkaguard-proxy")
    handle = start_proxy(tmp_path, identity_kafka.broker, upstream=identity_kafka.broker.mtls_bootstrap,
                         upstream_security_protocol="SSL", upstream_user=None, upstream_password=None,
                         upstream_ssl_cafile=identity_kafka.ca_file, upstream_ssl_certfile=certfile,
                         upstream_ssl_keyfile=keyfile)  # fmt: skip
    try:
        yield handle
    finally:
        handle.stop()


def test_the_proxy_logs_in_upstream_with_a_client_certificate(
    identity_kafka: IdentityKafka, mtls_proxy: ServerHandle
) -> None:
    topic = produce_and_consume(mtls_proxy)
    decisions = upstream_decisions(identity_kafka, topic)
    assert {f"User:{PROXY_PRINCIPAL} WRITE", f"User:{PROXY_PRINCIPAL} READ"} <= decisions
    assert all(decision.startswith(f"User:{PROXY_PRINCIPAL} ") for decision in decisions)
    assert mtls_proxy.errors == []


def oauth_proxy(identity_kafka: IdentityKafka, directory: Path, endpoint: TokenEndpoint) -> ServerHandle:
    return start_proxy(directory, identity_kafka.broker, upstream=identity_kafka.broker.oauth_bootstrap,
                       upstream_security_protocol="SASL_SSL", upstream_sasl_mechanism="OAUTHBEARER",
                       upstream_user=None, upstream_password=None, upstream_ssl_cafile=identity_kafka.ca_file,
                       upstream_sasl_oauthbearer_token_endpoint_url=endpoint.url,
                       upstream_sasl_oauthbearer_client_id=PROXY_PRINCIPAL,
                       upstream_sasl_oauthbearer_client_secret=CLIENT_SECRET,
                       upstream_sasl_oauthbearer_scope="kafka")  # fmt: skip


def test_the_proxy_logs_in_upstream_with_oauthbearer_tokens(identity_kafka: IdentityKafka, tmp_path: Path) -> None:
    claims = identity_kafka.token_claims()
    with TokenEndpoint(identity_kafka.signing_key, {PROXY_PRINCIPAL: CLIENT_SECRET}, claims=claims) as endpoint:
        handle = oauth_proxy(identity_kafka, tmp_path, endpoint)
        try:
            topic = produce_and_consume(handle)
            assert handle.errors == []
        finally:
            handle.stop()
    assert endpoint.requests and all(r.authenticated and r.form["scope"] == "kafka" for r in endpoint.requests)
    assert len(endpoint.issued) == 1  # one token, cached for every upstream connection
    decisions = upstream_decisions(identity_kafka, topic)
    assert {f"User:{PROXY_PRINCIPAL} WRITE", f"User:{PROXY_PRINCIPAL} READ"} <= decisions


def test_a_token_the_upstream_refuses_stops_the_proxy_with_its_reason(
    identity_kafka: IdentityKafka, tmp_path: Path
) -> None:
    untrusted = SigningKey.create(identity_kafka.signing_key.kid)
    claims = identity_kafka.token_claims()
    with (
        TokenEndpoint(untrusted, {PROXY_PRINCIPAL: CLIENT_SECRET}, claims=claims) as endpoint,
        pytest.raises(InvalidConfigError) as failure,
    ):
        oauth_proxy(identity_kafka, tmp_path, endpoint)
    message = str(failure.value)
    assert "refused the proxy's OAUTHBEARER token (invalid_token)" in message
    assert CLIENT_SECRET not in message and endpoint.issued[0] not in message

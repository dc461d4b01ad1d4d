"""aiokafka (0.14) logs in over SCRAM-SHA-256/512 on SASL_PLAINTEXT and SASL_SSL, and is refused a wrong password."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.consumer import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.errors import KafkaConnectionError  # type: ignore[import-untyped]
from aiokafka.helpers import create_ssl_context  # type: ignore[import-untyped]

from kafkaguard.config import SecurityProtocol
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle

pytestmark = pytest.mark.integration

TRANSPORTS = [
    pytest.param(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-256", id="sasl_plaintext-sha256"),
    pytest.param(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-512", id="sasl_plaintext-sha512"),
    pytest.param(SecurityProtocol.SASL_SSL, "SCRAM-SHA-512", id="sasl_ssl-sha512"),
]


def options(
    server: ServerHandle, user: str, password: str, protocol: SecurityProtocol, mechanism: str
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": server.bootstrap(protocol),
        "security_protocol": protocol.value,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "request_timeout_ms": 10_000,
    }
    if protocol.uses_tls:
        config["ssl_context"] = create_ssl_context(cafile=str(server.tls.certfile))
    return config


@pytest.mark.parametrize(("protocol", "mechanism"), TRANSPORTS)
def test_admin_client_logs_in_and_manages_topics(server: ServerHandle, protocol, mechanism):
    topic = f"aio-{uuid.uuid4().hex[:10]}"

    async def session() -> None:
        admin = AIOKafkaAdminClient(**options(server, ADMIN, ADMIN_PASSWORD, protocol, mechanism))
        await admin.start()
        try:
            cluster = await admin.describe_cluster()
            assert cluster["cluster_id"] == server.server.cluster_id
            assert cluster["controller_id"] == 1
            assert [b["port"] for b in cluster["brokers"]] == [server.ports[protocol]]
            response = await admin.create_topics([NewTopic(topic, 2, 1)])
            assert [(t[0], t[1]) for t in response.topic_errors] == [(topic, 0)]
            assert topic in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(session())


def test_consumer_of_a_new_user_fetches_metadata(server: ServerHandle):
    user, password = f"aio-user-{uuid.uuid4().hex[:8]}", "pw-aio"
    server.add_user(user, password)

    async def session() -> set[str]:
        consumer = AIOKafkaConsumer(
            **options(server, user, password, SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-256"),
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            return set(await consumer.topics())
        finally:
            await consumer.stop()

    # Logged in, and without DESCRIBE on any topic it sees none of them.
    assert asyncio.run(session()) == set()


def test_wrong_password_is_refused(server: ServerHandle, caplog: pytest.LogCaptureFixture):
    async def session() -> None:
        admin = AIOKafkaAdminClient(**options(server, ADMIN, "wrong", SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-256"))
        try:
            await admin.start()
        finally:
            await admin.close()

    with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(KafkaConnectionError):
        asyncio.run(session())
    assert "SaslAuthenticationFailed: Authentication failed during authentication due to invalid credentials" in (
        caplog.text
    )

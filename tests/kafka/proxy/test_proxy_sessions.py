"""Sessions through ``kafkaguard proxy`` end with their user, and re-authenticate (KIP-368), in front of a real Kafka
broker (issue 24, finding 5).

Before this change a client logged in to the proxy kept its connection, and so its upstream traffic, after its user
was deleted or its password changed, and the proxy never told a session lifetime nor accepted a re-authentication:
every test here failed on that code.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, UserScramCredentialDeletion  # type: ignore[attr-defined]
from confluent_kafka.admin import ScramMechanism as ConfluentMechanism  # type: ignore[attr-defined]

from kafkaguard.model import AclOperation, ResourceType
from kafkaguard.proxy.app import ProxyServer
from tests.kafka.broker import KafkaBroker
from tests.kafka.proxy.conftest import start_proxy
from tests.kafka.proxy.test_proxy_clients import create_topics, grant, proxy_bootstrap, sasl
from tests.server.session_clients import (
    SLACK_SECONDS,
    answers,
    change_in_another_process,
    logged_in,
    login_lifetime,
    reauthenticate,
    seconds_until_closed,
)
from tests.serving import ADMIN, ADMIN_PASSWORD, ServerHandle
from tests.wire import Wire

pytestmark = pytest.mark.integration

SYNC_SECONDS = 0.3
LIFETIME_MS = 2000
LIFETIME = LIFETIME_MS / 1000
PASSWORD = "proxy-session-pw"  # noqa: S105 - a test password


def proxy_fixture(
    kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory, **settings: Any
) -> Iterator[ServerHandle]:
    handle = start_proxy(tmp_path_factory.mktemp("proxy-sessions"), kafka, sync_interval_seconds=SYNC_SECONDS,
                         **settings)  # fmt: skip
    try:
        yield handle
    finally:
        handle.stop()
    assert handle.errors == [], f"the proxy logged errors: {handle.errors}"


@pytest.fixture(scope="module")
def proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """Sessions without a lifetime (Kafka's default): only a credential change ends them."""
    yield from proxy_fixture(kafka, tmp_path_factory)


@pytest.fixture(scope="module")
def reauth_proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    yield from proxy_fixture(kafka, tmp_path_factory, connections_max_reauth_ms=LIFETIME_MS)


def address(proxy: ServerHandle) -> tuple[str, int]:
    host, port = proxy_bootstrap(proxy).rsplit(":", 1)
    return host, int(port)


def producer_user(proxy: ServerHandle, kafka: KafkaBroker, prefix: str) -> tuple[str, str]:
    """A user allowed to write to a topic of its own (created on the broker); returns (user, topic)."""
    name, topic = f"{prefix}-{uuid.uuid4().hex[:8]}", f"sessions-{uuid.uuid4().hex[:8]}"
    proxy.add_user(name, PASSWORD)
    create_topics(kafka, topic)
    grant(proxy, f"User:{name}", ResourceType.TOPIC, topic, AclOperation.WRITE)
    return name, topic


def producer(proxy: ServerHandle, name: str) -> Producer:
    return Producer(sasl(proxy_bootstrap(proxy), name, PASSWORD, **{"linger.ms": 0, "message.timeout.ms": 4000,
                                                                     "reconnect.backoff.max.ms": 200}))  # fmt: skip


def deliver(client: Producer, topic: str, value: bytes) -> KafkaError | None:
    outcomes: list[KafkaError | None] = []
    client.produce(topic, value, on_delivery=lambda err, _msg: outcomes.append(err))
    client.flush(10)
    assert len(outcomes) == 1
    return outcomes[0]


# ------------------------------------------------------------------------------------- sessions end with users


def test_deleting_a_user_through_the_proxy_closes_her_connections_and_stops_her_producer(
    proxy: ServerHandle, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The admin deletes alice with confluent-kafka's AlterUserScramCredentials through the proxy: her producer's
    connection and her raw one are closed at once and her next message is not delivered; bob's producer goes on."""
    caplog.set_level(logging.INFO, logger="kafkaguard.protocol.sessions")
    (alice, alice_topic), (bob, bob_topic) = producer_user(proxy, kafka, "alice"), producer_user(proxy, kafka, "bob")
    alice_producer, bob_producer = producer(proxy, alice), producer(proxy, bob)
    assert deliver(alice_producer, alice_topic, b"before") is None
    assert deliver(bob_producer, bob_topic, b"before") is None
    with logged_in(address(proxy), alice, PASSWORD, "SCRAM-SHA-512") as alice_wire:
        admin = AdminClient(sasl(proxy_bootstrap(proxy), ADMIN, ADMIN_PASSWORD))
        mechanisms = (ConfluentMechanism.SCRAM_SHA_256, ConfluentMechanism.SCRAM_SHA_512)
        deletions: list[Any] = [UserScramCredentialDeletion(alice, m) for m in mechanisms]
        for future in admin.alter_user_scram_credentials(deletions).values():
            future.result(10)
        assert seconds_until_closed(alice_wire, timeout=SLACK_SECONDS) is not None
    assert deliver(alice_producer, alice_topic, b"after") is not None  # reconnecting fails: she no longer exists
    assert deliver(bob_producer, bob_topic, b"after") is None
    del alice_producer  # destroyed now: librdkafka would go on retrying in the background
    closed = [r.getMessage() for r in caplog.records if f"the session of User:{alice} " in r.getMessage()]
    assert len(closed) >= 2 and all(line.endswith("credential was deleted") for line in closed)
    assert not [r for r in caplog.records if f"the session of User:{bob} " in r.getMessage()]


@pytest.mark.parametrize("action", ["password", "delete"])
def test_a_change_by_another_process_closes_the_proxys_connections_within_the_sync_interval(
    proxy: ServerHandle, kafka: KafkaBroker, action: str
) -> None:
    (alice, _), (bob, _) = producer_user(proxy, kafka, "alice"), producer_user(proxy, kafka, "bob")
    with (
        logged_in(address(proxy), alice, PASSWORD, "SCRAM-SHA-512") as alice_wire,
        logged_in(address(proxy), bob, PASSWORD, "SCRAM-SHA-512") as bob_wire,
    ):
        assert answers(alice_wire)  # through the proxy to the broker and back
        committed = change_in_another_process(proxy.data_dir, action, alice, "rotated-elsewhere")
        assert seconds_until_closed(alice_wire, timeout=SYNC_SECONDS + SLACK_SECONDS) is not None
        assert time.monotonic() - committed < SYNC_SECONDS + SLACK_SECONDS
        assert answers(bob_wire)


# ------------------------------------------------------------------------------------------------- KIP-368


def test_a_producer_reauthenticates_through_the_proxy_and_keeps_producing(
    reauth_proxy: ServerHandle, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """librdkafka produces every 250 ms for 3.5 lifetimes: every message is delivered, its connections
    re-authenticate, and it never opens a new one (the client connection and its upstream connection stay)."""
    caplog.set_level(logging.DEBUG, logger="kafkaguard.protocol")
    name, topic = producer_user(reauth_proxy, kafka, "writer")
    server = reauth_proxy.server
    assert isinstance(server, ProxyServer)
    client = producer(reauth_proxy, name)
    assert deliver(client, topic, b"first") is None
    connections = sum(server.connections_per_node.values())
    started, sent = time.monotonic(), 1
    while time.monotonic() - started < 3.5 * LIFETIME:
        assert deliver(client, topic, f"m{sent}".encode()) is None
        sent += 1
        time.sleep(0.25)
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if m.startswith("Successfully re-authenticated") and f"'{name}'" in m]) >= 2
    assert not [m for m in messages if f"(User:{name}) closed: session expired" in m]
    assert sum(server.connections_per_node.values()) == connections  # no new client connection
    assert sent >= 10


def test_through_the_proxy_an_expired_session_is_closed_and_another_user_cannot_take_over(
    reauth_proxy: ServerHandle, kafka: KafkaBroker
) -> None:
    (alice, _), (bob, _) = producer_user(reauth_proxy, kafka, "alice"), producer_user(reauth_proxy, kafka, "bob")
    with logged_in(address(reauth_proxy), alice, PASSWORD) as wire:
        assert answers(wire)
        time.sleep(LIFETIME + 0.3)
        assert not answers(wire)  # not re-authenticated: closed at its first request after expiry
    with logged_in(address(reauth_proxy), alice, PASSWORD) as wire:
        final = reauthenticate(wire, bob, PASSWORD)
        assert final.error_code.value == 58  # SASL_AUTHENTICATION_FAILED: Kafka refuses another principal too
        assert wire.recv_frame() is None
    with logged_in(address(reauth_proxy), alice, PASSWORD) as wire:
        time.sleep(LIFETIME * 0.7)
        final = reauthenticate(wire, alice, PASSWORD)
        assert (final.error_code.value, final.session_lifetime) == (0, timedelta(milliseconds=LIFETIME_MS))
        time.sleep(LIFETIME * 0.7)
        assert answers(wire)  # past the first lifetime: renewed


def test_the_proxy_tells_the_session_lifetime(reauth_proxy: ServerHandle, kafka: KafkaBroker) -> None:
    name, _ = producer_user(reauth_proxy, kafka, "told")
    with Wire(address(reauth_proxy)) as wire:
        assert login_lifetime(wire, name, PASSWORD) == timedelta(milliseconds=LIFETIME_MS)
        assert answers(wire)

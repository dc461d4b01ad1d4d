"""Each upstream broker's ``auto.create.topics.enable`` is read from that broker itself (issue 24, finding 6).

The upstreams are fake brokers (``fake_kafka``) that answer DescribeConfigs as Kafka does: a broker describes only
itself and refuses any other broker id ("Unexpected broker id, expected 2 or empty string, but received 1").
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaguard.proxy import broker_settings
from kafkaguard.proxy.upstream import Address, UpstreamConnection, UpstreamProtocol, UpstreamSecurity
from tests.actors import ACTOR
from tests.proxy.fake_kafka import FakeKafka, fake_kafka, start_proxy
from tests.serving import ServerHandle
from tests.wire import Wire, metadata

PASSWORD = "settings-pw"  # noqa: S105 - a test password
PLAIN = UpstreamSecurity(UpstreamProtocol.PLAINTEXT)
LOG = "kafkaguard.proxy.broker_settings"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def two_brokers() -> Iterator[tuple[FakeKafka, FakeKafka]]:
    """Fake brokers 1 and 2, each naming both in Metadata, both with auto.create.topics.enable=true."""
    with ExitStack() as stack:
        first = stack.enter_context(fake_kafka(FakeKafka(node_id=1)))
        second = stack.enter_context(fake_kafka(FakeKafka(node_id=2)))
        both = [(1, "127.0.0.1", first.port), (2, "127.0.0.1", second.port)]
        first.brokers = second.brokers = both
        yield first, second


def creator(proxy: ServerHandle) -> str:
    """A user with DESCRIBE and CREATE on the ``feed-`` prefix."""
    proxy.add_user("creator", PASSWORD)
    pattern = ResourcePattern(ResourceType.TOPIC, "feed-", PatternType.PREFIXED)
    bindings = [AclBinding(pattern, AccessControlEntry("User:creator", "*", op, AclPermissionType.ALLOW))
                for op in (AclOperation.DESCRIBE, AclOperation.CREATE)]  # fmt: skip
    assert all(result.succeeded for result in proxy.services.acls.create_acls(bindings, actor=ACTOR))
    return "creator"


def auto_created(proxy: ServerHandle, user: str, topic: str) -> tuple[int, bool]:
    """(the client's error code, whether an upstream created ``topic``) for a Metadata v12 naming it through the
    proxy's bootstrap port."""
    with Wire(proxy.sasl) as wire:
        wire.login(user, PASSWORD)
        [answered] = metadata(wire, [topic]).topics
    return int(answered.error_code.value), answered.error_code.value == 0


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)  # polling a background thread's state, bounded by the deadline


def test_each_broker_is_read_from_itself_when_the_bootstrap_answerer_is_not_the_first_broker(
    two_brokers: tuple[FakeKafka, FakeKafka], tmp_path: Path
):
    """``--upstream <down>,b2,b1``: discovery is answered by broker 2, whose Metadata lists broker 1 first. Before the
    fix the proxy asked broker 2 about broker 1, was refused, took auto.create.topics.enable as false and never
    auto-created (this test's Metadata got UNKNOWN_TOPIC_OR_PARTITION and nothing was created)."""
    first, second = two_brokers
    upstream = f"127.0.0.1:{closed_port()},{second.address},{first.address}"
    proxy = start_proxy(tmp_path, upstream)
    try:
        nodes = proxy.server.nodes  # type: ignore[attr-defined]
        assert nodes.auto_create_topics(Address("127.0.0.1", first.port)) is True
        assert nodes.auto_create_topics(Address("127.0.0.1", second.port)) is True
        user = creator(proxy)
        error, _ = auto_created(proxy, user, "feed-new")
        assert error == 0
        assert "feed-new" in second.created  # the bootstrap connection reached broker 2, the first one alive
        # each broker was asked about itself (broker 2 also at discovery, about both)
        assert any([r.resource_name for r in b.resources] == ["1"] for b in first.requests_about_brokers())
        assert any([r.resource_name for r in b.resources] == ["2"] for b in second.requests_about_brokers())
    finally:
        proxy.stop()
    assert proxy.errors == []


def test_a_broker_with_auto_creation_off_is_read_as_off(tmp_path: Path):
    with fake_kafka(FakeKafka(node_id=1, auto_create=False)) as broker:
        proxy = start_proxy(tmp_path, broker.address)
        try:
            assert proxy.server.nodes.auto_create_topics(Address("127.0.0.1", broker.port)) is False  # type: ignore[attr-defined]
            error, _ = auto_created(proxy, creator(proxy), "feed-absent")
            assert error == ErrorCode.unknown_topic_or_partition.value  # as Kafka answers when it does not create
            assert broker.created == []
        finally:
            proxy.stop()


def test_an_unreadable_setting_is_logged_once_retried_and_never_taken_as_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    """The service user may not describe the broker's configs: the proxy starts, logs one warning for the whole
    failure streak (not one per retry), treats auto-creation as enabled meanwhile (a caller with CREATE gets its topic
    — the broker's own setting still applies — a caller without it TOPIC_AUTHORIZATION_FAILED), and reads the
    setting once the broker lets it."""
    monkeypatch.setattr(broker_settings, "RETRY_FIRST_SECONDS", 0.02)
    monkeypatch.setattr(broker_settings, "RETRY_MAX_SECONDS", 0.05)
    caplog.set_level(logging.INFO, logger=LOG)
    refusing = FakeKafka(node_id=1, auto_create=True, describe_configs_error=ErrorCode.cluster_authorization_failed)
    with fake_kafka(refusing) as broker:
        proxy = start_proxy(tmp_path, broker.address)
        try:
            nodes = proxy.server.nodes  # type: ignore[attr-defined]
            address = Address("127.0.0.1", broker.port)
            assert nodes.auto_create_topics(address) is None  # unknown, not False
            wait_for(lambda: len(broker.requests_about_brokers()) >= 10)  # retried with backoff
            warnings = [r for r in caplog.records if r.name == LOG and r.levelno == logging.WARNING]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]  # one per failure streak
            assert "CLUSTER_AUTHORIZATION_FAILED" in warnings[0].getMessage().upper()
            assert "TOPIC_AUTHORIZATION_FAILED" in warnings[0].getMessage()  # says what it does meanwhile

            user = creator(proxy)
            assert auto_created(proxy, user, "feed-meanwhile") == (0, True)
            proxy.add_user("reader", PASSWORD)
            assert auto_created(proxy, "reader", "feed-denied")[0] == ErrorCode.topic_authorization_failed.value
            assert broker.created == ["feed-meanwhile"]

            broker.describe_configs_error = None
            wait_for(lambda: nodes.auto_create_topics(address) is True)
            # The watch stores the setting before it logs the recovery: wait for the line rather than race it.
            wait_for(lambda: any("after" in r.getMessage() and r.levelno == logging.INFO
                                 for r in caplog.records if r.name == LOG))  # fmt: skip
        finally:
            proxy.stop()
    assert proxy.errors == []


def test_a_broker_that_joins_later_is_read_when_it_is_learned(two_brokers: tuple[FakeKafka, FakeKafka], tmp_path: Path):
    first, second = two_brokers
    first.brokers = [(1, "127.0.0.1", first.port)]  # at start the cluster has broker 1 only
    second.auto_create = False
    proxy = start_proxy(tmp_path, first.address)
    try:
        nodes = proxy.server.nodes  # type: ignore[attr-defined]
        assert nodes.node_ids == [1]
        first.brokers = [(1, "127.0.0.1", first.port), (2, "127.0.0.1", second.port)]
        with Wire(proxy.sasl) as wire:
            wire.login(creator(proxy), PASSWORD)
            metadata(wire, ["feed-any"])  # the answer names broker 2: the proxy learns it
        wait_for(lambda: nodes.auto_create_topics(Address("127.0.0.1", second.port)) is False)
        assert nodes.auto_create_topics(Address("127.0.0.1", first.port)) is True
    finally:
        proxy.stop()
    assert proxy.errors == []


def test_a_hung_broker_does_not_hold_up_the_proxy_start(two_brokers: tuple[FakeKafka, FakeKafka], tmp_path: Path):
    """Broker 2 accepts connections and never answers: the proxy starts without waiting the upstream timeout for it
    (its clients, and the other brokers' clients, wait for the proxy), and broker 2's setting stays unknown."""
    first, second = two_brokers
    second.silent = True
    began = time.monotonic()
    proxy = start_proxy(tmp_path, first.address, upstream_timeout_seconds=30)
    try:
        assert time.monotonic() - began < 10  # FIRST_READS_SECONDS (2) and the rest, loosely; not 30
        nodes = proxy.server.nodes  # type: ignore[attr-defined]
        assert nodes.auto_create_topics(Address("127.0.0.1", first.port)) is True
        assert nodes.auto_create_topics(Address("127.0.0.1", second.port)) is None
    finally:
        proxy.stop()


def test_read_auto_create_identifies_the_broker_at_an_address():
    """One DescribeConfigs naming every candidate: the broker answers only its own id."""
    with fake_kafka(FakeKafka(node_id=2, auto_create=True)) as broker:

        async def read() -> tuple[int, bool]:
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=5)
            try:
                return await broker_settings.read_auto_create(upstream, [1, 2, 3])
            finally:
                upstream.close()

        assert asyncio.run(read()) == (2, True)
        [asked] = broker.requests_about_brokers()
        assert [r.resource_name for r in asked.resources] == ["1", "2", "3"]


def test_read_auto_create_never_says_false_for_a_refusal():
    with fake_kafka(FakeKafka(node_id=2)) as broker:

        async def read() -> tuple[int, bool]:
            upstream = UpstreamConnection([Address("127.0.0.1", broker.port)], PLAIN, timeout=5)
            try:
                return await broker_settings.read_auto_create(upstream, [1])  # not this broker
            finally:
                upstream.close()

        with pytest.raises(broker_settings.SettingUnreadable, match="Unexpected broker id"):
            asyncio.run(read())

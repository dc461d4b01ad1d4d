"""``benchmarks/bench_proxy --tls``'s fixture: the test broker's SASL_SSL listeners (``KafkaBroker(tls=…)``) and
HAProxy re-originating TLS to its HOP listener (``bench_proxy.HAProxy``). Clients log in with SCRAM over TLS straight
and through HAProxy, Metadata through HAProxy names HAProxy's port (so no client goes around it), a client trusting
another CA is refused, and the meter reads HAProxy's own CPU. Nothing here is timed."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from benchmarks.bench_proxy import HAPROXY, HOST, HAProxy, TlsFiles, Usage, metered, negotiated_tls, tls_context
from benchmarks.kafka_load import ClientSettings, LoadError, broker_addresses, consume_throughput, produce_throughput
from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker, free_port
from tests.kafka.pki import CertificateAuthority

MESSAGES = 2000
SIZE = 1024


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.make(tmp_path_factory.mktemp("bench-tls"))


@pytest.fixture(scope="module")
def broker(kafka_dist: Path, tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    hop_advertised = free_port()
    broker = KafkaBroker(kafka_dist, tmp_path_factory.mktemp("bench-tls-broker"), hop_port=free_port(),
                         hop_advertised_port=hop_advertised, tls=tls.broker)  # fmt: skip
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def haproxy(broker: KafkaBroker, tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HAProxy]:
    if shutil.which(HAPROXY) is None:
        pytest.skip("haproxy is not installed (scripts/setup installs it)")
    assert broker.hop_port is not None and broker.hop_advertised_port is not None
    proxy = HAProxy.start(broker.hop_advertised_port, broker.hop_port, tls, tmp_path_factory.mktemp("haproxy"))
    try:
        yield proxy
    finally:
        proxy.stop()


def _settings(bootstrap: str, ca: Path) -> ClientSettings:
    return ClientSettings(bootstrap, ADMIN, ADMIN_PASSWORD, security_protocol="SASL_SSL", ssl_cafile=str(ca))


def test_scram_over_tls_straight_to_the_broker(broker: KafkaBroker, tls: TlsFiles):
    settings = _settings(broker.tls_bootstrap, tls.ca)
    assert broker_addresses(settings) == {1: broker.tls_bootstrap}
    version = negotiated_tls(broker.tls_bootstrap, tls_context(settings) or pytest.fail("no TLS context"))
    assert version.startswith("TLSv1.")
    topic = "bench-tls-direct"
    produced = produce_throughput(settings, topic, MESSAGES, SIZE)
    assert (produced.count, produced.payload_bytes) == (MESSAGES, MESSAGES * SIZE)
    consumed = consume_throughput(settings, topic, "bench-tls-direct", MESSAGES)
    assert 0 < consumed.count < MESSAGES  # every message read (else LoadError); those after the first batch timed


def test_a_client_trusting_another_ca_is_refused(broker: KafkaBroker, tmp_path: Path):
    stranger = CertificateAuthority.create("not the bench CA").write(tmp_path)
    with pytest.raises(KafkaException):
        broker_addresses(_settings(broker.tls_bootstrap, stranger), timeout=5)


def test_through_haproxy_every_byte_crosses_it_and_its_cpu_is_metered(
    broker: KafkaBroker, haproxy: HAProxy, tls: TlsFiles
):
    settings = _settings(f"{HOST}:{haproxy.port}", tls.ca)
    # Metadata through HAProxy (from the broker's HOP listener) advertises HAProxy's port, never the broker's own
    assert broker_addresses(settings) == {1: f"{HOST}:{haproxy.port}"}
    assert broker.process is not None
    usage = Usage()
    produced = produce_throughput(settings, "bench-tls-haproxy", MESSAGES, SIZE,
                                  metered(usage, broker.process.pid, haproxy.pid))  # fmt: skip
    assert produced.count == MESSAGES
    # HAProxy decrypted and re-encrypted 2 MB: it used CPU of its own (the meter reads its pid, not the proxy's)
    assert usage.proxy_cpu_exact_s > 0
    assert usage.proxy_rss_mib > 0
    consumed = consume_throughput(settings, "bench-tls-haproxy", "bench-tls-haproxy", MESSAGES)
    assert 0 < consumed.count < MESSAGES  # every message read (else LoadError); those after the first batch timed


def test_haproxy_that_cannot_start_says_why(broker: KafkaBroker, tls: TlsFiles, tmp_path: Path):
    if shutil.which(HAPROXY) is None:
        pytest.skip("haproxy is not installed (scripts/setup installs it)")
    assert broker.hop_port is not None
    broken = TlsFiles(tls.ca, tls.broker, tls.proxy_cert, tls.proxy_key, tmp_path / "missing.pem")
    with pytest.raises(LoadError, match="HAProxy did not listen"):
        HAProxy.start(free_port(), broker.hop_port, broken, tmp_path)

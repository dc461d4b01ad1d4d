"""``kafkaguard_tls_certificate_expiry_seconds{listener}`` and ``kafkaguard_tls_reloads_total{listener,result}``: a
reloading TLS context records its certificate's notAfter when built and when a renewal is taken, counts the reloads
it took and refused, and the console exports seconds until notAfter at scrape time."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client.parser import text_string_to_metric_families

from kafkaguard.audit.records.tls_certificates import ReloadResult, TlsStatistics
from kafkaguard.console.metrics import ConsoleMetrics, TlsCollector
from kafkaguard.errors import InvalidConfigError
from kafkaguard.node.tls_reload import ReloadingContext


def write_certificate(directory: Path, not_after: datetime.datetime) -> tuple[Path, Path]:
    """A self-signed certificate valid until ``not_after`` and its key, written as cert.pem and key.pem."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafkaguard")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1))
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    certfile.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return certfile, keyfile


def context_of(certfile: Path, keyfile: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as e:
        raise InvalidConfigError(f"the certificate does not load: {e}") from None
    return context


def exported(metrics: ConsoleMetrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_expiry_is_recorded_at_build_and_after_a_renewal_and_refusals_are_counted(tmp_path: Path) -> None:
    soon = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=3)).replace(microsecond=0)
    certfile, keyfile = write_certificate(tmp_path, soon)
    statistics = TlsStatistics()
    tls = ReloadingContext(
        "SASL_SSL listener",
        lambda: context_of(certfile, keyfile),
        (certfile, keyfile),
        certfile=certfile,
        statistics=statistics,
        label="SASL_SSL",
    )
    assert statistics.not_after() == {"SASL_SSL": soon.timestamp()}
    assert statistics.reloads() == {("SASL_SSL", ReloadResult.OK): 0, ("SASL_SSL", ReloadResult.REFUSED): 0}

    certfile.write_text("-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n")  # broken
    assert asyncio.run(tls.check()) is False
    assert statistics.not_after() == {"SASL_SSL": soon.timestamp()}  # the old one is still served
    assert statistics.reloads()[("SASL_SSL", ReloadResult.REFUSED)] == 1

    later = soon + datetime.timedelta(days=87)
    write_certificate(tmp_path, later)  # the renewal
    assert asyncio.run(tls.check()) is True
    assert statistics.not_after() == {"SASL_SSL": later.timestamp()}
    assert statistics.reloads() == {("SASL_SSL", ReloadResult.OK): 1, ("SASL_SSL", ReloadResult.REFUSED): 1}


def test_a_context_without_a_certificate_records_no_expiry(tmp_path: Path) -> None:
    statistics = TlsStatistics()
    ReloadingContext(
        "client", lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), (), certfile=None, statistics=statistics
    )
    assert statistics.not_after() == {}
    assert statistics.reloads() == {}


def test_the_console_exports_seconds_until_not_after_at_scrape_time() -> None:
    statistics = TlsStatistics()
    now = [1_000_000.0]
    statistics.serving("SASL_SSL", 1_000_000.0 + 14 * 86400)
    statistics.serving("SSL", 999_000.0)  # expired
    statistics.reloaded("SSL", ReloadResult.REFUSED)
    metrics = ConsoleMetrics(lambda: 0)
    metrics.registry.register(TlsCollector(statistics, clock=lambda: now[0]))
    samples = exported(metrics)
    expiry = samples["kafkaguard_tls_certificate_expiry_seconds"]
    assert expiry == {(("listener", "SASL_SSL"),): 14 * 86400.0, (("listener", "SSL"),): -1000.0}
    now[0] += 86400  # a day later, no reload: one day less
    assert exported(metrics)["kafkaguard_tls_certificate_expiry_seconds"][(("listener", "SASL_SSL"),)] == 13 * 86400
    reloads = samples["kafkaguard_tls_reloads_total"]
    assert reloads[(("listener", "SSL"), ("result", "refused"))] == 1.0
    assert reloads[(("listener", "SASL_SSL"), ("result", "ok"))] == 0.0


def test_without_tls_statistics_there_is_no_tls_metric() -> None:
    assert "kafkaguard_tls_certificate_expiry_seconds" not in exported(ConsoleMetrics(lambda: 0))
    with_tls = exported(ConsoleMetrics(lambda: 0, tls=TlsStatistics()))
    assert "kafkaguard_tls_certificate_expiry_seconds" not in with_tls  # a family without a sample is not shown
    assert "kafkaguard_tls_reloads_total" not in with_tls

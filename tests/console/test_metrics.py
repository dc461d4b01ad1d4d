"""ConsoleMetrics: the process's login statistics exported as ``kafkaguard_logins_total{listener,mechanism,result}``,
read at scrape time."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kafkaguard.audit.records.logins import LoginStatistics
from kafkaguard.console.metrics import ConsoleMetrics

SASL = "SASL_PLAINTEXT://127.0.0.1:9092"


def logins_total(metrics: ConsoleMetrics) -> dict[tuple[str, str, str], float]:
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    family = families.get("kafkaguard_logins")
    if family is None:
        return {}
    return {
        (s.labels["listener"], s.labels["mechanism"], s.labels["result"]): s.value
        for s in family.samples
        if s.name == "kafkaguard_logins_total"
    }


def test_logins_are_exported_per_listener_mechanism_and_result_as_they_are_at_scrape_time() -> None:
    logins = LoginStatistics()
    metrics = ConsoleMetrics(lambda: 0, logins)
    assert logins_total(metrics) == {}
    logins.record(SASL, "SCRAM-SHA-256", succeeded=False)
    logins.record(SASL, "SCRAM-SHA-512", succeeded=True)
    logins.record("console", "basic", succeeded=True)
    assert logins_total(metrics) == {
        (SASL, "SCRAM-SHA-256", "failed"): 1.0,
        (SASL, "SCRAM-SHA-512", "ok"): 1.0,
        ("console", "basic", "ok"): 1.0,
    }
    logins.record(SASL, "SCRAM-SHA-256", succeeded=False)
    assert logins_total(metrics)[(SASL, "SCRAM-SHA-256", "failed")] == 2.0


def test_without_login_statistics_there_is_no_login_metric() -> None:
    assert logins_total(ConsoleMetrics(lambda: 3)) == {}
    assert b"kafkaguard_acls 3.0" in ConsoleMetrics(lambda: 3).render()

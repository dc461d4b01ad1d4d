"""The shipped Prometheus rules (deploy/prometheus/kafkaguard-rules.yml) pass ``promtool check rules`` and their unit
tests (kafkaguard-rules.test.yml: each alert with series that fire it and series that must not) pass
``promtool test rules``; promtool is Debian's ``prometheus`` package (scripts/setup installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information

pytestmark = pytest.mark.integration

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "kafkaguard-rules.yml"
RULE_TESTS = RULES_DIR / "kafkaguard-rules.test.yml"
#: Every alert the rules file defines; each must be exercised by the unit tests.
ALERTS = {
    "KafkaguardNodeDown",
    "KafkaguardLoginFailureBurst",
    "KafkaguardLoginsThrottled",
    "KafkaguardConnectionsRefused",
    "KafkaguardAuditSinkSpooling",
    "KafkaguardAuditRecordsDropped",
    "KafkaguardUpstreamFailures",
    "KafkaguardUpstreamLoginRefused",
    "KafkaguardPermissiveForLong",
    "KafkaguardShadowAclsForLong",
    "KafkaguardCertificateExpiringSoon",
    "KafkaguardCertificateExpiresInDays",
    "KafkaguardTlsReloadRefused",
}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found is not None, "promtool is missing: run scripts/setup as root (apt-get install prometheus)"
    return found


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *arguments], capture_output=True, text=True, timeout=300, cwd=RULES_DIR)


def test_the_rules_file_is_valid() -> None:
    checked = run("check", "rules", str(RULES))
    assert checked.returncode == 0, f"promtool check rules failed:\n{checked.stdout}\n{checked.stderr}"
    assert "SUCCESS" in checked.stdout


def test_every_alert_fires_and_stays_quiet_as_its_unit_tests_say() -> None:
    tested = run("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, f"promtool test rules failed:\n{tested.stdout}\n{tested.stderr}"
    assert "SUCCESS" in tested.stdout


def test_each_alert_has_a_firing_and_a_quiet_case_and_says_what_to_do() -> None:
    rules = yaml.safe_load(RULES.read_text())
    alerts = {r["alert"]: r for group in rules["groups"] for r in group["rules"] if "alert" in r}
    assert set(alerts) == ALERTS
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert rule["annotations"]["summary"], name
        assert len(rule["annotations"]["description"]) > 100, f"{name}: the description must say what to do"
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        series = len(case["input_series"])
        for evaluation in case.get("alert_rule_test", []):
            name, expected = evaluation["alertname"], evaluation["exp_alerts"]
            if expected:
                fired.add(name)
            # promtool compares the alerts whole: a series of the case that is not among them must not fire
            if len(expected) < series:
                quiet.add(name)
    assert fired == ALERTS, f"never fired in a unit test: {ALERTS - fired}"
    assert quiet == ALERTS, f"no series that must not fire: {ALERTS - quiet}"

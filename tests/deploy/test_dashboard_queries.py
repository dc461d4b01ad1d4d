"""Every query of the Grafana dashboard (deploy/grafana/kafkaguard-dashboard.json), evaluated by a real Prometheus
scraping a real ``kafkaguard proxy`` process, and the shipped rules loaded into that Prometheus, all healthy.

The proxy runs as ``kafkaguard proxy --config`` in front of the fake upstream broker (``tests.proxy.fake_kafka``:
the proxy's start needs a cluster's ApiVersions, Metadata and DescribeConfigs answers; no Kafka tarball), with a
SASL_PLAINTEXT, a PLAINTEXT and a SASL_SSL listener (a certificate valid 2 days), its console on loopback, the audit
trail to a file and to a Kafka sink whose cluster is down (so records spool). Prometheus (Debian's, started here on a
free loopback port with its data in tmp_path) scrapes the console's /metrics every second and evaluates
deploy/prometheus/kafkaguard-rules.yml every second. Traffic: failed SCRAM logins (the third one throttled by a
failed-login budget of 2), a Metadata request denied to User:ANONYMOUS, a refused console login.

Each dashboard target is sent to ``/api/v1/query`` with Grafana's variables given values ($job, $instance,
$__rate_interval): it must be a valid query, and every metric name it names must be one the scrape has (a series in
Prometheus, or for a family that has samples only after a rare event, such as the spool's drops, a family in the
scrape's metadata): a typo in a name fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.kafka.pki import CertificateAuthority
from tests.proxy.fake_kafka import FakeKafka, fake_kafka
from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "kafkaguard-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "kafkaguard-rules.yml"
TIMEOUT = 60.0
#: The values Grafana would give the dashboard's variables here.
VARIABLES = {"$__rate_interval": "15s", "$job": "kafkaguard", "$instance": ".*"}
#: Families whose samples appear only after an event this test does not cause (the spool must overflow): their names
#: are checked against the scrape's metadata (HELP/TYPE lines) instead of its series.
EVENT_ONLY = {"kafkaguard_audit_spool_dropped_records_total"}
TOPIC_AUTHORIZATION_FAILED = 29


@dataclass(frozen=True)
class Node:
    console: str  # http://127.0.0.1:port
    sasl: int
    plaintext: int
    log: Path


@dataclass(frozen=True)
class Prometheus:
    url: str
    log: Path

    def get(self, path: str, **parameters: str) -> Any:
        query = f"?{urllib.parse.urlencode(parameters)}" if parameters else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as answer:  # noqa: S310 - loopback
                return json.load(answer)
        except urllib.error.HTTPError as e:  # a bad query is answered 400 with the error in the body
            with e:
                return json.load(e)

    def query(self, expr: str) -> Any:
        return self.get("/api/v1/query", query=expr)


def wait_for(condition: Callable[[], bool], what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            tail = "" if log is None else log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"not within {TIMEOUT:g} s: {what}\n{tail}")
        time.sleep(0.2)  # polling, bounded by the deadline


#: Each proxy listener claims its port and the next 1000 (one per upstream node id): listeners this far apart.
_CLAIM = 1001


def _free(port: int) -> bool:
    """Free for the proxy, which binds with SO_REUSEADDR (a port whose connections are only in TIME_WAIT, of which
    this machine's other tests leave many, is free for it)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def proxy_ports(count: int) -> list[int]:
    """``count`` listener ports ``_CLAIM`` apart, each P with P + 2 free (the fake broker is node 1, served at
    P + 1 + 1, ``proxy.nodes.node_port``)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        ports = [base + n * _CLAIM for n in range(count)]
        if ports[-1] + _CLAIM <= 65535 and all(_free(p) and _free(p + 2) for p in ports):
            return ports
    raise AssertionError(f"no {count} free proxy listener ports on 127.0.0.1")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    ca = CertificateAuthority.create("dashboard CA")
    certfile, keyfile = ca.issue("CN=kafkaguard", hosts=("127.0.0.1", "localhost")).write(tmp_path / "tls", "server")
    (sasl, plaintext, tls), http = proxy_ports(3), free_port()
    settings: dict[str, Any] = {
        "listeners": [
            f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
            f"PLAINTEXT://127.0.0.1:{plaintext}",
            f"SASL_SSL://127.0.0.1:{tls}",
        ],
        "ssl_certfile": str(certfile),
        "ssl_keyfile": str(keyfile),
        "data_dir": str(tmp_path / "data"),
        "http_listener": f"127.0.0.1:{http}",
        "admin_user": "admin",
        "admin_password": "admin-secret",
        "super_users": "User:admin",
        "audit_log": str(tmp_path / "audit.log"),
        "audit_mode": "all",
        "audit_kafka_bootstrap_servers": f"127.0.0.1:{closed_port()}",  # down: the records spool
        "audit_kafka_delivery_timeout_seconds": 1,
        "auth_failure_delay_ms": 5,
        "login_failures_per_address_burst": 2,
        "log_level": "INFO",
    }
    with fake_kafka(FakeKafka()) as broker:
        settings |= {"upstream": broker.address, "upstream_security_protocol": "PLAINTEXT"}
        config = tmp_path / "kafkaguard.json"
        config.write_text(json.dumps(settings))
        env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
        log = tmp_path / "proxy.log"
        with log.open("wb") as out:
            process = subprocess.Popen([str(KAFKAGUARD), "proxy", "--config", str(config)],
                                       stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
        try:
            wait_until_listening(process, http, timeout=TIMEOUT)
            yield Node(f"http://127.0.0.1:{http}", sasl, plaintext, log)
        finally:
            process.terminate()
            process.wait(30)
        text = log.read_text(errors="replace")
        assert "Traceback" not in text, text[-3000:]


@pytest.fixture
def prometheus(tmp_path: Path, node: Node) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    assert binary is not None, "prometheus is missing: run scripts/setup as root (apt-get install prometheus)"
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {"job_name": "kafkaguard", "static_configs": [{"targets": [node.console.removeprefix("http://")]}]}
                ],
            }
        )
    )
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}",],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        wait_for(lambda: _ready(server), "Prometheus ready", log)
        yield server
    finally:
        process.terminate()
        process.wait(30)


def _ready(prometheus: Prometheus) -> bool:
    try:
        with urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2) as answer:  # noqa: S310 - loopback
            return bool(answer.status == 200)
    except OSError:
        return False


def make_traffic(node: Node) -> None:
    """A refused console login, then two failed SCRAM logins (the address's budget of 2 is then spent: the second is
    throttled), a Metadata request denied."""
    refused = urllib.request.Request(  # noqa: S310 - loopback
        f"{node.console}/api/acls", headers={"Authorization": "Basic YWRtaW46bm8="}
    )
    with pytest.raises(urllib.error.HTTPError) as failed:
        urllib.request.urlopen(refused, timeout=10)  # noqa: S310 - loopback
    failed.value.close()
    assert failed.value.code == 401
    for _ in range(3):
        with Wire(("127.0.0.1", node.sasl), timeout=10) as wire, pytest.raises((AssertionError, OSError)):
            wire.login("admin", "not-the-password")
    with Wire(("127.0.0.1", node.plaintext), timeout=10) as wire:
        request = MetadataRequest(
            topics=(MetadataRequestTopic(name=TopicName("secret"), topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        answer = wire.request(request)
        assert [t.error_code.value for t in answer.topics] == [TOPIC_AUTHORIZATION_FAILED]


def targets() -> list[tuple[str, str]]:
    """(panel title, expression) of every target of every panel, rows' nested panels included."""
    dashboard = json.loads(DASHBOARD.read_text())
    found: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            walk(panel.get("panels", []))
            found.extend((panel["title"], target["expr"]) for target in panel.get("targets", []))

    walk(dashboard["panels"])
    return found


def with_variables(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (what is inside label matchers and by-clauses left out)."""
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    without_clauses = re.sub(r"\b(by|without)\s*\([^)]*\)", "", without_labels)
    return set(re.findall(r"\b(kafkaguard_[a-z0-9_]+|up)\b", without_clauses))


def scraped_names(prometheus: Prometheus) -> set[str]:
    answer = prometheus.get("/api/v1/label/__name__/values")
    assert answer["status"] == "success", answer
    return set(answer["data"])


def metadata_names(prometheus: Prometheus) -> set[str]:
    """Families named in the scrape's HELP/TYPE lines (counters under their ``_total`` sample name too)."""
    answer = prometheus.get("/api/v1/metadata")
    assert answer["status"] == "success", answer
    names = set(answer["data"])
    return names | {f"{name}_total" for name, entries in answer["data"].items() if entries[0]["type"] == "counter"}


def test_every_dashboard_query_is_valid_and_names_scraped_metrics_and_every_rule_is_healthy(
    node: Node, prometheus: Prometheus
) -> None:
    make_traffic(node)
    # scraped: the traffic's counts are in Prometheus (the failed logins, the throttled one, the denied request's
    # audit records on both sinks, the spooled ones) and a rate over them has two samples
    wanted = {
        'kafkaguard_logins_total{result="failed"}': 1,
        "kafkaguard_login_throttled_total": 1,
        'kafkaguard_audit_records_total{sink="file",outcome="sent"}': 1,
        'kafkaguard_audit_records_total{outcome="spooled"}': 1,
        'kafkaguard_console_logins_total{result="failed"}': 1,
    }

    def scraped() -> bool:
        for selector, least in wanted.items():
            result = prometheus.query(f"sum({selector})")["data"]["result"]
            if not result or float(result[0]["value"][1]) < least:
                return False
        rated = prometheus.query('sum(rate(kafkaguard_logins_total{result="failed"}[15s]))')["data"]["result"]
        return bool(rated)

    wait_for(scraped, f"the traffic scraped: {wanted}", prometheus.log)

    names, described = scraped_names(prometheus), metadata_names(prometheus)
    checked = targets()
    assert len(checked) >= 20
    problems: list[str] = []
    for title, expr in checked:
        query = with_variables(expr)
        answer = prometheus.query(query)
        if answer.get("status") != "success":
            problems.append(f"{title}: {query}: {answer.get('error')}")
        for name in sorted(metric_names(query)):
            known = names | described if name in EVENT_ONLY else names
            if name not in known:
                problems.append(f"{title}: {query}: no metric {name} in the scrape")
    assert problems == [], "\n".join(problems)
    # the dashboard covers what it promises
    used = set().union(*(metric_names(expr) for _, expr in checked))
    for family in (
        "kafkaguard_logins_total",
        "kafkaguard_connections_refused_total",
        "kafkaguard_audit_records_total",
        "kafkaguard_upstream_failures_total",
        "kafkaguard_tls_certificate_expiry_seconds",
        "kafkaguard_console_request_duration_seconds_count",
    ):
        assert family in used, family

    # the rules: every one loaded and evaluated without error
    def evaluated() -> bool:
        groups = prometheus.get("/api/v1/rules")["data"]["groups"]
        return bool(groups) and all(rule["health"] != "unknown" for group in groups for rule in group["rules"])

    wait_for(evaluated, "every rule evaluated once", prometheus.log)
    groups = prometheus.get("/api/v1/rules")["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    unhealthy = [(rule["name"], rule["health"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"]
    assert unhealthy == []
    assert len(rules) == 25

    # and they read the metrics by their real names and labels: the 2-day certificate is under 14 and 2 days
    def expiring() -> set[tuple[str, str]]:
        alerts = prometheus.get("/api/v1/alerts")["data"]["alerts"]
        return {(a["labels"]["alertname"], a["labels"].get("listener", "")) for a in alerts}

    wait_for(
        lambda: (
            {
                ("KafkaguardCertificateExpiringSoon", "SASL_SSL"),
                ("KafkaguardCertificateExpiresInDays", "SASL_SSL"),
            }
            <= expiring()
        ),
        "the certificate alerts pending",
        prometheus.log,
    )
    days = prometheus.query("kafkaguard_listener:tls_certificate_expiry_days")["data"]["result"]
    assert [(r["metric"]["listener"], round(float(r["value"][1]))) for r in days] == [("SASL_SSL", 2)]

"""Kerberos, differential against the real Kafka 3.9 broker: one KDC of the test's own (``tests.kerberos``), the
broker's GSSAPI listener (``kerberos_broker.KerberosKafka``), ``kafkaguard serve`` and the proxy (its listener
GSSAPI with the same keytab, its upstream login to that broker by the keytab of ``kafkaguard-proxy@KAFKAGUARD.TEST``),
all with the same ``sasl.kerberos.principal.to.local.rules`` (``tests.kerberos.RULES``, no DEFAULT). For every
principal of ``tests.kerberos.CASES`` (with and without instance, another realm over a cross-realm trust, upper
case, ``/L`` and ``/U``, a non-simple result, unmatched ones), with Kafka's Java AdminClient (``KerberosClientProbe
.java``, JAAS ``Krb5LoginModule`` with a keytab) and with kafka-python: accepted or refused, and the principal each
side derives — read from Kafka's ``kafka-authorizer.log`` and kafkaguard's audit log, each client describing a probe
topic of its own that no ACL covers — must be equal, and equal to what ``CASES`` says.

Where the two differ, and it is not compared: Kafka lets a principal its rules cannot map finish the SASL exchange
and closes the connection at its first request; kafkaguard fails the exchange itself. Either way the client gets no
answer and no principal is logged. confluent-kafka is not among the clients: its wheel has no GSSAPI
(``tests/server/test_gssapi.py`` proves it).
"""

from __future__ import annotations

import subprocess
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.broker import JVM_OPTIONS, java
from tests.kafka.kerberos_broker import KerberosKafka
from tests.kafka.probe_principals import kafka_principals, kafkaguard_principals
from tests.kafka.proxy.conftest import free_port_range, start_proxy
from tests.kerberos import CASES, MAIN, RULES, SERVICE, SERVICE_HOST, SERVICE_PRINCIPAL, Kdc, kerberos_env
from tests.serving import TlsFiles, start_server

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    from kafka import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka.errors import KafkaError as KafkaPythonError  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:(read_text|open_text) is deprecated:DeprecationWarning"),
]

PROBE = Path(__file__).with_name("KerberosClientProbe.java")
PROXY_PRINCIPAL = f"kafkaguard-proxy@{MAIN}"
LOG_WAIT = 5.0


@dataclass
class Target:
    name: str
    bootstrap: str
    principals: Callable[[], dict[str, str]]  # probe topic -> principal, from the target's log


def kerberos_options(kdc: Kdc) -> dict[str, Any]:
    return {
        "sasl_mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"],
        "sasl_kerberos_service_name": SERVICE,
        "sasl_kerberos_keytab": kdc.service_keytab,
        "sasl_kerberos_principal": SERVICE_PRINCIPAL,
        "sasl_kerberos_principal_to_local_rules": list(RULES),
        "advertised_host": SERVICE_HOST,
        "audit_mode": "all",
        "ssl_certfile": None,
        "ssl_keyfile": None,
    }


@pytest.fixture(scope="module")
def targets(kafka_dist: Path, kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Target]]:
    broker = KerberosKafka(kafka_dist, tmp_path_factory.mktemp("kerberos-kafka"), kdc=kdc,
                           extra_super_users=(f"User:{PROXY_PRINCIPAL.partition('@')[0]}",))  # fmt: skip
    broker.start()
    serve = proxy = None
    try:
        with kerberos_env(kdc):
            directory = tmp_path_factory.mktemp("kerberos-serve")
            serve = start_server(directory, TlsFiles(directory / "unused.pem", directory / "unused.key"),
                                 listeners=["SASL_PLAINTEXT://127.0.0.1:0"], **kerberos_options(kdc))  # fmt: skip
            proxy = start_proxy(
                tmp_path_factory.mktemp("kerberos-proxy"),
                broker,
                listeners=[f"SASL_PLAINTEXT://127.0.0.1:{free_port_range()}"],
                upstream=broker.krb_bootstrap,
                upstream_user=None,
                upstream_password=None,
                upstream_sasl_mechanism="GSSAPI",
                upstream_sasl_kerberos_service_name=SERVICE,
                upstream_sasl_kerberos_keytab=kdc.principal(PROXY_PRINCIPAL),
                upstream_sasl_kerberos_principal=PROXY_PRINCIPAL,
                **kerberos_options(kdc),
            )
            yield {
                "kafka": Target("kafka", broker.krb_bootstrap, kafka_principals(broker)),
                "serve": Target("serve", f"{SERVICE_HOST}:{serve.sasl[1]}", kafkaguard_principals(serve)),
                "proxy": Target("proxy", f"{SERVICE_HOST}:{proxy.sasl[1]}", kafkaguard_principals(proxy)),
            }
    finally:
        for handle in (proxy, serve):
            if handle is not None:
                handle.stop()
        broker.stop()
    for handle in (proxy, serve):
        assert handle is not None
        assert handle.errors == [], f"{handle} logged errors: {handle.errors}"


def logged(target: Target, topics: list[str]) -> dict[str, str | None]:
    """Each probe topic -> the principal the target logged for it, or None (refused: nothing logged)."""
    deadline = time.monotonic() + LOG_WAIT
    while True:  # the logs are written asynchronously (kafkaguard's audit writer, log4j)
        seen = target.principals()
        if all(topic in seen for topic in topics) or time.monotonic() > deadline:
            return {topic: seen.get(topic) for topic in topics}
        time.sleep(0.2)


def java_asks(target: Target, kdc: Kdc, home: Path, directory: Path) -> tuple[dict[str, str | None], dict[str, str]]:
    """(principal of each case as the target logged it, how the Java client's describe ended), by Kerberos name."""
    run = uuid.uuid4().hex[:6]
    topics = {principal: f"probe-{target.name}-java-{run}-{index}" for index, (principal, _) in enumerate(CASES)}
    asks = directory / f"asks-{target.name}.tsv"
    asks.write_text("".join(f"{topics[p]}\t{p}\t{kdc.principal(p)}\n" for p, _ in CASES))
    log4j = directory / "client-log4j2.properties"
    log4j.write_text("rootLogger.level = OFF\n")
    done = subprocess.run(
        [java(), *JVM_OPTIONS, f"-Djava.security.krb5.conf={kdc.krb5_conf}", f"-Dlog4j2.configurationFile={log4j}",
         "-cp", str(home / "libs" / "*"), str(PROBE), target.bootstrap, str(asks)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    endings = {}
    for line in done.stdout.splitlines():
        topic, outcome, detail = line.split("\t")
        endings[topic] = f"{outcome} {detail}"
    seen = logged(target, list(topics.values()))
    return {p: seen[topics[p]] for p, _ in CASES}, {p: endings[topics[p]] for p, _ in CASES}


def expected() -> dict[str, str | None]:
    return {principal: None if name is None else f"User:{name}" for principal, name in CASES}


def test_java_clients_get_kafkas_principal_or_kafkas_refusal(
    targets: dict[str, Target], kdc: Kdc, kafka_dist: Path, tmp_path: Path
) -> None:
    results = {name: java_asks(target, kdc, kafka_dist, tmp_path) for name, target in targets.items()}
    kafka, kafka_endings = results["kafka"]
    assert kafka == expected(), kafka_endings  # the cases say what Kafka does
    for name in ("serve", "proxy"):
        principals, endings = results[name]
        assert principals == kafka, endings
        for principal, derived in principals.items():  # answered exactly when logged in
            assert endings[principal].startswith("ANSWERED" if derived else "FAILED"), (name, principal, endings)
    assert len(CASES) >= 15
    assert {None} < set(kafka.values())  # refusals and principals both compared


def kafka_python_asks(target: Target, kdc: Kdc, directory: Path) -> dict[str, str | None]:
    """The principal each case logs in as with kafka-python (its TGT from the case's keytab in a cache of its own;
    one client at a time: kafka-python reads the cache from KRB5CCNAME)."""
    run = uuid.uuid4().hex[:6]
    topics = {principal: f"probe-{target.name}-py-{run}-{index}" for index, (principal, _) in enumerate(CASES)}
    for principal, _ in CASES:
        ccache = kdc.kinit(principal, directory / f"ccache-{target.name}-{uuid.uuid4().hex[:6]}")
        with kerberos_env(kdc, ccache):
            try:
                admin = KafkaAdminClient(bootstrap_servers=target.bootstrap, security_protocol="SASL_PLAINTEXT",
                                         sasl_mechanism="GSSAPI", sasl_kerberos_service_name=SERVICE,
                                         request_timeout_ms=3000, bootstrap_timeout_ms=2500)  # fmt: skip
            except KafkaPythonError:
                continue  # refused (kafkaguard) or its connection closed at once (Kafka): nothing to ask with
            try:
                admin.describe_topics([topics[principal]])
            except KafkaPythonError:
                pass  # Kafka closes the connection of a principal its rules cannot map at the first request
            finally:
                admin.close()
    seen = logged(target, list(topics.values()))
    return {p: seen[topics[p]] for p, _ in CASES}


def test_kafka_python_gets_kafkas_principal_or_kafkas_refusal(
    targets: dict[str, Target], kdc: Kdc, tmp_path: Path
) -> None:
    with kerberos_env(kdc):
        kafka = kafka_python_asks(targets["kafka"], kdc, tmp_path)
        assert kafka == expected()
        for name in ("serve", "proxy"):
            assert kafka_python_asks(targets[name], kdc, tmp_path) == kafka, name

"""Logins per second (issue 26): every login mechanism, against ``kafkaguard serve``, ``kafkaguard proxy`` and a real
Kafka 3.9 broker configured with the same mechanisms, measured in the same run on the same machine.

Run: ``scripts/bench logins`` (or ``.venv/bin/python -m benchmarks.bench_logins [--quick] [--no-write]``). Needs Java
17+ and a Kafka distribution (``KAFKA_TGZ`` / ``KAFKA_HOME``, as for ``bench_proxy``). ``--workers-phase`` (issue 39)
runs instead a phase of its own: a proxy-bound workload on ``kafkaguard proxy --workers 1`` and ``--workers 2`` in the
same rounds (``benchmarks.workers_phase``), written to the ``workers-issue-39`` section.

Each login is a fresh TCP connection from one of 50 concurrent clients: connect (+ TLS handshake), ApiVersions, the
SASL exchange (SaslHandshake v1 + SaslAuthenticate v2), close. Mechanisms:

* SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_PLAINTEXT (our client caches the salted password, ``bench_server``'s
  ``CachedScramClient``: four HMACs a login on the client side);
* OAUTHBEARER over SASL_PLAINTEXT with an RS256 token and with an ES256 token, and RS256 over SASL_SSL (tokens
  signed once before the run, valid for hours; audience and issuer checked by every server);
* PLAIN over SASL_SSL (kafkaguard checks the password against the stored SCRAM keys; Kafka against the
  ``user_bench`` entry of its JAAS line);
* mTLS: an SSL listener with the client certificate required; the login is the TLS handshake with the certificate,
  then one ApiVersions;
* GSSAPI (Kerberos) over SASL_PLAINTEXT: a KDC of the run's own (``tests/kerberos.py``: MIT Kerberos on loopback),
  every server accepting tickets for ``kafka/localhost`` with the same keytab (Kafka: JAAS ``Krb5LoginModule``);
  the client's TGT and its service ticket got once before the run (a client reuses them for hours), so each login
  is one AP-REQ (a fresh authenticator), the AP-REP, and the security-layer messages: three SaslAuthenticate.

Baselines, per target and measured in the same rounds: connect + ApiVersions + close on the SASL_PLAINTEXT listener,
and connect + TLS handshake (server certificate only) + ApiVersions + close on the SASL_SSL listener. The difference
between a login and its baseline is the login's own cost.

Targets, all running for the whole run (each on its own listeners):

* *serve*: ``kafkaguard serve`` with a SASL_PLAINTEXT, a SASL_SSL and an SSL (``ssl_client_auth: required``) listener;
* *proxy*: ``kafkaguard proxy`` with the same listeners in front of the Kafka broker (upstream SASL_PLAINTEXT,
  SCRAM-SHA-512 as ``admin``). The proxy decides logins itself; the run checks that no connection to the broker is
  opened while logins run through it (new sockets towards the broker's port in ``/proc/net/tcp``), and reports
  the broker's CPU in those windows;
* *Kafka*: the Kafka 3.9 test broker (``tests/kafka/broker.py``) with SCRAM-SHA-256/512, OAUTHBEARER (and PLAIN,
  for the passthrough target's logins) on its SASL_PLAINTEXT listener, OAUTHBEARER and PLAIN on a SASL_SSL listener,
  and an SSL listener with ``ssl.client.auth=required``; same certificates, same CA, same JWKS file, Kafka's own JVM
  defaults (G1, C2) rather than the test fixture's C1-only flags;
* *passthrough* (issue 38): ``kafkaguard proxy`` with ``upstream_authentication: passthrough`` in front of the same
  broker, a SASL_PLAINTEXT and a SASL_SSL listener (no SSL one: a certificate cannot pass through), measured for
  the logins it passes through (SCRAM-SHA-256/512, PLAIN) and their baselines only. Each login goes to the broker on
  the client connection's own upstream connection (connect, ApiVersions, the relayed exchange): the broker does the
  login's work, on the same core as the proxy, and the result stands next to Kafka's of the same rounds.

All servers are pinned to one core (the JVM, the serve and proxy processes alike: they inherit this process's
affinity when started); this process, the load generator, to another. TLS on the client: one ``SSLContext`` per
kind made once, no session tickets (``OP_NO_TICKET``) and no session reuse, so every connection is a full
handshake; the client does not verify the server's certificate (to keep the load generator cheap; the servers
verify client certificates). After a warm-up of every (target, scenario), ``--rounds`` rounds; in each, every
scenario is measured on the three targets one after another (their order rotating from round to round) for
``--seconds``. Reported: medians over rounds, server CPU per login (``/proc/<pid>/stat``, the process and its
children), and the latency of a whole connection (p50, p99, pooled over rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gssapi
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from benchmarks.bench_proxy import (
    ProxyProcess,
    cpu_seconds,
    free_listener_ports,
    kafka_distribution,
    kafkaguard_executable,
    prepare_proxy_data_dir,
)
from benchmarks.bench_server import (
    CachedScramClient,
    KafkaConn,
    api_versions_request,
    exchange,
    pct,
    wait_for_quiet,
)
from benchmarks.report import write_section
from kafkaguard.scram import ScramMechanism
from tests.identity.tokens import AUDIENCE, ISSUER, claims, jwks_document, session_keys, sign, write_jwks
from tests.kafka.broker import (
    ADMIN,
    ADMIN_PASSWORD,
    KafkaBroker,
    KafkaNotConfigured,
    OAuthBearerValidation,
    TlsIdentity,
)
from tests.kafka.pki import CertificateAuthority
from tests.kerberos import MAIN, SERVICE, SERVICE_HOST, SERVICE_PRINCIPAL, Kdc, start_kdc

HOST = "127.0.0.1"
USER, PASSWORD = "bench", "bench-password"
ITERATIONS = 4096
CLIENT_SUBJECT = "CN=bench-client,O=kafkaguard"
#: Kafka's own JVM settings (kafka-run-class.sh / kafka-server-start.sh), not the test fixture's C1-only ones.
KAFKA_JVM_OPTIONS = ["-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     "-Djava.awt.headless=true"]  # fmt: skip
#: The targets of the main table; ``passthrough`` runs only the scenarios that pass through (``Scenario.passes``).
MAIN_TARGETS = ("serve", "proxy", "kafka")
TARGETS = (*MAIN_TARGETS, "passthrough")
TARGET_NAMES = {"serve": "`kafkaguard serve`", "proxy": "`kafkaguard proxy`", "kafka": "Kafka 3.9",
                "passthrough": "`kafkaguard proxy`, passthrough"}  # fmt: skip
#: The mechanisms the passthrough target passes through.
PASSED = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]

# ------------------------------------------------------------------------------------------------ the material


@dataclass(frozen=True)
class Material:
    """Certificates, the JWKS file and the pre-signed tokens, shared by the three targets and the client."""

    directory: Path
    ca: CertificateAuthority
    ca_file: Path
    server_pem: str
    server_key_pem: str
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    jwks: Path
    tokens: dict[str, str]
    kdc: Kdc

    @classmethod
    def make(cls, directory: Path, kdc: Kdc) -> Material:
        ca = CertificateAuthority.create("kafkaguard bench CA")
        ca_file = ca.write(directory)
        server = ca.issue("CN=bench-server", hosts=(HOST, "localhost"))
        server_cert, server_key = server.write(directory, "server")
        client_cert, client_key = ca.issue(CLIENT_SUBJECT).write(directory, "client")
        keys = session_keys()
        jwks = write_jwks(directory / "jwks.json", jwks_document(keys))
        now = int(time.time())
        valid = claims(now, sub=USER, exp=now + 6 * 3600)
        tokens = {"RS256": sign(valid, keys.rsa_1, "RS256", "rsa-1"), "ES256": sign(valid, keys.ec_1, "ES256", "ec-1")}
        return cls(directory, ca, ca_file, server.certificate_pem, server.key_pem, server_cert, server_key,
                   client_cert, client_key, jwks, tokens, kdc)  # fmt: skip


def client_tls(material: Material, with_certificate: bool) -> ssl.SSLContext:
    """A client context made once: TLS 1.2+, no session tickets, server certificate not verified (see above)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.options |= ssl.OP_NO_TICKET
    if with_certificate:
        context.load_cert_chain(material.client_cert, material.client_key)
    return context


# ------------------------------------------------------------------------------------------------ the targets


@dataclass
class Target:
    """One server under test: its ports by listener kind (``sasl``, ``sasl_ssl``, ``ssl``) and its process."""

    name: str
    pid: int
    ports: dict[str, int]


LISTENER_PROTOCOLS = {"sasl": "SASL_PLAINTEXT", "sasl_ssl": "SASL_SSL", "ssl": "SSL"}


def kafkaguard_config(path: Path, material: Material, data_dir: Path, ports: dict[str, int], **extra: Any) -> Path:
    """A kafkaguard YAML config with the listeners of ``ports`` and every mechanism, as Kafka gets them."""
    config = {
        "data_dir": str(data_dir),
        "listeners": [f"{LISTENER_PROTOCOLS[kind]}://{HOST}:{port}" for kind, port in ports.items()],
        "advertised_host": HOST,
        "super_users": f"User:{ADMIN}",
        "sasl_mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER", "GSSAPI"],
        "sasl_kerberos_service_name": SERVICE,
        "sasl_kerberos_keytab": str(material.kdc.service_keytab),
        "sasl_kerberos_principal": SERVICE_PRINCIPAL,
        "ssl_certfile": str(material.server_cert),
        "ssl_keyfile": str(material.server_key),
        "ssl_cafile": str(material.ca_file),
        "ssl_client_auth": "required",
        "sasl_oauthbearer_jwks_endpoint_url": material.jwks.resolve().as_uri(),
        "sasl_oauthbearer_expected_audience": [AUDIENCE],
        "sasl_oauthbearer_expected_issuer": ISSUER,
        # 50 clients on 127.0.0.1 stand for many: lift the per-address creation rate (100/s by default)
        "max_connection_creation_rate_per_ip": 1_000_000.0,
        **extra,
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    return path


def start_kafkaguard(
    kind: str, tmp: Path, material: Material, upstream: str | None = None, *, passthrough: bool = False
) -> tuple[ProxyProcess, dict[str, int]]:
    """``kafkaguard serve`` or ``kafkaguard proxy`` on three fresh listeners (each with its P+2 free for the proxy's
    node port), the bench user's SCRAM credentials in a fresh data directory. ``passthrough``: a proxy passing
    ``PASSED`` through, on the two SASL listeners only."""
    workdir = tmp / ("passthrough" if passthrough else kind)
    workdir.mkdir()
    prepare_proxy_data_dir(workdir / "data")
    kinds = ("sasl", "sasl_ssl") if passthrough else ("sasl", "sasl_ssl", "ssl")
    ports = dict(zip(kinds, free_listener_ports(len(kinds), 2), strict=True))
    extra: dict[str, Any] = {}
    if upstream is not None:
        password_file = workdir / "upstream-password"
        password_file.write_text(ADMIN_PASSWORD)
        password_file.chmod(0o600)
        extra = {"upstream": upstream, "upstream_security_protocol": "SASL_PLAINTEXT",
                 "upstream_sasl_mechanism": "SCRAM-SHA-512", "upstream_user": ADMIN,
                 "upstream_password_file": str(password_file)}  # fmt: skip
    if passthrough:
        extra |= {"upstream_authentication": "passthrough", "sasl_mechanisms": PASSED,
                  "upstream_passthrough_mechanisms": PASSED, "ssl_client_auth": "none"}  # fmt: skip
    config = kafkaguard_config(workdir / "kafkaguard.yaml", material, workdir / "data", ports, **extra)
    command = [kafkaguard_executable(None), kind, "--config", str(config)]
    return ProxyProcess(command, workdir, list(ports.values())), ports


@dataclass
class LoginBroker(KafkaBroker):
    """The test broker with what the login benchmark needs beside its own listeners: OAUTHBEARER on the
    SASL_PLAINTEXT listener, PLAIN (a JAAS ``user_bench`` entry) on the SASL_SSL one (``OAUTH``), GSSAPI on the
    SASL_PLAINTEXT listener (the same keytab as kafkaguard's), and Kafka's JVM defaults. ``MTLS`` is
    ``TlsIdentity``'s SSL listener, client certificates required."""

    kdc: Kdc | None = None

    def _write_config(self) -> Path:
        assert self.kdc is not None
        path = super()._write_config()
        oauth = "org.apache.kafka.common.security.oauthbearer"
        plain = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
        extra = [  # a later key wins in java.util.Properties: these replace the fixture's values of the same keys
            # PLAIN there too: the passthrough target relays its clients' PLAIN logins to this listener
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER,GSSAPI,PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={plain}",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule "
            f'required useKeyTab=true storeKey=true keyTab="{self.kdc.service_keytab}" '
            f'principal="{SERVICE_PRINCIPAL}";',
            f"sasl.kerberos.service.name={SERVICE}",
            f"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class="
            f"{oauth}.OAuthBearerValidatorCallbackHandler",
            f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={oauth}.OAuthBearerLoginModule required;",
            "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER,PLAIN",
            f"listener.name.oauth.plain.sasl.jaas.config={plain}",
            "num.network.threads=3",  # Kafka's defaults (the fixture has 2 each)
            "num.io.threads=8",
        ]
        with path.open("a") as out:
            out.write("\n".join(extra) + "\n")
        return path

    def jvm_options(self) -> list[str]:
        assert self.kdc is not None
        return [*KAFKA_JVM_OPTIONS, f"-Djava.security.krb5.conf={self.kdc.krb5_conf}"]

    def scram_users(self) -> dict[str, str]:
        """The admin and the bench user (kafka-storage's default: 4,096 iterations, as ours)."""
        return {ADMIN: ADMIN_PASSWORD, USER: PASSWORD}


def start_kafka(home: Path, tmp: Path, material: Material) -> LoginBroker:
    identity = TlsIdentity(
        ca_pem=material.ca.certificate_pem,
        server_certificate_pem=material.server_pem,
        server_key_pem=material.server_key_pem,
        oauth=OAuthBearerValidation(material.jwks, expected_audience=(AUDIENCE,), expected_issuer=ISSUER),
    )
    broker = LoginBroker(home, tmp / "kafka", identity=identity, kdc=material.kdc)
    broker.start()
    return broker


def connections_to(port: int) -> set[int]:
    """Local ports of the IPv4 TCP sockets connected to ``port`` (any state but LISTEN; TIME_WAIT included, so a
    connection opened and closed in a window is still seen)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if state != "0A" and int(remote.split(":")[1], 16) == port:
            found.add(int(local.split(":")[1], 16))
    return found


# ------------------------------------------------------------------------------------------------ the logins


def sasl_exchange(mechanism: str, auth_bytes: bytes) -> Generator[Any, Any, None]:
    """SaslHandshake v1 + one SaslAuthenticate v2 (PLAIN, OAUTHBEARER); raises unless both succeed."""
    handshake = yield SaslHandshakeRequest(mechanism=mechanism)
    if handshake.error_code != 0:
        raise RuntimeError(f"SaslHandshake {mechanism} failed: {handshake.error_code!r}")
    done = yield SaslAuthenticateRequest(auth_bytes=auth_bytes)
    if done.error_code != 0:
        raise RuntimeError(f"{mechanism} login failed: {done.error_code!r} {done.error_message}")


def gssapi_exchange(credentials: gssapi.Credentials) -> Generator[Any, Any, None]:
    """SaslHandshake v1 + SASL/GSSAPI in SaslAuthenticate v2 as Java's GssKrb5Client: the AP-REQ, the empty token
    after the AP-REP, the answer choosing no security layer; raises unless the login succeeds."""
    handshake = yield SaslHandshakeRequest(mechanism="GSSAPI")
    if handshake.error_code != 0:
        raise RuntimeError(f"SaslHandshake GSSAPI failed: {handshake.error_code!r}")
    target = gssapi.Name(f"{SERVICE}@{SERVICE_HOST}", gssapi.NameType.hostbased_service)
    context = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate")
    token = context.step() or b""
    for _ in range(4):
        answer = yield SaslAuthenticateRequest(auth_bytes=token)
        if answer.error_code != 0:
            raise RuntimeError(f"GSSAPI login failed: {answer.error_code!r} {answer.error_message}")
        challenge = bytes(answer.auth_bytes)
        if not context.complete:
            token = context.step(challenge) or b""
        elif challenge:
            context.unwrap(challenge)
            token = context.wrap(b"\x01\x00\x00\x00", False).message
        else:
            return
    raise RuntimeError("the GSSAPI exchange did not end")


def kerberos_client(kdc: Kdc) -> gssapi.Credentials:
    """The bench user's credentials: its TGT and its ticket for ``kafka/localhost`` got now, in a cache of its own
    (a Kerberos client asks the KDC once, then reuses its service ticket for every connection)."""
    ccache = kdc.kinit(f"{USER}@{MAIN}", kdc.directory / "bench-client.ccache")
    credentials = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{ccache}"})
    target = gssapi.Name(f"{SERVICE}@{SERVICE_HOST}", gssapi.NameType.hostbased_service)
    gssapi.SecurityContext(name=target, creds=credentials, usage="initiate").step()  # the service ticket, cached
    return credentials


Login = Callable[[KafkaConn], Awaitable[None]] | None


@dataclass(frozen=True)
class Scenario:
    name: str
    listener: str  # sasl, sasl_ssl, ssl
    tls: ssl.SSLContext | None
    login: Login
    baseline: str | None = None  # the scenario whose rate is this one's baseline
    #: Log in once, alone, before the load (kafkaguard's PLAIN: the first login of a user fills its password cache;
    #: 50 concurrent first logins would each need a PBKDF2 and most be refused, see ``prime``).
    prime: bool = False
    #: Measured on the passthrough target too (its logins pass through, or it is their baseline).
    passes: bool = False


def scenarios(material: Material) -> list[Scenario]:
    scram = CachedScramClient()
    server_only, with_cert = client_tls(material, False), client_tls(material, True)

    def scram_login(mechanism: ScramMechanism) -> Login:
        return lambda conn: scram.login(conn, mechanism, USER, PASSWORD)

    def single(mechanism: str, auth_bytes: bytes) -> Login:
        return lambda conn: exchange(conn, sasl_exchange(mechanism, auth_bytes))

    kerberos = kerberos_client(material.kdc)

    def gssapi_login(conn: KafkaConn) -> Awaitable[None]:
        return exchange(conn, gssapi_exchange(kerberos))

    def bearer(alg: str) -> bytes:
        return f"n,,\x01auth=Bearer {material.tokens[alg]}\x01\x01".encode()

    tcp, tls = "baseline: connect + ApiVersions", "baseline: connect + TLS + ApiVersions"
    return [
        Scenario(tcp, "sasl", None, None, passes=True),
        Scenario(
            "SCRAM-SHA-256 (SASL_PLAINTEXT)", "sasl", None, scram_login(ScramMechanism.SCRAM_SHA_256), tcp, passes=True
        ),
        Scenario(
            "SCRAM-SHA-512 (SASL_PLAINTEXT)", "sasl", None, scram_login(ScramMechanism.SCRAM_SHA_512), tcp, passes=True
        ),
        Scenario("OAUTHBEARER RS256 (SASL_PLAINTEXT)", "sasl", None, single("OAUTHBEARER", bearer("RS256")), tcp),
        Scenario("OAUTHBEARER ES256 (SASL_PLAINTEXT)", "sasl", None, single("OAUTHBEARER", bearer("ES256")), tcp),
        Scenario(tls, "sasl_ssl", server_only, None, passes=True),
        Scenario(
            "PLAIN (SASL_SSL)",
            "sasl_ssl",
            server_only,
            single("PLAIN", f"\0{USER}\0{PASSWORD}".encode()),
            tls,
            prime=True,
            passes=True,
        ),
        Scenario("OAUTHBEARER RS256 (SASL_SSL)", "sasl_ssl", server_only, single("OAUTHBEARER", bearer("RS256")), tls),
        Scenario("mTLS: TLS with client certificate + ApiVersions (SSL)", "ssl", with_cert, None, tls),
        Scenario("GSSAPI (SASL_PLAINTEXT)", "sasl", None, gssapi_login, tcp),
    ]


@dataclass
class Measurement:
    target: str
    scenario: str
    round: int
    count: int
    seconds: float
    latencies_ms: list[float]
    server_cpu_s: float
    client_cpu_s: float
    broker_cpu_s: float = float("nan")  # the proxy's upstream broker, in proxy windows
    upstream_connections: int = -1  # new sockets towards the broker in proxy windows
    tls: str = ""
    failures: int = 0
    first_failure: str = ""

    @property
    def rate(self) -> float:
        return self.count / self.seconds


async def connect(port: int, tls: ssl.SSLContext | None) -> KafkaConn:
    _transport, conn = await asyncio.get_running_loop().create_connection(
        KafkaConn, HOST, port, ssl=tls, server_hostname=HOST if tls is not None else None
    )
    return conn


@dataclass
class Driven:
    count: int
    latencies: list[float]
    tls: str
    failures: list[BaseException]


async def prime(port: int, scenario: Scenario, timeout: float = 30.0) -> None:
    """One login alone, retried (a refused one costs the address one of its failed logins, regained over time)
    until it succeeds."""
    deadline = time.perf_counter() + timeout
    while True:
        driven = await drive(port, scenario, 1, 0.0)
        if not driven.failures:
            return
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{scenario.name} on port {port}: no login within {timeout:g} s: {driven.failures[0]!r}")
        await asyncio.sleep(1.0)


async def drive(port: int, scenario: Scenario, concurrency: int, seconds: float) -> Driven:
    """``concurrency`` workers opening connections for ``seconds`` (each at least one): the logins completed, their
    latencies, the TLS version and cipher seen, and the failed logins (not counted, not in the latencies)."""
    latencies: list[float] = []
    failures: list[BaseException] = []
    tls_seen = ""
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal tls_seen
        first = True
        while first or time.perf_counter() < stop_at:
            first = False
            t0 = time.perf_counter()
            conn = await connect(port, scenario.tls)
            try:
                versions = await conn.request(api_versions_request())
                if versions.error_code != 0:
                    raise RuntimeError(f"ApiVersions: {versions.error_code!r}")
                if scenario.login is not None:
                    await scenario.login(conn)
                if not tls_seen and scenario.tls is not None and conn.transport is not None:
                    ssl_object = conn.transport.get_extra_info("ssl_object")
                    tls_seen = f"{ssl_object.version()} {ssl_object.cipher()[0]}"
            except (RuntimeError, ConnectionError) as e:  # a refused login: counted, reported with the result
                failures.append(e)
                conn.close()
                await conn.lost
                continue
            conn.close()
            latencies.append(time.perf_counter() - t0)
            await conn.lost

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Driven(len(latencies), latencies, tls_seen, failures)


async def measure(target: Target, scenario: Scenario, round_: int, plan: Plan,
                  broker: KafkaBroker | None) -> Measurement:  # fmt: skip
    port = target.ports[scenario.listener]
    broker_pid = broker.process.pid if broker is not None and broker.process is not None else None
    if scenario.prime:
        await prime(port, scenario)
    await drive(port, scenario, plan.concurrency, plan.warmup)
    upstream_before = connections_to(broker.port) if broker is not None else set()
    server0, client0, broker0 = cpu_seconds(target.pid), time.process_time(), cpu_seconds(broker_pid or 0)
    start = time.perf_counter()
    driven = await drive(port, scenario, plan.concurrency, plan.seconds)
    elapsed = time.perf_counter() - start
    server_cpu, client_cpu = cpu_seconds(target.pid) - server0, time.process_time() - client0
    if driven.count == 0:
        raise RuntimeError(f"{scenario.name} on {target.name}: every login failed: {driven.failures[0]!r}")
    m = Measurement(target.name, scenario.name, round_, driven.count, elapsed, [x * 1000 for x in driven.latencies],
                    server_cpu, client_cpu, tls=driven.tls, failures=len(driven.failures),
                    first_failure=repr(driven.failures[0]) if driven.failures else "")  # fmt: skip
    if broker is not None:
        m.broker_cpu_s = cpu_seconds(broker_pid or 0) - broker0
        m.upstream_connections = len(connections_to(broker.port) - upstream_before)
    return m


# ------------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class Plan:
    quick: bool
    rounds: int
    seconds: float
    warmup: float
    first_warmup: float
    concurrency: int = 50

    @classmethod
    def make(cls, args: argparse.Namespace) -> Plan:
        if args.quick:
            return cls(True, args.rounds or 1, args.seconds or 1.0, 0.3, 1.0)
        return cls(False, args.rounds or 3, args.seconds or 4.0, 0.5, 3.0)


@dataclass
class Outcome:
    plan: Plan
    affinity: str
    scenarios: list[str]
    baselines: dict[str, str | None]
    runs: list[Measurement] = field(default_factory=list)
    quiet: list[float] = field(default_factory=list)

    def of(self, target: str, scenario: str) -> list[Measurement]:
        return [m for m in self.runs if m.target == target and m.scenario == scenario]


def measured_on(scenario: Scenario, targets: Sequence[str]) -> list[str]:
    """The targets of ``targets`` that measure ``scenario`` (the passthrough target only what passes through)."""
    return [name for name in targets if name != "passthrough" or scenario.passes]


async def run(plan: Plan, targets: dict[str, Target], material: Material, broker: KafkaBroker,
              affinity: str, only: Sequence[str] | None = None) -> Outcome:  # fmt: skip
    cases = scenarios(material)
    if only:  # the scenarios named, and their baselines
        chosen = {s.name for s in cases if any(part in s.name for part in only)}
        chosen |= {s.baseline for s in cases if s.name in chosen and s.baseline is not None}
        cases = [s for s in cases if s.name in chosen]
    outcome = Outcome(plan, affinity, [s.name for s in cases], {s.name: s.baseline for s in cases})
    _say("warm-up: every scenario on every target")
    for scenario in cases:
        for target in (targets[name] for name in measured_on(scenario, list(targets))):
            if scenario.prime:
                await prime(target.ports[scenario.listener], scenario)
            await drive(target.ports[scenario.listener], scenario, plan.concurrency, plan.first_warmup)
    for round_ in range(plan.rounds):
        outcome.quiet.append(wait_for_quiet(2.0 if plan.quick else 20.0))
        _say(f"round {round_ + 1}/{plan.rounds} (other load {outcome.quiet[-1]:.2f} cores)")
        shift = round_ % len(TARGETS)
        order = [name for name in TARGETS[shift:] + TARGETS[:shift] if name in targets]
        for scenario in cases:
            for name in measured_on(scenario, order):
                upstream = broker if name in ("proxy", "passthrough") else None
                m = await measure(targets[name], scenario, round_, plan, upstream)
                outcome.runs.append(m)
                extra = (f", broker CPU {m.broker_cpu_s / m.seconds:.0%}, {m.upstream_connections} new upstream "
                         "connections") if upstream is not None else ""  # fmt: skip
                if m.failures:
                    extra += f", {m.failures} FAILED logins, first: {m.first_failure}"
                _say(f"  {scenario.name} / {name}: {m.rate:,.0f}/s, server CPU "
                     f"{1000 * m.server_cpu_s / max(m.count, 1):.3f} ms/login, client CPU "
                     f"{m.client_cpu_s / m.seconds:.0%}{extra}")  # fmt: skip
    return outcome


def _say(text: str) -> None:
    print(f"[bench_logins {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the report


def _median(values: Sequence[float]) -> float:
    clean = [v for v in values if v == v]
    return statistics.median(clean) if clean else float("nan")


def render(o: Outcome) -> str:
    plan = o.plan
    rate = {(t, s): _median([m.rate for m in o.of(t, s)]) for t in TARGETS for s in o.scenarios}
    cpu_ms = {
        (t, s): _median([1000 * m.server_cpu_s / max(m.count, 1) for m in o.of(t, s)])
        for t in TARGETS
        for s in o.scenarios
    }

    def own_cost(t: str, s: str) -> str:
        base = o.baselines[s]
        if base is None:
            return "–"
        return f"{1000 * (1 / rate[t, s] - 1 / rate[t, base]):.2f}"

    rows = []
    for s in o.scenarios:
        r = [rate[t, s] for t in MAIN_TARGETS]
        verdict = "" if o.baselines[s] is None else (
            "**met**" if min(r[0], r[1]) >= r[2] else "**not met**"
        )  # fmt: skip
        rows.append(
            f"| {s} | {r[0]:,.0f} | {r[1]:,.0f} | {r[2]:,.0f} | {r[0] / r[2]:.0%} | {r[1] / r[2]:.0%} | "
            + " / ".join(own_cost(t, s) for t in MAIN_TARGETS)
            + " | "
            + " / ".join(f"{cpu_ms[t, s]:.3f}" for t in MAIN_TARGETS)
            + f" | {verdict} |"
        )
    lat_rows = []
    for s in o.scenarios:
        cells = []
        for t in MAIN_TARGETS:
            cells.append(latency_cell(o, t, s))
        client = _median([m.client_cpu_s / m.seconds for t in MAIN_TARGETS for m in o.of(t, s)])
        proxy = o.of("proxy", s)
        broker_cpu = _median([m.broker_cpu_s / m.seconds for m in proxy])
        upstream = sum(m.upstream_connections for m in proxy)
        failed = " / ".join(str(sum(m.failures for m in o.of(t, s))) for t in MAIN_TARGETS)
        lat_rows.append(f"| {s} | {' | '.join(cells)} | {client:.0%} | {broker_cpu:.1%} | {upstream} | {failed} |")
    tls = sorted({f"{m.target}: {m.tls}" for m in o.runs if m.tls})
    return "\n".join(
        [
            "## Logins per second, every mechanism (`benchmarks/bench_logins.py`, issue 26)",
            "",
            "Run: `scripts/bench logins` (`.venv/bin/python -m benchmarks.bench_logins [--rounds N] [--seconds S]`).",
            "",
            f"{plan.concurrency} concurrent clients, each login a fresh TCP connection: connect (+ TLS), ApiVersions, "
            "SaslHandshake v1 + SaslAuthenticate v2 (SCRAM: two; PLAIN and OAUTHBEARER: one), close; mTLS: the TLS "
            "handshake with a client certificate (EC P-256, same CA everywhere) and one ApiVersions. Targets: "
            "`kafkaguard serve`; `kafkaguard proxy` in front of the Kafka broker (it decides logins itself: "
            "new connections to the broker during its windows are counted below); a Kafka 3.9 broker (KRaft, one "
            "node, `tests/kafka/broker.py` plus OAUTHBEARER on SASL_PLAINTEXT and PLAIN via JAAS `user_bench` on "
            "SASL_SSL, `OAuthBearerValidatorCallbackHandler` on the same JWKS file, `ssl.client.auth=required` on "
            "SSL; Kafka's JVM defaults: G1, C2, 1 GiB heap). Users: SCRAM credentials at 4,096 iterations. Tokens "
            "(`sub`, `aud`, `iss`, `exp` checked) signed once before the run by an RSA-2048 (RS256) or P-256 (ES256) "
            "key of a three-key JWKS. Client: one asyncio process, salted SCRAM passwords cached, TLS contexts made "
            "once with `OP_NO_TICKET` and no session reuse (every connection a full handshake), server certificate "
            f"not verified by the client. {o.affinity}. Each measurement {plan.seconds:g} s after {plan.warmup:g} s "
            f"of warm-up (and {plan.first_warmup:g} s per scenario and target before the first round); "
            f"{plan.rounds} rounds, in each every scenario on the three targets back to back, their order rotating; "
            "medians over rounds. TLS negotiated: " + "; ".join(tls) + ".",
            "",
            "Login's own cost: 1/rate(login) − 1/rate(its baseline), in ms of the server's single core per login "
            "(their time per connection only where the server, not the load generator, is the bottleneck: where the "
            "generator's CPU in the second table is near 100%, a rate is a floor and the server-CPU column is the "
            "fairer comparison). Server CPU: user + system of "
            "the server's process (`/proc/<pid>/stat`, 10 ms ticks) per login, including the baseline's work. "
            "Target (issue 26): kafkaguard ≥ Kafka's rate for every mechanism.",
            "",
            "| scenario | serve /s | proxy /s | Kafka /s | serve ÷ Kafka | proxy ÷ Kafka "
            "| login's own cost, ms: serve / proxy / Kafka | server CPU ms per login: serve / proxy / Kafka | target |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
            "Latency of a whole connection (connect to the end of the last response), p50 / p99 in ms over all "
            "rounds; the load generator's CPU (share of its core, median over all targets' windows); through the "
            "proxy: the upstream broker's CPU (share of a core) and the new connections towards it; logins refused "
            "during the timed windows (not counted in the rates).",
            "",
            "| scenario | serve p50 / p99 | proxy p50 / p99 | Kafka p50 / p99 | generator CPU | broker CPU in proxy "
            "windows | new upstream connections | failed logins: serve / proxy / Kafka |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *lat_rows,
            "",
            *render_passthrough(o, rate, cpu_ms),
            "",
            "Other load on the machine before each round: " + ", ".join(f"{x:.2f}" for x in o.quiet) + " cores.",
        ]
    )


def latency_cell(o: Outcome, target: str, scenario: str) -> str:
    pooled = sorted(x for m in o.of(target, scenario) for x in m.latencies_ms)
    return f"{pct(pooled, 0.5):.1f} / {pct(pooled, 0.99):.1f}" if pooled else "–"


def render_passthrough(
    o: Outcome, rate: dict[tuple[str, str], float], cpu_ms: dict[tuple[str, str], float]
) -> list[str]:
    """The passthrough target's table (issue 38), each login next to Kafka's of the same rounds; none without it."""
    passed = [s for s in o.scenarios if o.of("passthrough", s)]
    if not passed:
        return []
    rows = []
    for s in passed:
        through, kafka, proxy = rate["passthrough", s], rate["kafka", s], rate["proxy", s]
        runs = o.of("passthrough", s)
        broker_cpu = _median([m.broker_cpu_s / m.seconds for m in runs])
        upstream = sum(m.upstream_connections for m in runs)
        verdict = "" if o.baselines[s] is None else ("**met**" if through >= 0.9 * kafka else "**not met**")
        rows.append(
            f"| {s} | {through:,.0f} | {kafka:,.0f} | {through / kafka:.0%} | {proxy:,.0f} | "
            f"{cpu_ms['passthrough', s]:.3f} / {cpu_ms['kafka', s]:.3f} | {broker_cpu:.0%} | {upstream:,} "
            f"| {latency_cell(o, 'passthrough', s)}; {latency_cell(o, 'kafka', s)} | "
            f"{sum(m.failures for m in runs)} | {verdict} |"
        )
    return [
        "",
        "### Logins passed through (issue 38)",
        "",
        "`kafkaguard proxy` with `upstream_authentication: passthrough` (SCRAM-SHA-256/512 and PLAIN relayed to the "
        "broker's SASL_PLAINTEXT listener, which decides them; the service account only for the proxy's own "
        "requests), measured in the same rounds as the other targets, next to Kafka's rate for the same login "
        "straight to the broker, and the service-account proxy's (which checks the login itself). Each login through "
        "it opens an upstream connection of its own (ApiVersions, then the relayed exchange), so the broker does the "
        "login's work as well as the proxy, both on the one server core: the broker's CPU in the passthrough windows "
        "is in the table, and the new sockets towards the broker found at the end of each window (a floor: loopback "
        "ports are reused within a window). Target (issue 38): passthrough ≥ 0.9 × Kafka's rate.",
        "",
        "| scenario | passthrough /s | Kafka /s | passthrough ÷ Kafka | proxy (service account) /s "
        "| server CPU ms per login: passthrough proxy / Kafka | broker CPU in passthrough windows "
        "| upstream sockets seen | p50 / p99 ms: passthrough; Kafka | failed logins | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
    ]


# ------------------------------------------------------------------------------------------------ main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one round of 1 s (a demo, not a result)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3)")
    parser.add_argument("--seconds", type=float, help="seconds per measurement (default 4)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument(
        "--workers-phase",
        action="store_true",
        help="only the workers phase (issue 39): proxy --workers 1 against --workers 2 (benchmarks.workers_phase)",
    )
    parser.add_argument(
        "--only", action="append", help="only the scenarios whose name holds this text (and their baselines); again: or"
    )
    args = parser.parse_args(argv)
    plan = Plan.make(args)
    cores = sorted(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="kafkaguard-bench-logins-"))
    broker: LoginBroker | None = None
    kdc: Kdc | None = None
    processes: list[ProxyProcess] = []
    try:
        try:
            home = kafka_distribution(tmp / "dist", None)
        except KafkaNotConfigured as e:
            print(f"bench_logins: no Kafka distribution: {e}", file=sys.stderr)
            return 2
        if args.workers_phase:
            return _workers_phase(plan, home, tmp, no_write=args.no_write)
        kdc = start_kdc(tmp / "kdc")
        os.environ.update(kdc.env())  # the servers started now (and this process's gssapi client) find the KDC
        material = Material.make(tmp / "material", kdc)
        if len(cores) >= 2:
            server_cpu, client_cpu = cores[-1], cores[0]
            os.sched_setaffinity(0, {server_cpu})  # the servers started now inherit it
            affinity = (f"The four servers (the JVM, `serve`, `proxy`, the passthrough `proxy`: all running the whole "
                        f"time, idle when not measured) pinned to CPU {server_cpu}; the load generator to CPU "
                        f"{client_cpu}")  # fmt: skip
        else:
            affinity = "Unpinned: fewer than two usable cores"
        _say("starting the Kafka broker")
        broker = start_kafka(home, tmp, material)
        _say("starting kafkaguard serve and kafkaguard proxy")
        serve, serve_ports = start_kafkaguard("serve", tmp, material)
        processes.append(serve)
        proxy, proxy_ports = start_kafkaguard("proxy", tmp, material, upstream=broker.bootstrap)
        processes.append(proxy)
        _say("starting kafkaguard proxy in passthrough")
        passthrough, passthrough_ports = start_kafkaguard("proxy", tmp, material, upstream=broker.bootstrap,
                                                          passthrough=True)  # fmt: skip
        processes.append(passthrough)
        if len(cores) >= 2:
            os.sched_setaffinity(0, {client_cpu})
        assert broker.process is not None
        targets = {
            "serve": Target("serve", serve.pid, serve_ports),
            "proxy": Target("proxy", proxy.pid, proxy_ports),
            "kafka": Target("kafka", broker.process.pid,
                            {"sasl": broker.port, "sasl_ssl": broker.oauth_port, "ssl": broker.mtls_port}),
            "passthrough": Target("passthrough", passthrough.pid, passthrough_ports),
        }  # fmt: skip
        try:
            outcome = asyncio.run(run(plan, targets, material, broker, affinity, args.only))
        except BaseException:
            for process in processes:
                print(process.output_tail(), file=sys.stderr)
            with contextlib.suppress(OSError):
                print((broker.workdir / "broker.log").read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
    finally:
        for process in processes:
            process.stop()
        if broker is not None:
            broker.stop()
        if kdc is not None:
            kdc.stop()
        os.sched_setaffinity(0, set(cores))
        shutil.rmtree(tmp, ignore_errors=True)
    markdown = render(outcome)
    print(markdown)
    if not (args.no_write or plan.quick or args.only):
        write_section("logins-issue-26", markdown)
    return 0


def _workers_phase(plan: Plan, home: Path, tmp: Path, *, no_write: bool) -> int:
    """``--workers-phase``: its section printed, and written unless ``--quick`` or ``--no-write``."""
    from benchmarks import workers_phase  # it builds on this module: imported here, not at the top

    markdown = workers_phase.main(plan, home, tmp, float(os.cpu_count() or 1))
    print(markdown)
    if not (no_write or plan.quick):
        write_section("workers-issue-39", markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

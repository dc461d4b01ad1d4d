"""A real Apache Kafka for tests, on loopback: one combined-mode broker, or a KRaft cluster of brokers.

Started from the tarball named by ``KAFKA_TGZ`` (unpacked once per test session) or an unpacked ``KAFKA_HOME``,
with its own ``server.properties`` per JVM and free ports.

``KafkaBroker`` runs broker and controller in one JVM: a SASL_PLAINTEXT listener with SCRAM-SHA-256/512, Kafka's KRaft
``StandardAuthorizer``, ``super.users=User:admin``, ``allow.everyone.if.no.acl.found=false``, and
``kafka.authorizer.logger`` at DEBUG into ``kafka-authorizer.log`` (allowed and denied decisions, Kafka's
``[%d] %p %m (%c)%n`` layout). The admin's SCRAM credentials are written at format time, as kafka-storage does. It
serves the KIP-848 consumer group protocol beside the classic one (``CONSUMER_PROTOCOL_PROPERTIES``) at the
production metadata version 3.9-IV0.

``KafkaCluster`` runs one dedicated controller (``process.roles=controller``, node id ``CONTROLLER_ID``) and N brokers
(``process.roles=broker``, node ids 1..N), each in its own JVM, sharing one cluster id: the upstream a proxy sits in
front of. Its client listener is SASL_PLAINTEXT (as above; ``authorizer=False`` leaves ``authorizer.class.name``
out) or PLAINTEXT (never with an authorizer: every client would be ``User:ANONYMOUS``).

``stop`` sends TERM, waits, then kills: a test session never leaves a JVM behind.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ADMIN = "admin"
ADMIN_PASSWORD = "admin-secret"  # noqa: S105 - the test broker's super user
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
STARTED = b"Kafka Server started"  # KafkaRaftServer logs it once a node (broker or controller) is up
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ActiveProcessorCount=2", "-Djava.awt.headless=true"]
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", *JVM_FLAGS]
# A cluster runs 1 + N JVMs on a small machine: smaller heaps (measured RSS: ~125 MB controller, ~270 MB a broker).
CONTROLLER_JVM_OPTIONS = ["-Xms32m", "-Xmx192m", *JVM_FLAGS]
CLUSTER_BROKER_JVM_OPTIONS = ["-Xms64m", "-Xmx320m", *JVM_FLAGS]
CONTROLLER_ID = 1000
LOOPBACK = "127.0.0.1"
Listener = Literal["SASL_PLAINTEXT", "PLAINTEXT"]
ClientConfig = dict[str, str | int | float | bool]  # confluent-kafka's configuration

#: The KIP-848 consumer group protocol beside the classic one. Kafka 3.9 serves ConsumerGroupHeartbeat and
#: ConsumerGroupDescribe (v0) only with ``consumer`` among the coordinator's protocols (``KafkaApis.
#: isConsumerGroupProtocolEnabled``; ``KafkaConfig.isNewGroupCoordinatorEnabled`` then runs the new group
#: coordinator for classic groups too, and the broker logs that KIP-848 is a preview in 3.9). That is all 3.9 needs: no
#: ``group.version`` feature exists (``server.common.Features`` in 3.9 lists only ``kraft.version`` and
#: ``transaction.version``; ``GroupVersion`` exists but is not registered, and 3.9's ``kafka-storage format``
#: ignores ``--feature``, even an unknown one), so there is nothing to finalize. The metadata version stays the
#: production 3.9-IV0: ``unstable.feature.versions.enable`` would make format pick 4.0-IV1 and ``transaction.version=2``
#: (KIP-890 part 2, unstable in 3.9), which changes the transactional APIs the other tests rely on.
CONSUMER_PROTOCOL_PROPERTIES = ["group.coordinator.rebalance.protocols=classic,consumer"]

_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
_PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"
_LAYOUT = "[%d] %p %m (%c)%n"


class KafkaNotConfigured(Exception):
    """Neither KAFKA_TGZ nor KAFKA_HOME names a Kafka distribution."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def kafka_source() -> tuple[str, Path] | None:
    """("tgz", path) or ("home", path) from the environment, or None when neither is set."""
    if os.environ.get("KAFKA_HOME"):
        return "home", Path(os.environ["KAFKA_HOME"])
    if os.environ.get("KAFKA_TGZ"):
        return "tgz", Path(os.environ["KAFKA_TGZ"])
    return None


def kafka_home(unpack_into: Path) -> Path:
    """An unpacked Kafka distribution: KAFKA_HOME as it is, or KAFKA_TGZ unpacked into ``unpack_into``.

    :raises KafkaNotConfigured: neither is set, or the path has no Kafka jars.
    """
    source = kafka_source()
    if source is None:
        raise KafkaNotConfigured("set KAFKA_TGZ to a Kafka tarball or KAFKA_HOME to an unpacked one")
    kind, path = source
    if kind == "tgz":
        if not path.is_file():
            raise KafkaNotConfigured(f"KAFKA_TGZ={path} is not a file")
        with tarfile.open(path) as archive:
            archive.extractall(unpack_into, filter="data")
        homes = [p for p in unpack_into.iterdir() if (p / "libs").is_dir()]
        if len(homes) != 1:
            raise KafkaNotConfigured(f"KAFKA_TGZ={path} does not hold one Kafka distribution")
        path = homes[0]
    if not any((path / "libs").glob("kafka_*.jar")):
        raise KafkaNotConfigured(f"{path} has no libs/kafka_*.jar")
    return path


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise KafkaNotConfigured("java (17+) is not on PATH; scripts/setup installs it")
    return found


def new_cluster_id() -> str:
    """What ``kafka-storage random-uuid`` prints (Kafka's ``Uuid.randomUuid``), without starting a JVM for it."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka's randomUuid avoids these (they read as command-line options)
            return text


def scram_format_args(users: Mapping[str, str]) -> list[str]:
    """``kafka-storage format --add-scram`` arguments: SCRAM-SHA-256 and -512 credentials for each user."""
    return [
        arg
        for user, password in users.items()
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")
    ]


def sasl_client_properties(path: Path, user: str, password: str, mechanism: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={_SCRAM_JAAS} username="{user}" password="{password}";\n'
    )
    return path


def write_properties(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("\n".join([*lines, ""]))
    return path


def write_server_log4j(workdir: Path, authorizer_log: Path) -> Path:
    """log4j2 for a Kafka node: INFO to stdout, the authorizer's decisions at DEBUG into ``authorizer_log``."""
    return write_properties(
        workdir / "log4j2.properties",
        [
            "status = warn",
            "appender.console.type = Console",
            "appender.console.name = STDOUT",
            "appender.console.layout.type = PatternLayout",
            f"appender.console.layout.pattern = {_LAYOUT}",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.stdout.ref = STDOUT",
            "logger.state.name = state.change.logger",
            "logger.state.level = WARN",
            "appender.authz.type = File",
            "appender.authz.name = AUTHZ",
            f"appender.authz.fileName = {authorizer_log}",
            "appender.authz.layout.type = PatternLayout",
            f"appender.authz.layout.pattern = {_LAYOUT}",
            "logger.authorizer.name = kafka.authorizer.logger",
            "logger.authorizer.level = DEBUG",
            "logger.authorizer.additivity = false",
            "logger.authorizer.appenderRef.authz.ref = AUTHZ",
        ],
    )


#: Log4j 2 for a Java client or tool run beside the tests: warnings and errors on stderr, level first.
CLIENT_LOG4J = (
    "status = error",
    "appender.console.type = Console",
    "appender.console.name = STDERR",
    "appender.console.target = SYSTEM_ERR",
    "appender.console.layout.type = PatternLayout",
    "appender.console.layout.pattern = %p %m%n",
    "rootLogger.level = WARN",
    "rootLogger.appenderRef.stderr.ref = STDERR",
)


def write_tools_log4j(workdir: Path) -> Path:
    return write_properties(workdir / "tools-log4j2.properties", CLIENT_LOG4J)


def format_storage(run: Sequence[str], cluster_id: str, properties: Path, *extra: str) -> None:
    """``kafka-storage format`` for one node.

    :raises RuntimeError: with the tool's output when it fails.
    """
    formatted = subprocess.run(
        [*run, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties), *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if formatted.returncode != 0:
        raise RuntimeError(f"kafka-storage format failed: {formatted.stdout[-2000:]}{formatted.stderr[-2000:]}")


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """TERM, wait, then KILL."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def has_started(log: Path, offset: int = 0) -> bool:
    """Whether ``log`` says ``Kafka Server started`` after its first ``offset`` bytes."""
    with log.open("rb") as read:
        read.seek(offset)
        return STARTED in read.read()


def _java_property(value: str) -> str:
    """``value`` as one line of a .properties file (a PEM's newlines escaped; Java's Properties reads them back)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


@dataclass(frozen=True)
class OAuthBearerValidation:
    """How the OAUTH listener (SASL_SSL, OAUTHBEARER) checks tokens: Kafka's ``OAuthBearerValidatorCallbackHandler``
    with the broker-level ``sasl.oauthbearer.*`` settings (Kafka 3.9 reads them from the broker's config only)."""

    jwks_file: Path
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30

    def properties(self, listener: str) -> list[str]:
        name = listener.lower()
        lines = [
            f"listener.name.{name}.sasl.enabled.mechanisms=OAUTHBEARER",
            f"listener.name.{name}.oauthbearer.sasl.server.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            f"listener.name.{name}.oauthbearer.sasl.jaas.config="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            f"sasl.oauthbearer.jwks.endpoint.url={self.jwks_file.resolve().as_uri()}",
            f"sasl.oauthbearer.sub.claim.name={self.sub_claim_name}",
            f"sasl.oauthbearer.scope.claim.name={self.scope_claim_name}",
            f"sasl.oauthbearer.clock.skew.seconds={self.clock_skew_seconds}",
        ]
        if self.expected_audience:
            lines.append(f"sasl.oauthbearer.expected.audience={','.join(self.expected_audience)}")
        if self.expected_issuer is not None:
            lines.append(f"sasl.oauthbearer.expected.issuer={self.expected_issuer}")
        return lines


@dataclass(frozen=True)
class TlsIdentity:
    """Identity listeners for ``KafkaBroker``, beside its SASL_PLAINTEXT one (which stays, with its admin, for ACLs):

    * ``MTLS`` (SSL): ``ssl.client.auth=required``, client certificates checked against ``ca_pem``, the principal
      ``User:`` + the subject mapped by ``principal_mapping_rules`` (Kafka's ``ssl.principal.mapping.rules``);
    * ``OAUTH`` (SASL_SSL, only with ``oauth``): OAUTHBEARER validated against a JWKS file (no client certificate).

    Both present ``server_certificate_pem``/``server_key_pem`` (Kafka 3.9's PEM key and trust stores, no keystore
    files). ``tests/kafka/pki.py`` makes the certificates.
    """

    ca_pem: str
    server_certificate_pem: str
    server_key_pem: str = field(repr=False)
    principal_mapping_rules: str = "DEFAULT"
    oauth: OAuthBearerValidation | None = None

    def properties(self) -> list[str]:
        """The listener-prefixed TLS settings of both listeners and the OAUTH listener's SASL settings."""
        lines = []
        for name, client_auth in (("mtls", "required"), ("oauth", "none")):
            lines += [
                f"listener.name.{name}.ssl.keystore.type=PEM",
                f"listener.name.{name}.ssl.keystore.certificate.chain={_java_property(self.server_certificate_pem)}",
                f"listener.name.{name}.ssl.keystore.key={_java_property(self.server_key_pem)}",
                f"listener.name.{name}.ssl.truststore.type=PEM",
                f"listener.name.{name}.ssl.truststore.certificates={_java_property(self.ca_pem)}",
                f"listener.name.{name}.ssl.client.auth={client_auth}",
                f"listener.name.{name}.ssl.principal.mapping.rules={_java_property(self.principal_mapping_rules)}",
            ]
        if self.oauth is not None:
            lines += self.oauth.properties("OAUTH")
        return lines


@dataclass(frozen=True)
class ServerCertificate:
    """The certificate a SASL_SSL listener of ``KafkaBroker`` presents (no client certificate asked for)."""

    certificate_pem: str
    key_pem: str = field(repr=False)

    def properties(self, listener: str) -> list[str]:
        """The listener-prefixed TLS settings (Kafka 3.9's PEM key store, no keystore file)."""
        name = listener.lower()
        return [
            f"listener.name.{name}.ssl.keystore.type=PEM",
            f"listener.name.{name}.ssl.keystore.certificate.chain={_java_property(self.certificate_pem)}",
            f"listener.name.{name}.ssl.keystore.key={_java_property(self.key_pem)}",
            f"listener.name.{name}.ssl.client.auth=none",
        ]


@dataclass
class KafkaBroker:
    """One running broker. ``bootstrap`` is ``127.0.0.1:port`` (SASL_PLAINTEXT, SCRAM)."""

    home: Path
    workdir: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    #: A second client listener, HOP (SASL_PLAINTEXT; SASL_SSL with ``tls``), on ``hop_port`` but advertised at
    #: ``hop_advertised_port``: a forwarder listening there carries every byte of its clients (benchmarks/
    #: bench_proxy's bare hop).
    hop_port: int | None = None
    hop_advertised_port: int | None = None
    #: Identity listeners (``TlsIdentity``): MTLS on ``mtls_port`` and, with OAuth, OAUTH on ``oauth_port``.
    identity: TlsIdentity | None = None
    mtls_port: int = field(default_factory=free_port)
    oauth_port: int = field(default_factory=free_port)
    #: Super users besides ``User:admin`` (e.g. the principal a client certificate maps to).
    extra_super_users: tuple[str, ...] = ()
    #: PLAIN users (name: password) of the SASL_PLAINTEXT listener, which then enables PLAIN beside SCRAM (Kafka's
    #: PLAIN users live in its JAAS configuration: no API creates them).
    plain_users: dict[str, str] = field(default_factory=dict)
    #: More server.properties lines (e.g. ``connections.max.reauth.ms=…``).
    extra_properties: tuple[str, ...] = ()
    #: A SASL_SSL listener, TLS (SCRAM-SHA-256/512 over TLS, no client certificate), on ``tls_port``, presenting this
    #: certificate; the HOP listener then speaks SASL_SSL too, with the same certificate (a TLS-terminating forwarder
    #: re-originates TLS to it: benchmarks/bench_proxy --tls).
    tls: ServerCertificate | None = None
    tls_port: int = field(default_factory=free_port)

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def authorizer_log(self) -> Path:
        return self.workdir / "kafka-authorizer.log"

    @property
    def tls_bootstrap(self) -> str:
        """``127.0.0.1:port`` of the TLS listener (SASL_SSL, SCRAM; only with ``tls``)."""
        return f"{LOOPBACK}:{self.tls_port}"

    @property
    def mtls_bootstrap(self) -> str:
        """``127.0.0.1:port`` of the MTLS listener (SSL, client certificate required)."""
        return f"{LOOPBACK}:{self.mtls_port}"

    @property
    def oauth_bootstrap(self) -> str:
        """``127.0.0.1:port`` of the OAUTH listener (SASL_SSL, OAUTHBEARER)."""
        return f"{LOOPBACK}:{self.oauth_port}"

    @property
    def classpath(self) -> str:
        return str(self.home / "libs" / "*")

    def java_command(self, main_class: str, *args: str) -> list[str]:
        """A command line running one of Kafka's main classes (AclCommand, ConfigCommand …) from the same jars."""
        log4j = f"-Dlog4j2.configurationFile={self.workdir / 'tools-log4j2.properties'}"
        return [java(), *JVM_OPTIONS, log4j, "-cp", self.classpath, main_class, *args]

    def client_properties(self, path: Path, user: str = ADMIN, password: str = ADMIN_PASSWORD,
                          mechanism: str = "SCRAM-SHA-512") -> Path:  # fmt: skip
        """A --command-config file for Kafka's tools (and kafkaguard's CLI)."""
        return sasl_client_properties(path, user, password, mechanism)

    def client_config(self, user: str = ADMIN, password: str = ADMIN_PASSWORD,
                      mechanism: str = "SCRAM-SHA-512") -> ClientConfig:  # fmt: skip
        """confluent-kafka (librdkafka) settings reaching the broker's SASL_PLAINTEXT listener as ``user``."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password}  # fmt: skip

    def start(self) -> None:
        """Write the configuration, format the storage with the admin's SCRAM credentials, start, wait for ready.

        :raises RuntimeError: formatting failed or the broker did not start in time (with its log's tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        properties = self._write_config()
        run = [java(), *self.jvm_options(), f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
               "-cp", self.classpath]  # fmt: skip
        format_storage(run, new_cluster_id(), properties, *scram_format_args(self.scram_users()))
        log_path = self.workdir / "broker.log"
        with log_path.open("wb") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [*run, "kafka.Kafka", str(properties)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if has_started(log_path):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.2)  # polling the broker's log for readiness, bounded by the deadline
        tail = log_path.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"the Kafka broker did not start within {START_TIMEOUT:g} s:\n{tail}")

    def jvm_options(self) -> list[str]:
        """The JVM's options (a subclass may run Kafka's own defaults instead of the fixture's small heap)."""
        return JVM_OPTIONS

    def scram_users(self) -> dict[str, str]:
        """The SCRAM users (name: password) written at format time, as kafka-storage does."""
        return {ADMIN: ADMIN_PASSWORD}

    def stop(self) -> None:
        stop_process(self.process)

    def _write_config(self) -> Path:
        jaas = f'{_SCRAM_JAAS} username="{ADMIN}" password="{ADMIN_PASSWORD}";'
        plain = f'{_PLAIN_JAAS} username="{ADMIN}" password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}";'
        listeners = f"SASL_PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{self.controller_port}"
        advertised = f"SASL_PLAINTEXT://{LOOPBACK}:{self.port}"
        hop: list[str] = []
        if self.hop_port is not None and self.hop_advertised_port is not None:
            listeners += f",HOP://{LOOPBACK}:{self.hop_port}"
            advertised += f",HOP://{LOOPBACK}:{self.hop_advertised_port}"
            hop = [f"listener.name.hop.scram-sha-{bits}.sasl.jaas.config={jaas}" for bits in (256, 512)]
            if self.tls is not None:
                hop += self.tls.properties("HOP")
        if self.tls is not None:
            listeners += f",TLS://{LOOPBACK}:{self.tls_port}"
            advertised += f",TLS://{LOOPBACK}:{self.tls_port}"
            hop += [f"listener.name.tls.scram-sha-{bits}.sasl.jaas.config={jaas}" for bits in (256, 512)]
            hop += self.tls.properties("TLS")
        hop_protocol = "SASL_SSL" if self.tls is not None else "SASL_PLAINTEXT"
        identity: list[str] = []
        mechanisms = "SCRAM-SHA-256,SCRAM-SHA-512"
        if self.plain_users:
            mechanisms += ",PLAIN"
            users = " ".join(f'user_{name}="{password}"' for name, password in self.plain_users.items())
            identity.append(f'listener.name.sasl_plaintext.plain.sasl.jaas.config={_PLAIN_JAAS} username="{ADMIN}" '
                            f'password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}" {users};')  # fmt: skip
        if self.identity is not None:
            listeners += f",MTLS://{LOOPBACK}:{self.mtls_port}"
            advertised += f",MTLS://{LOOPBACK}:{self.mtls_port}"
            if self.identity.oauth is not None:
                listeners += f",OAUTH://{LOOPBACK}:{self.oauth_port}"
                advertised += f",OAUTH://{LOOPBACK}:{self.oauth_port}"
            identity += self.identity.properties()
        properties = write_properties(
            self.workdir / "server.properties",
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@{LOOPBACK}:{self.controller_port}",
                f"listeners={listeners}",
                f"advertised.listeners={advertised}",
                "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,"
                f"HOP:{hop_protocol},MTLS:SSL,OAUTH:SASL_SSL,TLS:SASL_SSL",
                *hop,
                *identity,
                "inter.broker.listener.name=SASL_PLAINTEXT",
                "controller.listener.names=CONTROLLER",
                f"sasl.enabled.mechanisms={mechanisms}",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={jaas}",
                f"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={jaas}",
                "sasl.mechanism.controller.protocol=PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
                f"listener.name.controller.plain.sasl.jaas.config={plain}",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                f"super.users={';'.join([f'User:{ADMIN}', *self.extra_super_users])}",
                "allow.everyone.if.no.acl.found=false",
                f"log.dirs={self.workdir / 'data'}",
                "num.partitions=1",
                "default.replication.factor=1",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=3",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                *CONSUMER_PROTOCOL_PROPERTIES,
                "num.network.threads=2",
                "num.io.threads=2",
                "background.threads=2",
                "log.cleaner.threads=1",
                *self.extra_properties,
            ],
        )
        write_server_log4j(self.workdir, self.authorizer_log)
        write_tools_log4j(self.workdir)
        return properties


@dataclass
class ClusterNode:
    """One JVM of a ``KafkaCluster``: a broker (node ids 1..N) or the controller (``CONTROLLER_ID``)."""

    node_id: int
    role: Literal["broker", "controller"]
    workdir: Path
    port: int = field(default_factory=free_port)
    host: str = LOOPBACK
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` of its listener (the client listener of a broker, the CONTROLLER one of the controller)."""
        return f"{self.host}:{self.port}"

    @property
    def properties(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def log(self) -> Path:
        """Its stdout and stderr, appended to across restarts."""
        return self.workdir / "server.log"

    @property
    def authorizer_log(self) -> Path:
        return self.workdir / "kafka-authorizer.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KafkaCluster:
    """A KRaft cluster: one dedicated controller and ``brokers`` brokers, each in its own JVM, on 127.0.0.1.

    ``listener`` is the brokers' client (and inter-broker) listener; with SASL_PLAINTEXT the controller listener is
    SASL_PLAINTEXT + PLAIN and clients use SCRAM-SHA-256/512, with ``User:admin`` (and ``scram_users``) credentials
    written at format time. ``authorizer`` puts Kafka's ``StandardAuthorizer`` on every node, with ``User:admin`` and
    ``super_users`` (principals such as ``User:proxy``) as super users, ``allow.everyone.if.no.acl.found=false``.
    Internal topics (offsets, transactions) get replication factor min(brokers, 3) with min ISR 1, so a group keeps
    its coordinator while one broker restarts; ``default.replication.factor`` is 1.
    """

    def __init__(self, home: Path, workdir: Path, brokers: int = 2, listener: Listener = "SASL_PLAINTEXT",
                 authorizer: bool = True, super_users: Sequence[str] = (),
                 scram_users: Mapping[str, str] | None = None) -> None:  # fmt: skip
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if listener not in ("SASL_PLAINTEXT", "PLAINTEXT"):
            raise ValueError(f"listener must be SASL_PLAINTEXT or PLAINTEXT, not {listener!r}")
        if authorizer and listener == "PLAINTEXT":
            raise ValueError("an authorizer on a PLAINTEXT cluster would see every client (and broker) as ANONYMOUS")
        self.home = home
        self.workdir = workdir
        self.listener: Listener = listener
        self.authorizer = authorizer
        self.super_users = [f"User:{ADMIN}", *super_users]
        self.scram_users = {ADMIN: ADMIN_PASSWORD, **(scram_users or {})}
        self.cluster_id = new_cluster_id()
        self.controller = ClusterNode(CONTROLLER_ID, "controller", workdir / "controller")
        self.brokers = [ClusterNode(n, "broker", workdir / f"broker-{n}") for n in range(1, brokers + 1)]

    @property
    def nodes(self) -> list[ClusterNode]:
        return [self.controller, *self.brokers]

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated (clients skip one that is down)."""
        return ",".join(node.address for node in self.brokers)

    @property
    def classpath(self) -> str:
        return str(self.home / "libs" / "*")

    def broker(self, node_id: int) -> ClusterNode:
        for node in self.brokers:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no broker with node id {node_id}")

    def java_command(self, main_class: str, *args: str) -> list[str]:
        """A command line running one of Kafka's main classes (AclCommand, ConfigCommand …) from the same jars."""
        log4j = f"-Dlog4j2.configurationFile={self.workdir / 'tools-log4j2.properties'}"
        return [java(), *JVM_OPTIONS, log4j, "-cp", self.classpath, main_class, *args]

    def client_properties(self, path: Path, user: str = ADMIN, password: str = ADMIN_PASSWORD,
                          mechanism: str = "SCRAM-SHA-512") -> Path:  # fmt: skip
        """A --command-config file for Kafka's tools (and kafkaguard's CLI); PLAINTEXT ignores the credentials."""
        if self.listener == "PLAINTEXT":
            path.write_text("security.protocol=PLAINTEXT\n")
            return path
        return sasl_client_properties(path, user, password, mechanism)

    def client_config(self, user: str = ADMIN, password: str = ADMIN_PASSWORD,
                      mechanism: str = "SCRAM-SHA-512") -> ClientConfig:  # fmt: skip
        """confluent-kafka (librdkafka) settings reaching the cluster; PLAINTEXT ignores the credentials."""
        config: ClientConfig = {"bootstrap.servers": self.bootstrap, "security.protocol": self.listener}
        if self.listener == "SASL_PLAINTEXT":
            config |= {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
        return config

    def metadata_brokers(self, timeout: float = 5.0) -> dict[int, tuple[str, int]]:
        """The brokers a Metadata response lists: ``{node_id: (host, port)}``.

        :raises confluent_kafka.KafkaException: no broker answered within ``timeout``.
        """
        from confluent_kafka.admin import AdminClient  # lazily: tests/conftest.py imports this module

        admin = AdminClient({**self.client_config(), "log_level": 2})  # a stopped broker is expected, not an error
        metadata = admin.list_topics(timeout=timeout)
        return {b.id: (str(b.host), b.port) for b in metadata.brokers.values()}

    def wait_for_brokers(self, timeout: float = START_TIMEOUT) -> dict[int, tuple[str, int]]:
        """Wait until Metadata lists exactly the running brokers, at their ports.

        :raises RuntimeError: it did not within ``timeout``.
        """
        from confluent_kafka import KafkaException

        expected = {node.node_id: (node.host, node.port) for node in self.brokers if node.running}
        deadline = time.monotonic() + timeout
        seen: dict[int, tuple[str, int]] | str = "no answer"
        while time.monotonic() < deadline:
            try:
                seen = self.metadata_brokers(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            except KafkaException as e:
                seen = str(e)
            if seen == expected:
                return seen
            time.sleep(0.2)  # polling Metadata until the controller has (un)fenced the brokers, bounded
        raise RuntimeError(f"Metadata did not list brokers {expected} within {timeout:g} s; last: {seen}")

    def start(self) -> None:
        """Write each node's configuration, format its storage with the one cluster id, start every JVM, and wait
        until each logged ``Kafka Server started`` and Metadata lists all brokers.

        :raises RuntimeError: formatting failed or the cluster did not start in time (with the logs' tails).
        """
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
            self._write_config(node)
        write_tools_log4j(self.workdir)
        scram = scram_format_args(self.scram_users)  # the bootstrap metadata only the controller reads
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            formats = [
                pool.submit(format_storage, self._run(node), self.cluster_id, node.properties,
                            *(scram if node is self.controller else []))
                for node in self.nodes
            ]  # fmt: skip
            for done in formats:
                done.result()
        try:
            self._launch(self.nodes)
            self.wait_for_brokers()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the brokers (together, each with a controlled shutdown), then the controller."""
        running = [node for node in self.brokers if node.running]
        for node in running:
            assert node.process is not None
            node.process.send_signal(signal.SIGTERM)
        for node in running:
            stop_process(node.process)
        stop_process(self.controller.process)

    def stop_broker(self, node_id: int) -> None:
        """Stop one broker and wait until Metadata no longer lists it."""
        stop_process(self.broker(node_id).process)
        if any(node.running for node in self.brokers):
            self.wait_for_brokers()

    def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again on its storage and port, and wait until Metadata lists it.

        :raises RuntimeError: it did not start in time.
        """
        node = self.broker(node_id)
        if node.running:
            return
        try:
            self._launch([node])
            self.wait_for_brokers()
        except BaseException:
            stop_process(node.process)
            raise

    def _run(self, node: ClusterNode) -> list[str]:
        heap = CONTROLLER_JVM_OPTIONS if node.role == "controller" else CLUSTER_BROKER_JVM_OPTIONS
        log4j = f"-Dlog4j2.configurationFile={node.workdir / 'log4j2.properties'}"
        return [java(), *heap, log4j, "-cp", self.classpath]

    def _launch(self, nodes: Sequence[ClusterNode]) -> None:
        """Start the JVMs together and wait for each one's ``Kafka Server started`` in what it logs from now on."""
        offsets = {}
        for node in nodes:
            offsets[node.node_id] = node.log.stat().st_size if node.log.exists() else 0
            with node.log.open("ab") as log:  # the child keeps its own descriptor
                node.process = subprocess.Popen(
                    [*self._run(node), "kafka.Kafka", str(node.properties)], stdout=log, stderr=subprocess.STDOUT
                )
        waiting = list(nodes)
        deadline = time.monotonic() + START_TIMEOUT
        while waiting and time.monotonic() < deadline:
            waiting = [node for node in waiting if not has_started(node.log, offsets[node.node_id])]
            if any(not node.running for node in waiting):
                break
            time.sleep(0.2)  # polling the logs for readiness, bounded by the deadline
        if waiting:
            tails = "\n".join(
                f"--- node {node.node_id} ({node.role}, {'running' if node.running else 'exited'}):\n"
                + node.log.read_text(errors="replace")[-2000:]
                for node in waiting
            )
            raise RuntimeError(f"Kafka nodes did not start within {START_TIMEOUT:g} s:\n{tails}")

    def _write_config(self, node: ClusterNode) -> None:
        controller = self.controller
        common = [
            f"process.roles={node.role}",
            f"node.id={node.node_id}",
            f"controller.quorum.voters={controller.node_id}@{controller.address}",
            "controller.listener.names=CONTROLLER",
            f"log.dirs={node.workdir / 'data'}",
            "num.network.threads=2",
            "num.io.threads=2",
            "background.threads=2",
        ]
        if self.listener == "SASL_PLAINTEXT":
            plain = f'{_PLAIN_JAAS} username="{ADMIN}" password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}";'
            common += [
                "sasl.mechanism.controller.protocol=PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
                f"listener.name.controller.plain.sasl.jaas.config={plain}",
            ]
        if self.authorizer:
            common += [
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                f"super.users={';'.join(self.super_users)}",
                "allow.everyone.if.no.acl.found=false",
            ]
        if node.role == "controller":
            lines = [
                *common,
                f"listeners=CONTROLLER://{node.address}",
                f"listener.security.protocol.map=CONTROLLER:{self.listener}",
            ]
        else:
            internal_rf = min(len(self.brokers), 3)
            lines = [
                *common,
                f"listeners={self.listener}://{node.address}",
                f"advertised.listeners={self.listener}://{node.address}",
                f"listener.security.protocol.map={self.listener}:{self.listener},CONTROLLER:{self.listener}",
                f"inter.broker.listener.name={self.listener}",
                "num.partitions=1",
                "default.replication.factor=1",
                f"offsets.topic.replication.factor={internal_rf}",
                "offsets.topic.num.partitions=3",
                f"transaction.state.log.replication.factor={internal_rf}",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "log.cleaner.threads=1",
            ]
            if self.listener == "SASL_PLAINTEXT":
                jaas = f'{_SCRAM_JAAS} username="{ADMIN}" password="{ADMIN_PASSWORD}";'
                lines += [
                    "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                    "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                    f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={jaas}",
                    f"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={jaas}",
                ]
        write_properties(node.properties, lines)
        write_server_log4j(node.workdir, node.authorizer_log)

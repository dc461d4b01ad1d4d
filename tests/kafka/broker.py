"""A real Apache Kafka broker for tests: KRaft, broker and controller in one JVM, on loopback.

Started from the tarball named by ``KAFKA_TGZ`` (unpacked once per test session) or an unpacked ``KAFKA_HOME``,
with its own ``server.properties``: a SASL_PLAINTEXT listener with SCRAM-SHA-256/512 on a free port, Kafka's KRaft
``StandardAuthorizer``, ``super.users=User:admin``, ``allow.everyone.if.no.acl.found=false``, and
``kafka.authorizer.logger`` at DEBUG into ``kafka-authorizer.log`` (allowed and denied decisions, Kafka's
``[%d] %p %m (%c)%n`` layout). The admin's SCRAM credentials are written at format time, as kafka-storage does.
``stop`` sends TERM, waits, then kills: a test session never leaves a JVM behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ADMIN = "admin"
ADMIN_PASSWORD = "admin-secret"  # noqa: S105 - the test broker's super user
START_TIMEOUT = 90.0
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ActiveProcessorCount=2",
               "-Djava.awt.headless=true"]  # fmt: skip


class KafkaNotConfigured(Exception):
    """Neither KAFKA_TGZ nor KAFKA_HOME names a Kafka distribution."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
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


@dataclass
class KafkaBroker:
    """One running broker. ``bootstrap`` is ``127.0.0.1:port`` (SASL_PLAINTEXT, SCRAM)."""

    home: Path
    workdir: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def authorizer_log(self) -> Path:
        return self.workdir / "kafka-authorizer.log"

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
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism={mechanism}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";\n'
        )
        return path

    def start(self) -> None:
        """Write the configuration, format the storage with the admin's SCRAM credentials, start, wait for ready.

        :raises RuntimeError: formatting failed or the broker did not start in time (with its log's tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        properties = self._write_config()
        run = [java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}", "-cp",
               self.classpath]  # fmt: skip
        cluster_id = subprocess.run(
            [*run, "kafka.tools.StorageTool", "random-uuid"], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()[-1]
        formatted = subprocess.run(
            [*run, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties),
             "--add-scram", f"SCRAM-SHA-256=[name={ADMIN},password={ADMIN_PASSWORD}]",
             "--add-scram", f"SCRAM-SHA-512=[name={ADMIN},password={ADMIN_PASSWORD}]"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {formatted.stdout[-2000:]}{formatted.stderr[-2000:]}")
        with (self.workdir / "broker.log").open("wb") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [*run, "kafka.Kafka", str(properties)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if b"Kafka Server started" in (self.workdir / "broker.log").read_bytes():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.2)  # polling the broker's log for readiness, bounded by the deadline
        tail = (self.workdir / "broker.log").read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"the Kafka broker did not start within {START_TIMEOUT:g} s:\n{tail}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def _write_config(self) -> Path:
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN}" '
                f'password="{ADMIN_PASSWORD}";')  # fmt: skip
        plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{ADMIN}" '
                 f'password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}";')  # fmt: skip
        properties = self.workdir / "server.properties"
        properties.write_text(
            "\n".join([
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                "inter.broker.listener.name=SASL_PLAINTEXT",
                "controller.listener.names=CONTROLLER",
                "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={jaas}",
                f"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={jaas}",
                "sasl.mechanism.controller.protocol=PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
                f"listener.name.controller.plain.sasl.jaas.config={plain}",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                f"super.users=User:{ADMIN}",
                "allow.everyone.if.no.acl.found=false",
                f"log.dirs={self.workdir / 'data'}",
                "num.partitions=1",
                "default.replication.factor=1",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=3",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "num.network.threads=2",
                "num.io.threads=2",
                "background.threads=2",
                "log.cleaner.threads=1",
                "",
            ])
        )  # fmt: skip
        layout = "[%d] %p %m (%c)%n"
        (self.workdir / "log4j2.properties").write_text(
            "\n".join([
                "status = warn",
                "appender.console.type = Console",
                "appender.console.name = STDOUT",
                "appender.console.layout.type = PatternLayout",
                f"appender.console.layout.pattern = {layout}",
                "rootLogger.level = INFO",
                "rootLogger.appenderRef.stdout.ref = STDOUT",
                "logger.state.name = state.change.logger",
                "logger.state.level = WARN",
                "appender.authz.type = File",
                "appender.authz.name = AUTHZ",
                f"appender.authz.fileName = {self.authorizer_log}",
                "appender.authz.layout.type = PatternLayout",
                f"appender.authz.layout.pattern = {layout}",
                "logger.authorizer.name = kafka.authorizer.logger",
                "logger.authorizer.level = DEBUG",
                "logger.authorizer.additivity = false",
                "logger.authorizer.appenderRef.authz.ref = AUTHZ",
                "",
            ])
        )  # fmt: skip
        (self.workdir / "tools-log4j2.properties").write_text(
            "status = error\nappender.console.type = Console\nappender.console.name = STDERR\n"
            "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %p %m%n\nrootLogger.level = WARN\n"
            "rootLogger.appenderRef.stderr.ref = STDERR\n"
        )
        return properties

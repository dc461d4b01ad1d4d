"""Java's own ``KafkaConsumer`` as a consume load (``benchmarks/ConsumeLoad.java``), for the clients that
confluent-kafka cannot stand in for: the pinned librdkafka (2.16) speaks the KIP-848 consumer protocol only with
ConsumerGroupHeartbeat v1 (Kafka 4.0), and a Kafka 3.9 broker serves v0, which Java's 3.9 client uses.

``JavaConsumer`` compiles the program once with the installed JDK against a Kafka distribution's jars, into a
directory it is given (a temporary one: never into the tree), and runs it once per ``consume``: a fresh JVM that logs
in, joins the group given, reads ``count`` records from the earliest offset and leaves. The program times its own
consume loop, from the first batch to the last record, so the JVM's start, the login, the group join and the first
fetch are not in the throughput; it says ``BEGIN`` on stdout when that clock starts, and ``consume`` enters the
``window`` it is given (a meter of the proxy's CPU) then, and leaves it when the result line arrives.

With ``trace=True`` the client's ``NetworkClient`` logs every request it sends at DEBUG (``Sending FETCH request with
header RequestHeader(apiKey=FETCH, apiVersion=17, …``), and ``JavaRun.requests`` holds the versions of each API it
sent: what the client really used (the Fetch version, and ConsumerGroupHeartbeat or JoinGroup). The logging costs the
client, so a benchmark traces its warm-up runs and not the timed ones.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.kafka_load import ClientSettings, LoadError, Throughput
from tests.kafka.broker import CLIENT_LOG4J, write_properties

SOURCE = Path(__file__).with_name("ConsumeLoad.java")
MAIN = "ConsumeLoad"
PROTOCOLS = ("classic", "consumer")
#: The client's JVM: a serial collector (no GC threads competing for the machine's two cores with the broker and the
#: proxy), a heap that holds a few fetches of 1 MiB; the JIT as Java's defaults have it.
JVM_OPTIONS = ["-XX:+UseSerialGC", "-Xms256m", "-Xmx512m", "-Djava.awt.headless=true"]
COMPILE_TIMEOUT = 120.0

_TRACE = ["logger.network.name = org.apache.kafka.clients.NetworkClient", "logger.network.level = DEBUG"]
#: NetworkClient.doSend's DEBUG line (Kafka 3.9): "Sending FETCH request with header RequestHeader(apiKey=FETCH,
#: apiVersion=17, clientId=…".
_SENT = re.compile(r"Sending (\w+) request with header RequestHeader\(apiKey=\w+, apiVersion=(\d+)")


@dataclass
class JavaRun:
    """One ``ConsumeLoad`` run: ``throughput`` after the first batch (``count`` messages, payload bytes, seconds of
    the Java clock; ``startup_s`` from subscribe to the first batch), ``received`` every record read."""

    throughput: Throughput
    received: int
    #: With ``trace``: API name (Kafka's, e.g. ``FETCH``) → the versions the client sent it at.
    requests: dict[str, set[int]] = field(default_factory=dict)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise LoadError(f"{name} (JDK 17+) is not on PATH; scripts/setup installs it (openjdk-17-jdk-headless)")
    return found


class JavaConsumer:
    """``ConsumeLoad`` compiled into ``directory`` against ``home``'s jars (``home/libs``)."""

    def __init__(self, home: Path, directory: Path) -> None:
        """:raises LoadError: no JDK, or the program does not compile (with javac's output)."""
        self.home = home
        self.directory = directory
        self.classes = directory / "classes"
        self.classes.mkdir(parents=True, exist_ok=True)
        self.java = _tool("java")
        compiled = subprocess.run(
            [_tool("javac"), "-nowarn", "-cp", str(home / "libs" / "*"), "-d", str(self.classes), str(SOURCE)],
            capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False,
        )  # fmt: skip
        if compiled.returncode != 0:
            raise LoadError(f"javac {SOURCE.name} failed:\n{compiled.stdout}{compiled.stderr}")
        self.quiet = self._log4j("log4j2-quiet.properties", CLIENT_LOG4J)
        self.traced = self._log4j("log4j2-trace.properties", [*CLIENT_LOG4J, *_TRACE])

    def _log4j(self, name: str, lines: Sequence[str]) -> Path:
        return write_properties(self.directory / name, lines)

    def command(self, settings: ClientSettings, topic: str, group: str, protocol: str, count: int,
                trace: bool = False) -> list[str]:  # fmt: skip
        if protocol not in PROTOCOLS:
            raise ValueError(f"group.protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        if settings.mechanism != "SCRAM-SHA-512" or settings.security_protocol != "SASL_PLAINTEXT":
            raise ValueError("ConsumeLoad logs in with SCRAM-SHA-512 over SASL_PLAINTEXT only")
        log4j = self.traced if trace else self.quiet
        return [
            self.java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}",
            "-cp", f"{self.classes}:{self.home / 'libs' / '*'}", MAIN,
            settings.bootstrap, settings.user, settings.password, topic, group, protocol, str(count),
        ]  # fmt: skip

    def consume(
        self,
        settings: ClientSettings,
        topic: str,
        group: str,
        protocol: str,
        count: int,
        window: AbstractContextManager[object] | None = None,
        timeout: float = 300.0,
        trace: bool = False,
    ) -> JavaRun:
        """Run ``ConsumeLoad`` once (a new JVM, member of ``group`` on ``protocol``) until it read ``count`` records;
        ``window`` is entered when its clock starts and left when it reports.

        :raises LoadError: the program failed (its ERROR line and the client's log), or took longer than ``timeout``.
        """
        stderr_path = self.directory / "consume.stderr"
        command = self.command(settings, topic, group, protocol, count, trace)
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                       text=True)  # fmt: skip
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            process.kill()

        watchdog = threading.Timer(timeout, expire)
        watchdog.start()
        result: dict[str, float] | None = None
        said: list[str] = []
        try:
            assert process.stdout is not None
            with ExitStack() as metering:
                for line in process.stdout:
                    line = line.strip()
                    if line == "BEGIN":
                        metering.enter_context(window or nullcontext())
                    elif line.startswith("RESULT "):
                        metering.close()  # the clock stopped: what follows (leaving the group) is not metered
                        result = json.loads(line.removeprefix("RESULT "))
                    else:
                        said.append(line)
            status = process.wait()  # the watchdog kills it at ``timeout``
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        log = stderr_path.read_text(errors="replace")
        if status != 0 or result is None:
            if expired.is_set():
                said.append(f"(killed after {timeout:g} s)")
            tail = "\n".join(log.splitlines()[-20:])
            raise LoadError(f"{settings.bootstrap}: ConsumeLoad ({protocol}) exited {status}: {' '.join(said)}\n{tail}")
        requests: dict[str, set[int]] = {}
        for api, version in _SENT.findall(log) if trace else ():
            requests.setdefault(api, set()).add(int(version))
        throughput = Throughput(int(result["messages"]), int(result["bytes"]), float(result["seconds"]),
                                startup_s=float(result["startup_seconds"]))  # fmt: skip
        return JavaRun(throughput, int(result["received"]), requests)

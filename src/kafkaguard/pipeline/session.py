"""The one place that builds a SparkSession (STYLE.md §6: jobs stay free of cluster details).

Defaults measured on a 2-core machine (SPARK-NOTES.md): ``local[*]``, few shuffle partitions, UI off, Arrow on,
Python workers reused, UTC session time, and the Python workers run this very interpreter (otherwise they run the
system ``python3`` and fail with "No module named pyarrow").
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafkaguard.pipeline.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark 4 runs on Java 17 or newer.
MIN_JAVA = 17

DEFAULT_CONFIG: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "true",
}
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_version(java: str | None = None) -> int:
    """The major version of the Java that Spark will use (``JAVA_HOME`` first, then ``PATH``).

    :raises PipelineError: no Java found, or its version cannot be read.
    """
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise PipelineError(
            f"Java {MIN_JAVA}+ is needed by Spark 4 but no 'java' was found (set JAVA_HOME or put java on PATH; "
            "on Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as e:
        raise PipelineError(f"could not run {java} -version: {e}") from e
    found = _VERSION.search(out.stderr + out.stdout)
    if found is None:
        raise PipelineError(f"could not read the Java version from {java} -version")
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def check_java(java: str | None = None) -> int:
    """:raises PipelineError: Java is missing or older than 17, with what to do about it."""
    major = java_version(java)
    if major < MIN_JAVA:
        raise PipelineError(
            f"Spark 4 needs Java {MIN_JAVA} or newer, found Java {major} (set JAVA_HOME to a JDK/JRE {MIN_JAVA}+)"
        )
    return major


def start_spark(
    app_name: str = "kafkaguard-audit",
    master: str | None = None,
    config: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Build (or reuse) the session: ``master`` as given, else whatever spark-submit set, else ``local[*]``; or,
    with ``remote`` (``sc://host:port``), a Spark Connect session to that server (no local JVM, no Java needed).

    :raises PipelineError: no suitable Java.
    """
    from pyspark.sql import SparkSession

    if remote:
        return _connect(app_name, remote)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_ENV_LOADED" in os.environ
    if not submitted:
        check_java()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not submitted:
        builder = builder.master("local[*]")
    for key, value in {**DEFAULT_CONFIG, **(config or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


#: Settings a Spark Connect client may set per session (the rest are the server's, fixed when it started).
CONNECT_CONFIG = ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.adaptive.enabled")


#: Spark Connect's client retries an unreachable server for minutes; we look once, this long, first.
CONNECT_TIMEOUT_SECONDS = 10.0


def _reachable(remote: str) -> None:
    """:raises PipelineError: nothing accepts connections at the URL's host and port (default 15002)."""
    address = remote.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "15002")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_SECONDS):
            pass
    except (OSError, ValueError) as e:
        raise PipelineError(f"cannot reach the Spark Connect server at {address}: {e}") from e


def _connect(app_name: str, remote: str) -> SparkSession:
    """A Spark Connect session; the server runs the JVM and the Python workers (``PYSPARK_PYTHON`` is the server's).

    :raises PipelineError: not an ``sc://`` URL, or the Connect client's packages are missing.
    """
    if not remote.startswith("sc://"):
        raise PipelineError(f"--remote must be a Spark Connect URL (sc://host:port), got {remote!r}")
    _reachable(remote)
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as e:
        raise PipelineError(f"Spark Connect needs pyspark's connect extra (grpcio, grpcio-status): {e}") from e
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(remote).appName(app_name)
    spark = builder.getOrCreate()
    for key in CONNECT_CONFIG:
        spark.conf.set(key, DEFAULT_CONFIG[key])
    return spark


class Shared(Protocol):
    """A read-only value the workers need: a ``Broadcast`` or an ``Inline`` (both have ``.value``)."""

    @property
    def value(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Inline:
    """A value shipped inside the pickled function (Spark Connect has no SparkContext, so no broadcast)."""

    value: str


def is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def share(spark: SparkSession, value: str) -> Shared:
    """Broadcast ``value`` (classic Spark: sent once per executor), or inline it in the function (Spark Connect)."""
    if is_connect(spark):
        return Inline(value)
    return spark.sparkContext.broadcast(value)

"""The jobs scale out: on a real Spark standalone cluster (a master and a worker started from the installed PySpark,
on loopback), through spark-submit with no CLI framework importable, and through Spark Connect, ``replay`` and
``simulate`` write exactly what they write in local mode.

Each job runs in its own driver process (``python -m kafkaguard.pipeline.jobs``), as an operator would run it; the
outputs are read back with the test session and compared row by row.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.audit.records import to_json_line
from tests.pipeline.test_jobs_cli import CURRENT, PROPOSED, records

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_PID_DIR": str(tmp / "pids"),
        "SPARK_WORKER_DIR": str(tmp / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def wait_for(check, what: str, logs: list[Path], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    raise AssertionError(f"{what} did not come up within {timeout:.0f} s\n{tails}")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with one registered worker (2 cores, 2 GiB)."""
    tmp = tmp_path_factory.mktemp("standalone")
    env = spark_env(tmp)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = [tmp / "master.log", tmp / "worker.log"]
    master = start(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env,
        logs[0],
    )
    processes = [master]
    try:
        wait_for(lambda: port_open(port), "the Spark master", logs)
        worker = start(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                str(worker_ui),
                "--work-dir",
                str(tmp / "work"),
            ],
            env,
            logs[1],
        )
        processes.append(worker)

        def registered() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as response:
                return int(json.load(response).get("aliveworkers", 0)) >= 1

        wait_for(registered, "a registered Spark worker", logs)
        yield url
    finally:
        for process in reversed(processes):
            stop(process)


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:PORT`` of a Spark Connect server (``sbin/start-connect-server.sh``, local[2])."""
    tmp = tmp_path_factory.mktemp("connect")
    env = spark_env(tmp)
    port = free_port()
    sbin = spark_home() / "sbin"
    confs = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
    }
    command = [str(sbin / "start-connect-server.sh"), "--master", "local[2]"]
    for key, value in confs.items():
        command += ["--conf", f"{key}={value}"]
    subprocess.run(command, env=env, check=True, timeout=60, capture_output=True)
    try:
        wait_for(lambda: port_open(port), "the Spark Connect server", sorted((tmp / "logs").glob("*")))
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run([str(sbin / "stop-connect-server.sh")], env=env, timeout=60, check=False, capture_output=True)
        for pid_file in (tmp / "pids").glob("*.pid"):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cluster-inputs")
    lines = [to_json_line(r) for r in records()]
    (root / "log.jsonl").write_text("\n".join(lines) + "\nnot json at all\n")
    (root / "current.json").write_text(json.dumps({"acls": CURRENT}))
    (root / "proposed.json").write_text(json.dumps({"acls": PROPOSED}))
    return root


def job_args(job: str, inputs: Path, out: Path) -> list[str]:
    args = [job, "--log", str(inputs / "log.jsonl"), "--out", str(out)]
    if job == "replay":
        return [*args, "--acls", str(inputs / "proposed.json")]
    return [*args, "--current", str(inputs / "current.json"), "--proposed", str(inputs / "proposed.json")]


TABLE = {"replay": "decisions", "simulate": "flips"}


def run_job(command: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Run a job's driver; its summary (the title and the indented lines; spark-submit also puts the driver's
    progress lines on stdout), without the lines that name the run (paths, seconds)."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = [line for line in done.stdout.splitlines() if line.startswith(("kafkaguard audit ", "  "))]
    return [line for line in summary if not line.lstrip().startswith(("written", "seconds"))]


def entry(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafkaguard.pipeline.jobs", *args]


def table_rows(spark, out: Path, job: str) -> list[tuple[object, ...]]:
    return sorted(tuple(row) for row in spark.read.parquet(str(out / TABLE[job])).collect())


@pytest.fixture(scope="module")
def local_results(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[str], Path]]:
    """Each job run in local mode, the expected outputs."""
    root = tmp_path_factory.mktemp("local")
    return {job: (run_job(entry(*job_args(job, inputs, root / job))), root / job) for job in TABLE}


@pytest.mark.parametrize("job", sorted(TABLE))
def test_on_a_standalone_cluster(spark, standalone: str, inputs: Path, local_results, tmp_path: Path, job) -> None:
    summary, local_out = local_results[job]
    got = run_job(entry(*job_args(job, inputs, tmp_path / job), "--master", standalone))
    assert got == summary
    assert table_rows(spark, tmp_path / job, job) == table_rows(spark, local_out, job)
    assert table_rows(spark, local_out, job), "the fixture has flips and decisions"


def test_spark_submit_with_only_the_spark_extra(spark, standalone: str, inputs: Path, local_results, tmp_path: Path):
    """spark-submit of the one entry point, with typer, click and rich made unimportable (a cluster's Python that
    has only ``kafkaguard[spark]``)."""
    hidden = tmp_path / "hidden"
    for name in ("typer", "click", "rich"):
        (hidden / name).mkdir(parents=True)
        (hidden / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")])}
    path = subprocess.run(entry("--path"), capture_output=True, text=True, check=True).stdout.strip()
    submit = [str(spark_home() / "bin" / "spark-submit"), "--master", standalone, path]
    got = run_job([*submit, *job_args("simulate", inputs, tmp_path / "simulate")], env)
    summary, local_out = local_results["simulate"]
    assert got == summary
    assert table_rows(spark, tmp_path / "simulate", "simulate") == table_rows(spark, local_out, "simulate")
    refused = subprocess.run(
        [sys.executable, "-c", "import typer"], env=env, capture_output=True, text=True, check=False
    )
    assert "typer is not installed here" in refused.stderr


@pytest.mark.parametrize("job", sorted(TABLE))
def test_through_spark_connect(spark, connect_server: str, inputs: Path, local_results, tmp_path: Path, job) -> None:
    summary, local_out = local_results[job]
    got = run_job(entry(*job_args(job, inputs, tmp_path / job), "--remote", connect_server))
    assert got == summary
    assert table_rows(spark, tmp_path / job, job) == table_rows(spark, local_out, job)


def test_bad_remote_is_one_clear_error(inputs: Path, tmp_path: Path) -> None:
    for remote, message in (
        ("http://127.0.0.1:1", "--remote must be a Spark Connect URL"),
        (f"sc://127.0.0.1:{free_port()}", "cannot reach the Spark Connect server at 127.0.0.1:"),
    ):
        done = subprocess.run(
            entry(*job_args("simulate", inputs, tmp_path / "x"), "--remote", remote),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode != 0
        assert message in done.stderr and "Traceback" not in done.stderr, done.stderr

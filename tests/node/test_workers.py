"""``kafkaguard serve --workers 2`` as real processes (issue 39, "Workers"): both workers serve the one port, a
SIGKILLed worker is replaced while connections keep being answered, SIGTERM of the supervisor stops every worker
(exit 0, no process left), the audit log the workers share holds every event once as whole JSON lines, and settings
that cannot be shared are refused with a clear error."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from prometheus_client.parser import text_string_to_metric_families

from kafkaguard.config import load_settings
from kafkaguard.errors import InvalidConfigError
from kafkaguard.node.worker_metrics import combine
from kafkaguard.node.workers import check_shareable, describe_exit
from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire, metadata

pytestmark = pytest.mark.integration

TIMEOUT = 60.0
_STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")


@dataclass
class Node:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    audit: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def worker_pids(self) -> dict[int, int]:
        """The newest pid of each worker, from the supervisor's "worker N started (pid P)" lines."""
        return {int(number): int(pid) for number, pid in _STARTED.findall(self.log_text())}

    def wait_for(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + TIMEOUT
        while (found := re.search(pattern, self.log_text(), re.M)) is None:
            assert self.process.poll() is None, f"the supervisor exited: {self.log_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no {pattern!r} in the log: {self.log_text()[-3000:]}"
            time.sleep(0.05)  # polling the log, bounded by the deadline
        return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    yield from _launch(tmp_path)


@pytest.fixture
def node_with_console(tmp_path: Path) -> Iterator[Node]:
    yield from _launch(tmp_path, http_listener=f"127.0.0.1:{free_port()}")


def _launch(tmp_path: Path, **extra: object) -> Iterator[Node]:
    port = free_port()
    audit = tmp_path / "audit" / "audit.log"
    settings = {
        **extra,
        "listeners": [f"PLAINTEXT://127.0.0.1:{port}"],
        "data_dir": str(tmp_path / "data"),
        "audit_log": str(audit),
        "audit_mode": "all",
        "max_connection_creation_rate_per_ip": 100000.0,
        "log_level": "DEBUG",  # each connection's close is a DEBUG line saying which worker served it
    }
    config = tmp_path / "kafkaguard.yaml"
    config.write_text(json.dumps(settings))
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(KAFKAGUARD), "serve", "--workers", "2", "--config", str(config)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
    handle = Node(process, port, log, audit)
    try:
        wait_until_listening(process, port, timeout=TIMEOUT)
        handle.wait_for(r"worker=1 .*listening on PLAINTEXT")
        handle.wait_for(r"worker=2 .*listening on PLAINTEXT")
        if "http_listener" in extra:  # each worker's console starts after its Kafka listeners
            handle.wait_for(r"worker=1 .*console listening on")
            handle.wait_for(r"worker=2 .*console listening on")
        yield handle
    finally:
        if process.poll() is None:
            pids = handle.worker_pids().values()
            process.send_signal(signal.SIGKILL)  # a failed test: its workers get SIGTERM (PR_SET_PDEATHSIG)
            process.wait(20)
            deadline = time.monotonic() + TIMEOUT
            while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
                time.sleep(0.1)  # polling for the workers' exit, bounded by the deadline
        assert "Traceback" not in handle.log_text(), handle.log_text()[-3000:]


def answered(port: int) -> bool:
    """One ApiVersions on a new connection: answered (True), or refused or closed unanswered (False)."""
    try:
        with Wire(("127.0.0.1", port), timeout=10) as wire:
            hello = ApiVersionsRequest(client_software_name="workers-test", client_software_version="1")
            return bool(wire.request(hello).error_code == 0)
    except (ConnectionError, OSError, EOFError, AssertionError):  # Wire asserts on a close instead of an answer
        return False


def answered_with_a_retry(port: int) -> bool:
    """As a client does: a connection that lands on a worker just killed fails once, the next one is served."""
    return answered(port) or answered(port)


def served_by(node: Node) -> set[str]:
    return set(re.findall(r"worker=(\d+) .*connection from 127\.0\.0\.1", node.log_text()))


def scrape(http: str) -> str:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as response:
        assert response.status == 200
        text: str = response.read().decode()
        return text


def workers_in(exposition: str) -> set[str]:
    """The ``worker`` labels of a scrape's ``kafkaguard_acls`` samples (parsed as Prometheus parses it)."""
    return {
        sample.labels["worker"]
        for family in text_string_to_metric_families(exposition)
        if family.name == "kafkaguard_acls"
        for sample in family.samples
    }


def test_two_workers_serve_one_port_a_killed_worker_is_replaced_and_sigterm_stops_all(
    node_with_console: Node, tmp_path: Path
) -> None:
    node = node_with_console
    http = json.loads((tmp_path / "kafkaguard.yaml").read_text())["http_listener"]
    # the console's port is shared too; whichever worker answers, its answer holds both workers' series
    deadline = time.monotonic() + TIMEOUT
    while workers_in(scrape(http)) != {"1", "2"}:  # each publishes its series within PUBLISH_SECONDS of its start
        assert time.monotonic() < deadline, scrape(http)[-2000:]
        time.sleep(0.2)  # polling for the other worker's first publication
    assert all(workers_in(scrape(http)) == {"1", "2"} for _ in range(10))
    assert all(answered(node.port) for _ in range(60))
    deadline = time.monotonic() + TIMEOUT
    while served_by(node) != {"1", "2"}:  # the kernel spreads connections by their source port
        assert time.monotonic() < deadline, f"connections served by workers {served_by(node)} only"
        assert answered(node.port)
    first = node.worker_pids()
    assert sorted(first) == [1, 2] and all(alive(pid) for pid in first.values())

    os.kill(first[1], signal.SIGKILL)
    # connections keep being answered while worker 1 is dead and after it is replaced
    assert all(answered_with_a_retry(node.port) for _ in range(30))
    node.wait_for(rf"worker 1 \(pid {first[1]}\) killed by SIGKILL after [\d.]+ s; restarting it in [\d.]+ s")
    started = node.wait_for(rf"worker 1 started \(pid (?!{first[1]}\))(\d+)\)")
    replacement = int(started.group(1))
    assert replacement != first[1] and alive(replacement) and alive(first[2])
    assert all(answered_with_a_retry(node.port) for _ in range(30))
    deadline = time.monotonic() + TIMEOUT
    after = node.log_text().index(started.group(0))
    while not re.search(r"worker=1 .*connection from 127\.0\.0\.1", node.log_text()[after:]):
        assert time.monotonic() < deadline, "the replacement worker 1 served no connection"
        assert answered(node.port)

    node.process.send_signal(signal.SIGTERM)
    assert node.process.wait(TIMEOUT) == 0
    assert not alive(replacement) and not alive(first[2])  # no orphans
    assert not answered(node.port)
    assert "supervisor stopped" in node.log_text()


def test_sighup_reaches_every_worker(node: Node) -> None:
    node.process.send_signal(signal.SIGHUP)
    node.wait_for(r"SIGHUP: forwarded to every worker")
    node.wait_for(r"worker=1 .*SIGHUP:")
    node.wait_for(r"worker=2 .*SIGHUP:")
    assert node.worker_pids().keys() == {1, 2} and len(_STARTED.findall(node.log_text())) == 2  # none restarted
    assert answered(node.port)


def test_workers_append_to_one_audit_log_without_losing_or_mixing_lines(node: Node) -> None:
    # each Metadata asks for a topic of its own: one audited DESCRIBE denial per request, from whichever worker
    rounds, per_connection = 40, 25
    for round_ in range(rounds):
        with Wire(("127.0.0.1", node.port), timeout=10) as wire:
            for index in range(per_connection):
                metadata(wire, [f"t-{round_}-{index}"], allow_auto_topic_creation=False)
    assert served_by(node) == {"1", "2"}
    node.process.send_signal(signal.SIGTERM)  # each worker flushes its audit writer on the way out
    assert node.process.wait(TIMEOUT) == 0
    lines = node.audit.read_text().splitlines()
    topics: list[str] = []
    for line in lines:
        record = json.loads(line)  # every line is whole JSON: no two workers' writes interleaved
        text = json.dumps(record)
        topics.extend(re.findall(r'"(t-\d+-\d+)"', text)[:1])
    expected = {f"t-{r}-{i}" for r in range(rounds) for i in range(per_connection)}
    assert set(topics) == expected
    assert len(topics) == len(expected)  # none twice


def test_settings_workers_cannot_share_are_refused(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=tmp_path, workers=2, listeners=["PLAINTEXT://127.0.0.1:0"])
    with pytest.raises(InvalidConfigError, match=r"port 0.*give it a fixed port"):
        check_shareable(settings)
    with pytest.raises(InvalidConfigError, match=r"whole number from 1 to 256, or auto"):
        load_settings(None, data_dir=tmp_path, workers="many")
    assert load_settings(None, data_dir=tmp_path, workers="auto").workers == (os.cpu_count() or 1)
    result = subprocess.run(
        [str(KAFKAGUARD), "serve", "--workers", "0", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "workers '0' is not a number of processes" in result.stderr


def test_exits_are_described() -> None:
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(3) == "exited with code 3"


def test_a_worker_that_cannot_start_stops_the_node_with_its_error(tmp_path: Path) -> None:
    # every worker fails its start the same way (no upstream there): restarting would fail again
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    result = subprocess.run(
        [str(KAFKAGUARD), "proxy", "--workers", "2", "--data-dir", str(tmp_path / "data"),
         "--listener", f"PLAINTEXT://127.0.0.1:{port}", "--upstream", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=TIMEOUT, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    assert "cannot use the upstream 127.0.0.1:1" in result.stderr
    assert re.search(r"worker \d \(pid \d+\) stopped on a configuration error \(exit 2", result.stderr)
    pids = [int(pid) for _, pid in _STARTED.findall(result.stderr)]
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)
    assert "Traceback" not in result.stderr


def test_expositions_combine_into_one_with_a_worker_label_per_series() -> None:
    one = (
        "# HELP kafkaguard_logins_total Logins.\n# TYPE kafkaguard_logins_total counter\n"
        'kafkaguard_logins_total{listener="SASL_PLAINTEXT://:9092",result="ok"} 7.0\n'
        "# HELP kafkaguard_acls ACLs the authorizer holds.\n# TYPE kafkaguard_acls gauge\nkafkaguard_acls 3.0\n"
    )
    two = one.replace(" 7.0", " 5.0")
    merged = combine({2: two, 1: one})
    families = {family.name: family for family in text_string_to_metric_families(merged)}
    assert sorted(families) == ["kafkaguard_acls", "kafkaguard_logins"]  # each family once
    logins = [(s.labels["worker"], s.labels["result"], s.value) for s in families["kafkaguard_logins"].samples]
    assert logins == [("1", "ok", 7.0), ("2", "ok", 5.0)]
    assert [(s.labels, s.value) for s in families["kafkaguard_acls"].samples] == [
        ({"worker": "1"}, 3.0),
        ({"worker": "2"}, 3.0),
    ]
    assert merged.count("# TYPE kafkaguard_acls gauge") == 1

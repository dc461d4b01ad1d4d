"""A kafkaguard fleet on one machine, as a data centre would run it (``scripts/run-fleet``; the rolling-restart test):
two Kafka 3.9 brokers (KRaft, a dedicated controller), one PostgreSQL store, two ``kafkaguard proxy --workers 2``
nodes, and
HAProxy in front of them speaking PROXY protocol v2, with the one bootstrap address clients use.

Addresses: HAProxy listens on ``127.0.0.1`` — the bootstrap port P and one port per broker (P + 1 + node id, the
proxy's per-broker ports, ``proxy.nodes.node_port``) — and balances each to the same port of the proxy nodes, which
listen on ``127.0.0.2``, ``127.0.0.3``… (other loopback addresses, so that every node can use the same port numbers,
as separate hosts would) and advertise ``127.0.0.1``: a client's every connection, bootstrap or per broker, goes
through the balancer. HAProxy sends PROXY v2 from ``127.0.0.1``, the proxies' one ``trusted_proxies`` entry, so the
proxies see each client's own address; it checks each node's ``/healthz`` every second (its console on its own
port), so a draining node (503) gets no new connection. The store is shared: users, ACLs and groups written
through one node are the other's within its change-feed poll.

Cost: three JVMs (~10 s to start), a PostgreSQL cluster (~2 s), two proxies (~2 s each).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaCluster, kafka_home
from tests.ports import free_port_block
from tests.postgres import PASSWORD as STORE_PASSWORD
from tests.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[2]
BALANCER_HOST = "127.0.0.1"
START_TIMEOUT = 60.0
#: kafkaguard's own super user on every node (created in the shared store by the first node to start).
FLEET_ADMIN, FLEET_ADMIN_PASSWORD = "admin", "fleet-admin-secret"


def _free_port_block(size: int) -> int:
    """A first port P with P … P + size - 1 free on every loopback address the fleet uses."""
    return free_port_block(size, _hosts(3))


def _hosts(count: int) -> list[str]:
    return [BALANCER_HOST, *(f"127.0.0.{2 + i}" for i in range(count))]


def _listening(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


@dataclass
class ProxyNode:
    """One ``kafkaguard proxy`` of the fleet."""

    index: int
    host: str
    port: int
    http_port: int
    workdir: Path
    workers: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.workdir / "kafkaguard.yaml"

    @property
    def log(self) -> Path:
        return self.workdir / "proxy.log"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.http_port}/healthz", timeout=1) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False


@dataclass
class Fleet:
    """Start it with ``start``, stop it with ``stop``; ``restart_proxy`` and ``restart_broker`` for rolling
    restarts. ``bootstrap`` is the address clients use."""

    workdir: Path
    kafka_dist: Path
    proxies_count: int = 2
    brokers_count: int = 2
    workers: int = 2
    cluster: KafkaCluster = field(init=False)
    store: PostgresServer | None = None
    database: str = ""
    port: int = 0
    proxies: list[ProxyNode] = field(default_factory=list)
    balancer: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{BALANCER_HOST}:{self.port}"

    @property
    def node_ports(self) -> list[int]:
        """The balancer's per-broker ports (the proxies' ``node_port`` of each broker)."""
        return [self.port + 1 + n for n in range(1, self.brokers_count + 1)]

    # ------------------------------------------------------------------------------------------ start and stop

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster = KafkaCluster(self.kafka_dist, self.workdir / "kafka", brokers=self.brokers_count)
        self.cluster.start()
        self.store = PostgresServer()
        self.database = self.store.create_database()
        self.port = _free_port_block(2 + self.brokers_count)
        for index in range(self.proxies_count):
            node = ProxyNode(index, f"127.0.0.{2 + index}", self.port, self.port + 2 + self.brokers_count + index,
                             self.workdir / f"proxy-{index + 1}", self.workers)  # fmt: skip
            node.workdir.mkdir(parents=True, exist_ok=True)
            self._write_proxy_config(node)
            self.proxies.append(node)
            self.start_proxy(node)  # one at a time: the first creates the store's schema and kafkaguard's admin
        self._write_balancer_config()
        with (self.workdir / "haproxy.log").open("ab") as log:  # the child keeps its own descriptor
            command = [_haproxy(), "-W", "-db", "-f", str(self.workdir / "haproxy.cfg")]
            self.balancer = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self._wait(lambda: all(_listening(BALANCER_HOST, p) for p in (self.port, *self.node_ports)), "HAProxy")

    def stop(self) -> None:
        for process in [self.balancer, *(node.process for node in self.proxies)]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [self.balancer, *(node.process for node in self.proxies)]:
            if process is not None:
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
        with contextlib.suppress(Exception):
            self.cluster.stop()
        if self.store is not None:
            self.store.destroy()

    # ------------------------------------------------------------------------------------------ the proxies

    def start_proxy(self, node: ProxyNode) -> None:
        env = {**os.environ, "KAFKAGUARD_UPSTREAM_PASSWORD": ADMIN_PASSWORD,
               "KAFKAGUARD_STORE_PASSWORD": STORE_PASSWORD,
               "KAFKAGUARD_ADMIN_PASSWORD": FLEET_ADMIN_PASSWORD}  # fmt: skip
        command = [str(ROOT / ".venv" / "bin" / "kafkaguard"), "proxy", "--config", str(node.config)]
        if node.workers > 1:
            command += ["--workers", str(node.workers)]
        with node.log.open("ab") as log:  # the child keeps its own descriptor
            node.process = subprocess.Popen(command, cwd=node.workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
        self._wait(node.healthy, f"proxy {node.index + 1} ({node.host}:{node.port})", node)

    def stop_proxy(self, node: ProxyNode, sig: signal.Signals = signal.SIGTERM, timeout: float = 90.0) -> int:
        """Signal ``node`` (SIGTERM: its graceful drain) and wait for it to exit: its exit code."""
        process = node.process
        if process is None:
            raise RuntimeError(f"proxy {node.index + 1} is not running")
        process.send_signal(sig)
        code = process.wait(timeout)
        node.process = None
        return code

    def restart_proxy(self, node: ProxyNode) -> int:
        code = self.stop_proxy(node)
        self.start_proxy(node)
        return code

    def restart_broker(self, node_id: int) -> None:
        self.cluster.stop_broker(node_id)
        self.cluster.start_broker(node_id)
        self.cluster.wait_for_brokers()

    # ------------------------------------------------------------------------------------------ configuration

    def _write_proxy_config(self, node: ProxyNode) -> None:
        assert self.store is not None
        config = {
            "data_dir": str(node.workdir / "data"),
            "store": self.store.url(self.database),
            "listeners": [f"SASL_PLAINTEXT://{node.host}:{node.port}"],
            "advertised_host": BALANCER_HOST,
            "http_listener": f"{node.host}:{node.http_port}",
            "super_users": f"User:{FLEET_ADMIN}",
            "admin_user": FLEET_ADMIN,
            "upstream": self.cluster.bootstrap,
            "upstream_security_protocol": "SASL_PLAINTEXT",
            "upstream_sasl_mechanism": "SCRAM-SHA-512",
            "upstream_user": ADMIN,
            "proxy_protocol": "required",
            "trusted_proxies": [f"{BALANCER_HOST}/32"],
            "audit_log": str(node.workdir / "audit.log"),
        }
        node.config.write_text(json.dumps(config, indent=2))  # JSON is YAML

    def _write_balancer_config(self) -> None:
        lines = [
            "global", "  maxconn 4000", "defaults", "  mode tcp", "  timeout connect 5s", "  timeout client 10m",
            "  timeout server 10m", "  option redispatch", "  retries 3",
        ]  # fmt: skip
        for port in (self.port, *self.node_ports):
            lines += [f"frontend kafka-{port}", f"  bind {BALANCER_HOST}:{port}", f"  default_backend proxies-{port}",
                      f"backend proxies-{port}", "  balance leastconn", "  option httpchk GET /healthz",
                      "  http-check expect status 200",
                      f"  default-server check inter 1s fall 1 rise 2 send-proxy-v2 source {BALANCER_HOST}",
                      ]  # fmt: skip
            lines += [f"  server proxy-{n.index + 1} {n.host}:{port} port {n.http_port}" for n in self.proxies]
        (self.workdir / "haproxy.cfg").write_text("\n".join(lines) + "\n")

    def _wait(self, ready: object, what: str, node: ProxyNode | None = None) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():  # type: ignore[operator]
            if node is not None and node.process is not None and node.process.poll() is not None:
                raise RuntimeError(f"{what} exited ({node.process.returncode}): {node.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not come up within {START_TIMEOUT:g} s")
            time.sleep(0.2)


def _haproxy() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise RuntimeError("HAProxy is missing: run scripts/setup (apt-get install haproxy)")
    return found


@contextlib.contextmanager
def running_fleet(workdir: Path, kafka_dist: Path, *, proxies: int = 2, workers: int = 2) -> Iterator[Fleet]:
    fleet = Fleet(workdir, kafka_dist, proxies_count=proxies, workers=workers)
    try:
        fleet.start()
        yield fleet
    finally:
        fleet.stop()


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """``scripts/run-fleet``: the fleet until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxies", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="workers per proxy (--workers of kafkaguard proxy)")
    args = parser.parse_args(argv)
    if "KAFKA_TGZ" not in os.environ and "KAFKA_HOME" not in os.environ:
        os.environ["KAFKA_TGZ"] = str(ROOT.parent / "shared" / "kafka" / "kafka_2.13-3.9.0-offline.tar.gz")
    work = Path(tempfile.mkdtemp(prefix="kafkaguard-fleet-"))
    stop = False

    def stopping(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    say(
        f"==> starting the fleet in {work} (~30 s): 2 Kafka brokers, PostgreSQL, {args.proxies} proxies "
        f"× {args.workers} workers, HAProxy"
    )
    try:
        with running_fleet(work, kafka_home(work / "dist"), proxies=args.proxies, workers=args.workers) as fleet:
            nodes = ", ".join(f"{n.host}:{n.port} (/healthz on :{n.http_port})" for n in fleet.proxies)
            store = fleet.store.url(fleet.database) if fleet.store is not None else "?"
            say(
                f"==> bootstrap.servers={fleet.bootstrap}  security.protocol=SASL_PLAINTEXT  "
                f"sasl.mechanism=SCRAM-SHA-256  sasl.username={FLEET_ADMIN}  sasl.password={FLEET_ADMIN_PASSWORD}"
            )
            say(
                f"    HAProxy on {BALANCER_HOST}:{fleet.port} and :{fleet.node_ports[0]}-{fleet.node_ports[-1]} "
                f"(a port per broker), PROXY v2 to the proxies {nodes}; store {store}"
            )
            say("    Ctrl-C stops everything and removes the directory.")
            while not stop:
                time.sleep(0.5)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

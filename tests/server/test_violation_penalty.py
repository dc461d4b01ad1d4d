"""The protocol-violation penalty against real ``kafkaguard serve`` processes (issue 36, items 5 and 6): one buggy
client does not lock its neighbours out, a flood still is, a logged-in violator's principal is charged (not its
address), and IPv6 clients are counted per /64.

Before (a1dee34) every violation refused its address for ``protocol_violation_penalty_seconds``: a client sending
one junk frame a second behind a NAT kept every other client of that address from connecting, and a logged-in
violator took its address's other users with it. Clients bind 127.0.0.x source addresses to be "another address";
IPv6 clients of one /64 come through the PROXY protocol (the loopback has one IPv6 address, ::1), from a trusted
127.0.0.1, as a load balancer relays them.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from tests.node.proxy_relay import encode_v2
from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire, encode_request

pytestmark = pytest.mark.integration

USERS = ("admin", "alice", "bob", "carol")
#: ApiVersions v3's header (key 18, version 3, correlation 1, client id "junk"), then random bytes: 4 KiB, above the
#: 1 KiB an ApiVersions may have before login, so the server closes the connection for it (a protocol violation).
JUNK = struct.pack(">hhih", 18, 3, 1, 4) + b"junk" + b"\x00" + random.Random(36).randbytes(4096)


@dataclass
class Served:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start_serve(tmp_path: Path, *args: str, listener_host: str = "127.0.0.1") -> Served:
    data_dir = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    for user in USERS:
        subprocess.run(
            [str(KAFKAGUARD), "users", "add", user, "--password", f"{user}-secret", "--data-dir", str(data_dir)],
            capture_output=True, timeout=60, env=env, check=True,
        )  # fmt: skip
    port = free_port()
    host = f"[{listener_host}]" if ":" in listener_host else listener_host
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(KAFKAGUARD), "serve", "--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://{host}:{port}",
             "--super-users", "User:admin", *args],
            stdout=subprocess.DEVNULL, stderr=out, env=env,
        )  # fmt: skip
    served = Served(port, process, log)
    try:
        if listener_host == "127.0.0.1":
            wait_until_listening(process, port)
        else:
            _wait_for_log(served, "listening on")
    except BaseException:
        stop(served)
        raise
    return served


def _wait_for_log(served: Served, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in served.log_text():
        assert served.process.poll() is None, f"kafkaguard serve exited: {served.log_text()[-2000:]}"
        assert time.monotonic() < deadline, f"no {text!r} in the log: {served.log_text()[-2000:]}"
        time.sleep(0.05)  # polling the log, bounded by the deadline


def stop(served: Served) -> None:
    served.process.terminate()
    served.process.wait(20)
    assert "Traceback" not in served.log_text(), served.log_text()[-3000:]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real ``kafkaguard serve`` with the default penalty settings (10 violations per 5 s per address, 1 s)."""
    served = start_serve(tmp_path_factory.mktemp("penalty"))
    try:
        yield served
    finally:
        stop(served)


def send_junk(address: tuple[str, int], source: str) -> bool:
    """One connection from ``source``: ApiVersions (answered only if the connection was admitted), then the junk
    frame; True when the server answered the first and closed the connection for the second (False: refused)."""
    try:
        with Wire(address, timeout=5, source=source) as wire:
            wire.request(ApiVersionsRequest(client_software_name="junk", client_software_version="1"))
            wire.send_frame(JUNK)
            return wire.recv_frame() is None
    except (OSError, AssertionError):
        return False


def logs_in(address: tuple[str, int], source: str, user: str) -> str:
    """An empty string when ``user`` logs in from ``source``, else why not."""
    try:
        with Wire(address, timeout=5, source=source) as wire:
            wire.login(user, f"{user}-secret")
            return ""
    except (OSError, AssertionError) as e:
        return f"{type(e).__name__}: {e}"


def delete_topics(count: int) -> DeleteTopicsRequest:
    zero = uuid.UUID(int=0)
    return DeleteTopicsRequest(
        topics=tuple(DeleteTopicState(name=TopicName(f"t{i}"), topic_id=zero) for i in range(count)),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
    )


def test_a_client_sending_junk_once_a_second_does_not_keep_its_neighbours_out(serve: Served):
    """The finding: behind one NAT address, one client sends a junk frame a second, another logs in every 100 ms.
    On a1dee34 each junk frame refused 127.0.0.5 for a second: almost every login failed."""
    stop_junk = threading.Event()
    sent: list[bool] = []

    def junk_once_a_second() -> None:
        while not stop_junk.is_set():
            sent.append(send_junk(serve.address, "127.0.0.5"))
            stop_junk.wait(1.0)

    junk = threading.Thread(target=junk_once_a_second, daemon=True)
    junk.start()
    failures: list[str] = []
    logins = 0
    try:
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            outcome = logs_in(serve.address, "127.0.0.5", "alice")
            logins += 1
            if outcome:
                failures.append(outcome)
            time.sleep(0.1)
    finally:
        stop_junk.set()
        junk.join(10)
    assert len(sent) >= 5
    assert all(sent), "every junk frame was read and its connection closed (none refused at accept)"
    assert logins >= 20
    assert failures == [], f"{len(failures)} of {logins} logins from the junk sender's address failed: {failures[:3]}"


def test_a_flood_of_junk_from_one_address_is_refused_after_its_allowance_and_escalates(serve: Served):
    """10 violations per 5 s are allowed an address; the next one refuses it, for 1 s, then 2 s …"""
    for _ in range(5):
        assert send_junk(serve.address, "127.0.0.6")
    assert logs_in(serve.address, "127.0.0.6", "alice") == ""  # within its allowance: still served (not on a1dee34)
    read = sum(send_junk(serve.address, "127.0.0.6") for _ in range(30))
    assert 5 <= read <= 6, f"{read} junk frames read after the first five"  # the allowance (a token may refill)
    assert logs_in(serve.address, "127.0.0.6", "alice") != ""  # refused at accept now
    assert logs_in(serve.address, "127.0.0.7", "alice") == ""  # another address is not concerned
    _wait_for_log(serve, "refusing connections from 127.0.0.6 for 1 s (refusal 1 in a row")
    time.sleep(1.1)
    assert send_junk(serve.address, "127.0.0.6")  # the refusal is over; the bucket did not refill meanwhile …
    _wait_for_log(serve, "refusing connections from 127.0.0.6 for 2 s (refusal 2 in a row")  # … so: 2 s
    assert logs_in(serve.address, "127.0.0.6", "alice") != ""


def test_a_logged_in_violator_is_refused_as_its_principal_from_every_address_and_its_neighbours_are_not(serve: Served):
    """bob sends a request of 10,001 items (over max_request_items): bob may not log in for a second, from any
    address; alice, on bob's address, logs in as before. On a1dee34 the address was refused: alice with it, and bob
    logged in again at once from another address."""
    with Wire(serve.address, timeout=30, source="127.0.0.8") as violator:
        violator.login("bob", "bob-secret")
        violator.send_frame(encode_request(delete_topics(10_001), correlation_id=1))
        assert violator.recv_frame() is None  # closed, not answered
    refused = logs_in(serve.address, "127.0.0.9", "bob")
    assert "User:bob may not log in for" in refused  # says why, and what to look up
    assert "protocol_violation_penalty_seconds" in refused
    assert logs_in(serve.address, "127.0.0.8", "alice") == ""  # bob's neighbour
    assert logs_in(serve.address, "127.0.0.8", "carol") == ""
    _wait_for_log(serve, "refusing logins of User:bob for 1 s (refusal 1 in a row; the last from /127.0.0.8")
    time.sleep(1.1)
    assert logs_in(serve.address, "127.0.0.9", "bob") == ""  # the refusal is over
    log = serve.log_text()
    assert "Failed authentication with /127.0.0.9" in log  # the refused login is logged as a failed one
    assert "bob-secret" not in log


def test_ipv6_clients_of_one_64_share_the_per_address_connection_limit(tmp_path: Path):
    """Two addresses of 2001:db8:0:1::/64 relayed by a trusted load balancer (PROXY protocol v2): with
    max_connections_per_ip 1 the second is refused, an address of another /64 is not. On a1dee34 each IPv6 address
    had a limit of its own (2^64 of them per host)."""
    served = start_serve(
        tmp_path, "--proxy-protocol", "required", "--trusted-proxies", "127.0.0.1", "--max-connections-per-ip", "1"
    )
    destination = ("2001:db8::ff", served.port)
    try:
        with Wire(served.address, timeout=5) as first:
            first.send_raw(encode_v2(("2001:db8:0:1::a", 40000), destination))
            first.login("alice", "alice-secret")
            with Wire(served.address, timeout=5) as second:  # the same /64, another address
                second.send_raw(encode_v2(("2001:db8:0:1::b", 40001), destination))
                with pytest.raises((AssertionError, OSError)):
                    second.login("alice", "alice-secret")
            with Wire(served.address, timeout=5) as elsewhere:  # another /64: a limit of its own
                elsewhere.send_raw(encode_v2(("2001:db8:0:2::a", 40002), destination))
                elsewhere.login("alice", "alice-secret")
            _wait_for_log(served, "connection(s) open from this address's block 2001:db8:0:1::/64")
    finally:
        stop(served)
    assert "Refused a connection from /2001:db8:0:1:0:0:0:b" in served.log_text()  # the address, in Java's form


def test_a_real_ipv6_socket_is_counted_by_its_block(tmp_path: Path):
    """On ::1 (the one IPv6 loopback address): the limit is counted, and named, per /64."""
    served = start_serve(tmp_path, "--max-connections-per-ip", "1", listener_host="::1")
    try:
        with Wire(("::1", served.port), timeout=5) as first:
            first.login("alice", "alice-secret")
            with Wire(("::1", served.port), timeout=5) as second, pytest.raises((AssertionError, OSError)):
                second.login("alice", "alice-secret")
            _wait_for_log(served, "connection(s) open from this address's block ::/64")
    finally:
        stop(served)

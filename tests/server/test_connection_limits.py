"""Connection limits: idle connections are closed, connections beyond max_connections are refused while the ones
already open keep working, and (issue 24, finding 3 and the pre-login part of finding 4) no address can take the
server away from the others: per-address, per-listener and creation-rate limits decided at the TCP accept (before
TLS), a deadline to log in, pre-login frames held to what their API needs, and refusals counted and logged once per
address and interval.

The finding tests run a real ``kafkaguard serve`` process and bind client sockets to other loopback addresses
(127.0.0.2 … are loopback on Linux) to be "another client". Each says in its docstring how it failed before.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from kafkaguard.audit.records.refusals import RefusalReason
from kafkaguard.service.quotas import QuotaAlteration, QuotaOp
from tests.actors import ACTOR
from tests.server.test_cli_serve import free_port, wait_until_listening
from tests.serving import ADMIN, ADMIN_PASSWORD, TlsFiles, start_server
from tests.wire import Wire, encode_request, frame

pytestmark = pytest.mark.integration

KAFKAGUARD = Path(sys.executable).with_name("kafkaguard")
PASSWORD = "limits-admin-secret"  # noqa: S105 - a test user's password


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="limits-test", client_software_version="1")


def wait_closed(wire: Wire, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if wire.closed():
            return True
        time.sleep(0.05)
    return False


def test_an_idle_connection_is_closed(tmp_path: Path, tls_files: TlsFiles):
    server = start_server(tmp_path / "data", tls_files, idle_timeout_seconds=0.5)
    try:
        with Wire(server.plaintext) as idle, Wire(server.plaintext) as busy:
            assert idle.request(api_versions()).error_code == 0
            for _ in range(12):  # keep one connection busy past the idle timeout of the other
                assert busy.request(api_versions()).error_code == 0
                time.sleep(0.1)
            assert wait_closed(idle, within=3.0)
            assert busy.request(api_versions()).error_code == 0  # still open: it was never idle that long
            went_idle = time.monotonic()
            # The connection's one deadline timer fired while it was busy and was armed again: idle now, it is closed
            # in its turn, and not before its own idle timeout.
            assert wait_closed(busy, within=3.0)
            assert time.monotonic() - went_idle >= 0.45
    finally:
        server.stop()


def test_connections_beyond_the_limit_are_refused(tmp_path: Path, tls_files: TlsFiles):
    server = start_server(tmp_path / "data", tls_files, max_connections=2)
    try:
        with Wire(server.plaintext) as first, Wire(server.plaintext) as second:
            assert first.request(api_versions()).error_code == 0
            assert second.request(api_versions()).error_code == 0
            with Wire(server.plaintext) as third:
                assert wait_closed(third, within=3.0)
            assert first.request(api_versions()).error_code == 0  # the open ones are unaffected
        # A slot is free again once they close (the server may still count them for a moment: a refused attempt
        # is closed, so each try is a new connection).
        deadline = time.monotonic() + 3.0
        while True:
            with Wire(server.plaintext) as again:
                try:
                    assert again.request(api_versions()).error_code == 0
                    break
                except (ConnectionError, OSError, AssertionError):
                    if time.monotonic() > deadline:
                        raise
            time.sleep(0.1)
    finally:
        server.stop()


# ------------------------------------------------------------------------------------- a real kafkaguard serve


@dataclass
class Served:
    """A ``kafkaguard serve`` process: SASL_PLAINTEXT and SASL_SSL listeners, the console (for ``/metrics``), its log
    in a file (a pipe nobody reads could fill up and stall it)."""

    process: subprocess.Popen[bytes]
    sasl: tuple[str, int]
    sasl_ssl: tuple[str, int]
    http: tuple[str, int]
    log: Path
    tls: ssl.SSLContext

    def log_lines(self, containing: str) -> list[str]:
        return [line for line in self.log.read_text("utf-8", errors="replace").splitlines() if containing in line]

    def refused_total(self) -> dict[tuple[str, str], float]:
        """``kafkaguard_connections_refused_total`` by (listener, reason), from the console's ``/metrics``."""
        with urllib.request.urlopen(f"http://{self.http[0]}:{self.http[1]}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        found = re.findall(r'kafkaguard_connections_refused_total\{listener="([^"]+)",reason="([^"]+)"\} (\S+)', text)
        return {(listener, reason): float(value) for listener, reason, value in found}

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def login(self, *, source: str | None = None, tls: bool = False) -> Wire:
        wire = Wire(self.sasl_ssl if tls else self.sasl, tls=self.tls if tls else None, source=source)
        try:
            wire.login(ADMIN, PASSWORD)
            assert wire.request(api_versions()).error_code == 0
        except BaseException:
            wire.close()
            raise
        return wire


@contextlib.contextmanager
def served(tmp_path: Path, tls_files: TlsFiles, **settings: str) -> Iterator[Served]:
    """``kafkaguard serve`` with ``settings`` as ``KAFKAGUARD_*`` variables (an unknown one is ignored: the tests
    run against the code before the limits existed too)."""
    data_dir = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    subprocess.run([str(KAFKAGUARD), "users", "add", ADMIN, "--password", PASSWORD, "--data-dir", str(data_dir)],
                   check=True, capture_output=True, timeout=60, env=env)  # fmt: skip
    env.update({f"KAFKAGUARD_{name.upper()}": value for name, value in settings.items()})
    sasl, sasl_ssl, http = free_port(), free_port(), free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [str(KAFKAGUARD), "serve", "--data-dir", str(data_dir), "--super-users", f"User:{ADMIN}",
             "--listener", f"SASL_PLAINTEXT://127.0.0.1:{sasl}", "--listener", f"SASL_SSL://127.0.0.1:{sasl_ssl}",
             "--ssl-certfile", str(tls_files.certfile), "--ssl-keyfile", str(tls_files.keyfile),
             "--http-listener", f"127.0.0.1:{http}"],
            stdout=subprocess.DEVNULL, stderr=log_file, env=env,
        )  # fmt: skip
    try:
        for port in (sasl, sasl_ssl, http):
            wait_until_listening(process, port)
        tls = ssl.create_default_context(cafile=str(tls_files.certfile))
        yield Served(process, ("127.0.0.1", sasl), ("127.0.0.1", sasl_ssl), ("127.0.0.1", http), log, tls)
    finally:
        process.terminate()
        process.communicate(timeout=30)
    text = log.read_text("utf-8", errors="replace")
    assert "Traceback" not in text, text[-3000:]


def still_open(sock: socket.socket) -> bool:
    """Whether the server still holds ``sock`` (it sends nothing unasked, so anything but "no data yet" is a close)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def open_idle(address: tuple[str, int], count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` TCP connections from ``source`` that send nothing (the attack of finding 3)."""
    return [socket.create_connection(address, timeout=5, source_address=(source, 0)) for _ in range(count)]


def knock(address: tuple[str, int]) -> None:
    """A connection that sends nothing and waits for the server to close it (a refusal at the accept). Waiting
    matters: closed at once, a knock the server has not accepted yet may never reach its accept queue (when that queue
    is full, as on a loaded machine, Linux drops the client's last handshake packet, and the client's close turns the
    half-open connection into a reset), so the server would never see, nor count, that refusal."""
    with socket.create_connection(address, timeout=10) as sock, contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b"", "a knock over the cap was answered"


def wait_for(condition: object, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


def test_one_address_over_its_cap_locks_out_nobody_else(tmp_path: Path, tls_files: TlsFiles):
    """Finding 3: one address opens more idle connections than the server takes and sends nothing. Before, the cap
    was global only (here 60): every other login, on every listener, was refused until the idle timeout. Now the
    address holds its own 20, another address logs in on both listeners, and the same address logs in again as soon
    as it is within its limit. 260 refusals of that address write one log line for each reason they had (before: a
    line per attempt, and no "Refused a connection" line at all), and ``/metrics`` counts every one. Its 20 idle TLS
    connections count too (before, a connection was counted only once its TLS handshake was done)."""
    settings = {"max_connections": "60", "max_connections_per_ip": "20", "sasl_login_timeout_seconds": "120"}
    with served(tmp_path, tls_files, **settings) as server:
        attacker = open_idle(server.sasl, 60) + open_idle(server.sasl_ssl, 20)  # 60: the global cap
        time.sleep(1.0)  # as in the finding, the server has taken them all before anyone else comes
        try:
            with server.login(source="127.0.0.2"), server.login(source="127.0.0.3", tls=True):
                pass
            assert wait_for(lambda: sum(still_open(s) for s in attacker) == 20, within=5)
            for _ in range(200):  # and keeps knocking
                knock(server.sasl)
            held = [s for s in attacker if still_open(s)]
            assert len(held) == 20
            for sock in held[:5]:
                sock.close()

            def logged_in_again() -> bool:
                try:
                    server.login().close()
                except (AssertionError, OSError):
                    return False
                return True

            assert wait_for(logged_in_again, within=5)  # within its limit again (and its creation rate)
        finally:
            for sock in attacker:
                sock.close()
        # 60 of the first 80, and the 200 knocks (at the cap or too fast; each closed by the server, so each seen).
        assert wait_for(lambda: sum(server.refused_total().values()) >= 260, within=5), server.refused_total()
        refused = server.refused_total()
        listener = f"SASL_PLAINTEXT://127.0.0.1:{server.sasl[1]}"
        assert refused[(listener, "max_connections_per_ip")] >= 20
        lines = server.log_lines("Refused a connection from /127.0.0.1 ")
        assert len(lines) <= 2, lines  # one per reason: max_connections_per_ip, perhaps connection_creation_rate
        assert len([line for line in lines if "[max_connections_per_ip]" in line]) == 1
        assert server.log_lines("Refused a connection from /127.0.0.2") == []


def test_a_client_that_does_not_log_in_is_closed_at_the_deadline(tmp_path: Path, tls_files: TlsFiles):
    """Finding 3's other half: before, a connection that never logged in was held until the idle timeout (600 s),
    and one that kept sending ApiVersions forever. Now a SASL listener's client must log in within
    sasl_login_timeout_seconds (here 1 s) of its TCP accept — silent, chatty, or stuck before its TLS handshake —
    while a logged-in connection stays open."""
    with served(tmp_path, tls_files, sasl_login_timeout_seconds="1") as server:
        silent = open_idle(server.sasl, 1, source="127.0.0.4")[0]
        no_handshake = open_idle(server.sasl_ssl, 1, source="127.0.0.5")[0]  # TCP only, never a ClientHello
        chatty = Wire(server.sasl, source="127.0.0.6")
        logged_in = server.login(source="127.0.0.7")
        started = time.monotonic()
        try:
            closed_at: float | None = None
            while time.monotonic() - started < 6:
                try:
                    chatty.send_frame(encode_request(api_versions(), 1))
                    if chatty.recv_frame() is None:
                        closed_at = time.monotonic() - started
                        break
                except OSError:
                    closed_at = time.monotonic() - started
                    break
                time.sleep(0.2)
            assert closed_at is not None, "a client that never logs in was still served after 6 s"
            assert 0.5 < closed_at < 4
            assert wait_for(lambda: not still_open(silent) and not still_open(no_handshake), within=3)
            assert time.monotonic() - started < 6
            assert logged_in.request(api_versions()).error_code == 0  # idle 1 s and more, but logged in
        finally:
            for sock in (silent, no_handshake):
                sock.close()
            chatty.close()
            logged_in.close()
        refused = server.refused_total()
        assert sum(count for (_, reason), count in refused.items() if reason == "sasl_login_timeout") == 3
        assert len(server.log_lines("[sasl_login_timeout]")) == 3  # one per address


def test_a_512_kib_pre_login_frame_is_refused_without_being_buffered(tmp_path: Path, tls_files: TlsFiles):
    """Finding 4, the pre-login part: before, an unauthenticated client could send frames of up to 512 KiB, and the
    server read each whole (0.2 s of CPU for one of empty tagged fields; 1,000 parked ones held 536 MiB). Now
    ApiVersions before login is held to 1 KiB: the connection is closed once the size and the API key are read, the
    rest never awaited; 200 clients pushing 400 KiB each into such frames leave the server's memory as it was."""
    size = 512 * 1024
    head = struct.pack(">ihhi", size, 18, 3, 1)  # ApiVersions v3, correlation id 1
    with served(tmp_path, tls_files) as server:
        with Wire(server.sasl) as wire:
            wire.send_raw(head + b"\x00" * 100)
            started = time.monotonic()
            assert wire.closed()
            assert time.monotonic() - started < 2
        before = server.rss()
        sources = [f"127.0.0.{n}" for n in range(10, 15)]  # 40 each: within the default creation rate
        parked = [sock for source in sources for sock in open_idle(server.sasl, 40, source)]
        try:
            for sock in parked:
                with contextlib.suppress(OSError):  # the server closes each once it has read 6 bytes
                    sock.sendall(head + b"\x00" * (400 * 1024 - len(head)))
            time.sleep(0.5)
            grown = server.rss() - before
            assert grown < 24 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"  # 200 × 400 KiB would be 78 MiB
            assert not any(still_open(sock) for sock in parked)
        finally:
            for sock in parked:
                sock.close()
        with server.login(source="127.0.0.16"):  # clients that behave are served as ever
            pass
        refused = server.refused_total()
        assert refused[(f"SASL_PLAINTEXT://127.0.0.1:{server.sasl[1]}", "pre_login_frame_size")] == 201


# ------------------------------------------------------------------------------------------ in one process


def test_a_listener_cap_leaves_the_other_listeners_their_connections(tmp_path: Path, tls_files: TlsFiles):
    server = start_server(tmp_path / "data", tls_files, max_connections_per_listener="PLAINTEXT://127.0.0.1:0=2")
    try:
        with Wire(server.plaintext) as first, Wire(server.plaintext) as second:
            assert first.request(api_versions()).error_code == 0
            assert second.request(api_versions()).error_code == 0
            with Wire(server.plaintext) as third:
                assert third.closed()
            with Wire(server.sasl) as other:  # another listener: not this one's cap
                other.login(ADMIN, ADMIN_PASSWORD)
        assert server.services.refusals.total(RefusalReason.MAX_CONNECTIONS_PER_LISTENER) == 1
    finally:
        server.stop()


def test_a_tls_connection_over_the_limit_is_refused_before_its_handshake(tmp_path: Path, tls_files: TlsFiles):
    """Before, limits were checked after asyncio had run the TLS handshake: a connection in its handshake counted for
    nothing, and a refused one had cost the server its public-key work. Now the TCP accept decides: the third
    connection of an address allowed two gets no ServerHello at all."""
    server = start_server(tmp_path / "data", tls_files, max_connections_per_ip_overrides="127.0.0.8:2")
    tls = ssl.create_default_context(cafile=str(tls_files.certfile))
    try:
        with Wire(server.sasl_ssl, tls=tls, source="127.0.0.8") as first, Wire(server.sasl, source="127.0.0.8"):
            first.login(ADMIN, ADMIN_PASSWORD)
            with pytest.raises((ssl.SSLError, OSError)):  # EOF or reset during the handshake
                Wire(server.sasl_ssl, tls=tls, source="127.0.0.8")
            with Wire(server.sasl_ssl, tls=tls, source="127.0.0.9") as other:  # another address
                other.login(ADMIN, ADMIN_PASSWORD)
        listener = "SASL_SSL://127.0.0.1:0"
        assert server.services.refusals.total(RefusalReason.MAX_CONNECTIONS_PER_IP, listener=listener) == 1
    finally:
        server.stop()


def test_connections_are_created_at_most_at_the_rate_of_their_address(tmp_path: Path, tls_files: TlsFiles):
    server = start_server(tmp_path / "data", tls_files, max_connection_creation_rate_per_ip=5.0)
    try:
        wires = [Wire(server.plaintext, source="127.0.0.10") for _ in range(8)]
        answered = 0
        for wire in wires:
            with contextlib.suppress(AssertionError, OSError):
                answered += wire.request(api_versions()).error_code == 0
            wire.close()
        assert answered <= 6  # five at once, perhaps one more refilled meanwhile
        with Wire(server.plaintext, source="127.0.0.11") as other:  # per address
            assert other.request(api_versions()).error_code == 0
        time.sleep(1.0)
        with Wire(server.plaintext, source="127.0.0.10") as later:  # refilled
            assert later.request(api_versions()).error_code == 0
        assert server.services.refusals.total(RefusalReason.CONNECTION_CREATION_RATE) >= 2
    finally:
        server.stop()


def test_a_stored_ip_quota_sets_an_addresses_creation_rate(tmp_path: Path, tls_files: TlsFiles):
    """KIP-612's ``connection_creation_rate`` ip quota, stored through AlterClientQuotas, is enforced: the address
    it names may open 2 connections a second; the others keep the setting's rate."""
    server = start_server(tmp_path / "data", tls_files)
    try:
        entity = (("ip", "127.0.0.12"),)
        op = QuotaOp(key="connection_creation_rate", value=2.0)
        assert server.services.quotas.alter([QuotaAlteration(entity=entity, ops=(op,))], actor=ACTOR)[0].succeeded

        def answered(source: str, count: int) -> int:
            done = 0
            for _ in range(count):
                with Wire(server.plaintext, source=source) as wire, contextlib.suppress(AssertionError, OSError):
                    done += wire.request(api_versions()).error_code == 0
            return done

        assert answered("127.0.0.12", 6) <= 3
        assert answered("127.0.0.13", 6) == 6
    finally:
        server.stop()


def test_a_frame_read_whole_before_login_is_answered(tmp_path: Path, tls_files: TlsFiles):
    """What real clients send before login fits: an ApiVersions of any version with a long client id is answered."""
    server = start_server(tmp_path / "data", tls_files)
    try:
        with Wire(server.sasl) as wire:
            wire.send_raw(frame(encode_request(api_versions(), 3, client_id="c" * 700)))
            assert wire.recv_frame() is not None
            wire.login(ADMIN, ADMIN_PASSWORD)
    finally:
        server.stop()

"""Graceful drain (issue 39) of a real ``kafkaguard serve`` process with its console: on SIGTERM ``/healthz``
answers 503 "draining" first, the Kafka listener then refuses new connections, requests in flight are answered (a
failed login the server holds for ``auth_failure_delay_ms``; a request sent just before the signal), idle connections
are closed, and the process exits 0 within ``shutdown_grace_seconds``; at the deadline what remains is forced closed;
a second SIGTERM ends the drain at once, and the audit trail still has every event.

The slow request is a failed PLAIN login: the server answers it only after ``auth_failure_delay_ms`` (Kafka's delay of
failed authentications), a request a client really sends that keeps the server busy for as long as a test needs.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire, decode_response, encode_request

pytestmark = pytest.mark.integration

ADMIN, ADMIN_PASSWORD = "admin", "drain-admin-pw"
TIMEOUT = 30.0
SASL_AUTHENTICATION_FAILED = 58


@dataclass
class Serve:
    process: subprocess.Popen[bytes]
    port: int
    http_port: int
    log: Path
    audit: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_log(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + TIMEOUT
        while (found := re.search(pattern, self.log_text(), re.M)) is None:
            assert time.monotonic() < deadline, f"no {pattern!r} in the log: {self.log_text()[-3000:]}"
            time.sleep(0.05)  # polling the log, bounded by the deadline
        return found

    def healthz(self) -> tuple[int, dict[str, Any]]:
        """/healthz's status code and body."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/healthz", timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def exit_code(self) -> int:
        return self.process.wait(TIMEOUT)


def start_serve(tmp_path: Path, **settings: Any) -> Serve:
    port, http_port = free_port(), free_port()
    config: dict[str, Any] = {
        "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"],
        "http_listener": f"127.0.0.1:{http_port}",
        "data_dir": str(tmp_path / "data"),
        "admin_user": ADMIN,
        "admin_password": ADMIN_PASSWORD,
        "sasl_mechanisms": ["SCRAM-SHA-256", "PLAIN"],
        "sasl_plain_without_tls": True,
        "audit_log": str(tmp_path / "audit.log"),
        "log_level": "INFO",
        **settings,
    }
    path = tmp_path / "kafkaguard.yaml"
    path.write_text(json.dumps(config))
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(KAFKAGUARD), "serve", "--config", str(path)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
    wait_until_listening(process, port)
    wait_until_listening(process, http_port)
    return Serve(process, port, http_port, log, tmp_path / "audit.log")


@pytest.fixture
def serve_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Serve] = []

    def start(**settings: Any) -> Serve:
        serve = start_serve(tmp_path, **settings)
        started.append(serve)
        return serve

    yield start
    for serve in started:
        if serve.process.poll() is None:
            serve.process.kill()
            serve.process.wait(TIMEOUT)
        assert "Traceback" not in serve.log_text(), serve.log_text()[-3000:]


def slow_login(serve: Serve, user: str) -> Wire:
    """A connection whose failed PLAIN login is in flight (sent, its answer held by ``auth_failure_delay_ms``)."""
    wire = Wire(("127.0.0.1", serve.port), timeout=TIMEOUT)
    assert wire.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    wire.send_frame(encode_request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0wrong".encode()), 99))
    return wire


def answer_to_slow_login(wire: Wire) -> int | None:
    """The error code of the slow login's answer, or None when the connection closed without one."""
    payload = wire.recv_frame()
    if payload is None:
        return None
    correlation_id, body = decode_response(payload, SaslAuthenticateRequest.__api_key__, 2)
    assert correlation_id == 99
    return int(body.error_code.value)


def answered_yet(wire: Wire) -> bool:
    """Whether anything (an answer, or the end of the stream) has come on ``wire``; nothing is read."""
    ready, _, _ = select.select([wire.sock], [], [], 0)
    return bool(ready)


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return False
    except ConnectionRefusedError:
        return True


def audit_failures(serve: Serve) -> list[str]:
    """The attempted names of the failed logins in the audit trail."""
    events = [json.loads(line) for line in serve.audit.read_text("utf-8").splitlines() if line.strip()]
    return [e["data"].get("attempted_name") for e in events
            if e.get("type") == "io.kafkaguard.authentication.v1" and e["data"]["result"] == "FAILURE"]  # fmt: skip


def test_sigterm_drains_answers_in_flight_closes_idle_refuses_new_and_exits_in_the_grace(serve_factory: Any) -> None:
    grace = 20.0
    serve: Serve = serve_factory(shutdown_grace_seconds=grace, auth_failure_delay_ms=4000)
    status, body = serve.healthz()
    assert (status, body["status"]) == (200, "ok")
    idle = Wire(("127.0.0.1", serve.port), timeout=TIMEOUT)
    idle.login(ADMIN, ADMIN_PASSWORD)
    slow = slow_login(serve, "slowpoke")
    last_moment = Wire(("127.0.0.1", serve.port), timeout=TIMEOUT)
    hello = ApiVersionsRequest(client_software_name="drain-test", client_software_version="1")
    last_moment.send_frame(encode_request(hello, 7))  # sent just before the signal: it is answered

    signalled = time.monotonic()
    serve.process.send_signal(signal.SIGTERM)

    payload = last_moment.recv_frame()
    assert payload is not None, "the request sent just before SIGTERM got no answer"
    assert decode_response(payload, hello.__api_key__, 3)[0] == 7
    assert last_moment.recv_frame() is None  # then its connection ends: nothing else had arrived
    assert idle.closed()  # the idle connection is closed by the drain, before the slow answer comes:
    assert not answered_yet(slow), "the idle connection stayed open until the slow request was answered"
    deadline = time.monotonic() + TIMEOUT
    while (health := serve.healthz())[0] != 503:
        assert time.monotonic() < deadline, f"/healthz never turned 503: {health}"
        time.sleep(0.05)  # polling, bounded by the deadline
    assert health[1]["status"] == "draining"
    while not refused(serve.port):
        assert time.monotonic() < deadline, "the Kafka listener still accepts during the drain"
        time.sleep(0.05)  # polling, bounded by the deadline
    # the console still answers (503) with the Kafka listener closed: it drains after the Kafka connections
    assert serve.healthz()[0] == 503 and serve.process.poll() is None

    assert answer_to_slow_login(slow) == SASL_AUTHENTICATION_FAILED  # the request in flight is answered
    assert slow.recv_frame() is None  # and then the connection is closed, at the request boundary
    assert serve.exit_code() == 0
    assert time.monotonic() - signalled < grace

    text = serve.log_text()
    ready, closed = text.index("draining: /healthz answers 503"), text.index("draining: stopped accepting on")
    assert ready < closed  # not-ready before the listener stops
    assert re.search(r"drained in [\d.]+ s: 3 connections closed at a request boundary, 0 forced closed", text)
    assert "slowpoke" in audit_failures(serve)  # the audit trail is flushed at the exit
    for wire in (idle, slow, last_moment):
        wire.close()


def test_what_is_still_open_at_the_deadline_is_forced_closed(serve_factory: Any) -> None:
    serve: Serve = serve_factory(shutdown_grace_seconds=1.5, auth_failure_delay_ms=60_000)
    slow = slow_login(serve, "too-slow")
    serve.wait_for_log(r"Failed authentication")  # the login failed; its answer waits 60 s
    signalled = time.monotonic()
    serve.process.send_signal(signal.SIGTERM)
    assert answer_to_slow_login(slow) is None  # closed without its answer: the grace ran out first
    assert serve.exit_code() == 0
    assert time.monotonic() - signalled < 30  # the grace, not the 60 s delay, ended it
    assert re.search(r"0 connections closed at a request boundary, 1 forced closed at the deadline "
                     r"\(shutdown_grace_seconds 1\.5\)", serve.log_text())  # fmt: skip
    assert "too-slow" in audit_failures(serve)
    slow.close()


def test_a_second_sigterm_during_the_drain_stops_at_once(serve_factory: Any) -> None:
    serve: Serve = serve_factory(shutdown_grace_seconds=120, auth_failure_delay_ms=60_000)
    slow = slow_login(serve, "impatient")
    serve.wait_for_log(r"Failed authentication")
    serve.process.send_signal(signal.SIGTERM)
    serve.wait_for_log(r"draining: stopped accepting on")
    assert serve.process.poll() is None  # draining: the slow login holds it (up to 120 s)
    again = time.monotonic()
    serve.process.send_signal(signal.SIGTERM)
    assert serve.exit_code() == 0
    assert time.monotonic() - again < 30  # at once, not after the 60 s delay or the 120 s grace
    assert answer_to_slow_login(slow) is None
    text = serve.log_text()
    assert "SIGTERM again during the shutdown: stopping at once" in text
    assert re.search(r"1 forced closed at a second stop signal", text)
    assert "impatient" in audit_failures(serve)  # the trail is flushed all the same
    slow.close()


def test_the_grace_must_be_positive(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    done = subprocess.run([str(KAFKAGUARD), "serve", "--data-dir", str(tmp_path), "--shutdown-grace-seconds", "0"],
                          capture_output=True, timeout=60, env=env, check=False)  # fmt: skip
    assert done.returncode == 2
    assert b"shutdown_grace_seconds" in done.stderr and b"is not above 0" in done.stderr
    env["KAFKAGUARD_SHUTDOWN_GRACE_SECONDS"] = "-1"
    done = subprocess.run([str(KAFKAGUARD), "serve", "--data-dir", str(tmp_path)],
                          capture_output=True, timeout=60, env=env, check=False)  # fmt: skip
    assert done.returncode == 2 and b"shutdown_grace_seconds" in done.stderr

"""A real ``kafkaguard serve`` says at start what each listener offers and warns of what it withholds (PLAIN without
TLS: a newcomer saw only "Unsupported SASL mechanism"); the refused handshake says why in the server's log; and a
client failing its login again and again writes one line and a count, not one line per attempt (issue 40)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.server.test_cli_serve import KAFKAGUARD, free_port, wait_until_listening
from tests.wire import Wire

pytestmark = pytest.mark.integration


def test_the_start_says_what_each_listener_offers_and_repeated_failures_collapse(tmp_path: Path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    data_dir = tmp_path / "data"
    added = subprocess.run([str(KAFKAGUARD), "users", "add", "admin", "--password", "right-secret", "--data-dir",
                            str(data_dir)], capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert added.returncode == 0, added.stderr
    port = free_port()
    config = tmp_path / "kafkaguard.yaml"
    config.write_text(
        f"listeners: ['SASL_PLAINTEXT://127.0.0.1:{port}']\n"
        f"data_dir: {data_dir}\n"
        "sasl_mechanisms: [SCRAM-SHA-256, PLAIN]\n"
        "super_users: 'User:admin'\n"
        "auth_failure_delay_ms: 0\n"
        "login_failures_per_address_burst: 1000\n"
        "login_failures_per_user_burst: 1000\n"
    )
    process = subprocess.Popen([str(KAFKAGUARD), "serve", "--config", str(config)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until_listening(process, port, timeout=120)  # a loaded machine starts it slowly
        plain = AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "right-secret",
            }
        )
        with pytest.raises(KafkaException):
            plain.list_topics(timeout=3)
        attempts = 12
        for _ in range(attempts):
            with Wire(("127.0.0.1", port)) as wire, pytest.raises(AssertionError):
                wire.login("admin", "wrong-secret")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err.decode()
    log = err.decode()
    assert f"listening on SASL_PLAINTEXT://127.0.0.1:{port}: SASL SCRAM-SHA-256\n" in log
    assert (
        f"PLAIN is in sasl_mechanisms but not offered on SASL_PLAINTEXT://127.0.0.1:{port}: it sends the password "
        "in clear and this listener has no TLS" in log
    )
    assert "SASL handshake from /127.0.0.1 refused: PLAIN is in sasl_mechanisms but not offered" in log
    failed = [line for line in log.splitlines() if "Failed authentication with /127.0.0.1" in line]
    assert len(failed) == 2, failed  # the first, and its count at shutdown
    assert "[repeated" not in failed[0]
    assert f"[repeated {attempts - 1} more times in" in failed[1]

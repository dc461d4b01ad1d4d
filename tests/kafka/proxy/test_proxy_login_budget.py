"""The failure budget on a real ``kafkaguard proxy`` process in front of the real broker (issue 36): the proxy's
bootstrap port and its per-broker ports draw from one budget per address, since a client logs in on each of them.

Fails on the code before (a1dee34): SCRAM logins had no budget, on any port.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.kafka.broker import ADMIN, ADMIN_PASSWORD, KafkaBroker
from tests.kafka.proxy.conftest import free_port_range
from tests.server.test_cli_serve import KAFKAGUARD, wait_until_listening
from tests.server.test_login_budgets import ADDRESS_BURST, THROTTLED, WRONG, Serve, regained, scram, spend

NODE_ID = 1  # the test broker's: the proxy serves it on its listener port + 1 + NODE_ID


def test_guesses_on_the_bootstrap_and_the_broker_port_spend_one_address_budget(kafka: KafkaBroker, tmp_path: Path):
    data_dir = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAGUARD_")}
    subprocess.run([str(KAFKAGUARD), "users", "add", "alice", "--password", "alice-secret", "--data-dir",
                    str(data_dir)], check=True, capture_output=True, timeout=60, env=env)  # fmt: skip
    port = free_port_range()
    log = tmp_path / "proxy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(KAFKAGUARD), "proxy", "--data-dir", str(data_dir), "--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}",
             "--upstream", kafka.bootstrap, "--upstream-security-protocol", "SASL_PLAINTEXT", "--upstream-user", ADMIN,
             "--log-level", "INFO"],
            stdout=out, stderr=subprocess.STDOUT, env={**env, "KAFKAGUARD_UPSTREAM_PASSWORD": ADMIN_PASSWORD},
        )  # fmt: skip
    try:
        wait_until_listening(process, port)
        wait_until_listening(process, port + 1 + NODE_ID)
        bootstrap = Serve(process, port, 0, log)
        broker = Serve(process, port + 1 + NODE_ID, 0, log)
        names = iter(f"nobody-{number}" for number in range(200))

        def guess(number: int) -> str | None:  # alternately on the two ports
            return scram(broker if number % 2 else bootstrap, "127.0.9.1", next(names), WRONG)[1]

        checked, refusal, seconds = spend(guess)
        assert ADDRESS_BURST <= checked <= ADDRESS_BURST + regained(seconds, 30)
        assert THROTTLED.match(refusal) and "from 127.0.9.1" in refusal
        assert scram(broker, "127.0.9.2", "alice", "alice-secret") == (0, None)  # another address: logged in
        assert scram(bootstrap, "127.0.9.2", "alice", "alice-secret") == (0, None)
    finally:
        process.terminate()
        process.wait(20)
    assert "Traceback" not in log.read_text(errors="replace")

"""ConnectionRefusals: every refusal counted per (listener, reason); one log line per address, reason and interval,
at most ``max_lines`` addresses an interval, the rest summed into one line."""

from __future__ import annotations

import logging
import threading

import pytest

from kafkaguard.audit.records.refusals import ConnectionRefusals, RefusalKey, RefusalReason

SASL = "SASL_PLAINTEXT://0.0.0.0:9092"
SSL = "SASL_SSL://0.0.0.0:9093"
PER_IP = RefusalReason.MAX_CONNECTIONS_PER_IP
RATE = RefusalReason.CONNECTION_CREATION_RATE


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kafkaguard.audit.records.refusals"]


def test_counts_per_listener_and_reason():
    refusals = ConnectionRefusals()
    refusals.record(SASL, PER_IP, "10.0.0.7", "full")
    refusals.record(SASL, PER_IP, "10.0.0.8", "full")
    refusals.record(SSL, RATE, "10.0.0.7", "fast")
    assert refusals.counts() == {
        RefusalKey(SASL, "max_connections_per_ip"): 2,
        RefusalKey(SSL, "connection_creation_rate"): 1,
    }
    assert (refusals.total(), refusals.total(PER_IP), refusals.total(listener=SSL)) == (3, 2, 1)
    refusals.counts().clear()  # a copy
    assert refusals.total() == 3
    assert repr(refusals) == "ConnectionRefusals(total=3)"


def test_ten_thousand_refusals_of_one_address_write_one_line_then_one_summary(caplog: pytest.LogCaptureFixture):
    clock = Clock()
    refusals = ConnectionRefusals(interval_seconds=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.records.refusals"):
        for _ in range(10_000):
            refusals.record(SASL, PER_IP, "10.0.0.7", "500 connection(s) open from this address")
            clock.now += 0.003  # 30 s in all
        assert len(lines(caplog)) == 1
        (first,) = lines(caplog)
        assert first.startswith(
            "Refused a connection from /10.0.0.7 on SASL_PLAINTEXT://0.0.0.0:9092 [max_connections_"
        )
        assert "500 connection(s) open from this address" in first
        clock.now = 75.0
        refusals.record(SASL, PER_IP, "10.0.0.7", "again")
    summary, again = lines(caplog)[1:]
    assert summary.startswith("9999 more refused connection(s) in the last 60 s were not logged one by one")
    assert "max_connections_per_ip 9999" in summary
    assert "Refused a connection from /10.0.0.7" in again
    assert refusals.total() == 10_001


def test_a_flood_from_many_addresses_writes_at_most_max_lines_an_interval(caplog: pytest.LogCaptureFixture):
    clock = Clock()
    refusals = ConnectionRefusals(interval_seconds=60, max_lines=5, clock=clock)
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.records.refusals"):
        for n in range(1000):
            refusals.record(SASL, PER_IP if n % 2 else RATE, f"10.0.{n // 256}.{n % 256}", "refused")
        assert len(lines(caplog)) == 5
        refusals.flush()  # at stop: what went unlogged is summed
        refusals.flush()  # and only once
    assert len(lines(caplog)) == 6
    assert "connection_creation_rate 497, max_connections_per_ip 498" in lines(caplog)[-1]
    assert refusals.total() == 1000


def test_one_address_refused_for_two_reasons_gets_a_line_for_each(caplog: pytest.LogCaptureFixture):
    refusals = ConnectionRefusals(clock=Clock())
    with caplog.at_level(logging.WARNING, logger="kafkaguard.audit.records.refusals"):
        for _ in range(3):
            refusals.record(SASL, PER_IP, "10.0.0.7", "full")
            refusals.record(SASL, RefusalReason.SASL_LOGIN_TIMEOUT, "10.0.0.7", "slow")
    assert [line.split("[")[1].split("]")[0] for line in lines(caplog)] == ["max_connections_per_ip",
                                                                           "sasl_login_timeout"]  # fmt: skip


def test_counting_from_many_threads_loses_nothing():
    refusals = ConnectionRefusals()

    def refuse() -> None:
        for _ in range(2000):
            refusals.record(SASL, PER_IP, "10.0.0.7", "full")

    threads = [threading.Thread(target=refuse) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert refusals.total(PER_IP) == 16_000

"""LoginStatistics: counts per (listener, mechanism, result), totals, and counting from many threads at once."""

from __future__ import annotations

import threading

from kafkaguard.audit.records.logins import LoginKey, LoginResult, LoginStatistics

SASL = "SASL_PLAINTEXT://127.0.0.1:9092"
SSL = "SASL_SSL://0.0.0.0:9093"


def test_counts_are_kept_per_listener_mechanism_and_result() -> None:
    logins = LoginStatistics()
    assert (logins.counts(), logins.ok, logins.failed) == ({}, 0, 0)
    logins.record(SASL, "SCRAM-SHA-256", succeeded=False)
    logins.record(SASL, "SCRAM-SHA-256", succeeded=False)
    logins.record(SASL, "SCRAM-SHA-512", succeeded=True)
    logins.record(SSL, "SCRAM-SHA-256", succeeded=True)
    logins.record("console", "basic", succeeded=False)
    assert logins.counts() == {
        LoginKey(SASL, "SCRAM-SHA-256", "failed"): 2,
        LoginKey(SASL, "SCRAM-SHA-512", "ok"): 1,
        LoginKey(SSL, "SCRAM-SHA-256", "ok"): 1,
        LoginKey("console", "basic", "failed"): 1,
    }
    assert list(logins.counts()) == sorted(logins.counts())
    assert (logins.ok, logins.failed) == (2, 3)
    assert logins.total(LoginResult.FAILED, listener=SASL) == 2
    assert logins.total(LoginResult.OK, mechanism="SCRAM-SHA-256") == 1
    assert logins.total(LoginResult.OK, listener=SASL, mechanism="SCRAM-SHA-256") == 0
    assert repr(logins) == "LoginStatistics(ok=2, failed=3)"


def test_a_copy_is_returned_never_the_live_counts() -> None:
    logins = LoginStatistics()
    logins.record(SASL, "SCRAM-SHA-256", succeeded=True)
    counts = logins.counts()
    counts.clear()
    assert logins.ok == 1


def test_no_count_is_lost_when_many_threads_record_at_once() -> None:
    logins = LoginStatistics()
    start = threading.Barrier(8)

    def record(index: int) -> None:
        start.wait()
        for n in range(2000):
            logins.record(SASL, "SCRAM-SHA-256" if index % 2 else "SCRAM-SHA-512", succeeded=n % 4 == 0)

    threads = [threading.Thread(target=record, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (logins.ok, logins.failed) == (8 * 500, 8 * 1500)
    assert logins.total(LoginResult.FAILED, mechanism="SCRAM-SHA-512") == 4 * 1500

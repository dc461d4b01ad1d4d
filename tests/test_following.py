"""following: a poll that keeps failing is logged when it starts, then with back-off (60 s, 120 s, … up to an
hour), with the number of failed attempts, and once when it works again; an unexpected error's traceback once."""

from __future__ import annotations

import logging

import pytest

from kafkaguard.following import FIRST_REPEAT_SECONDS, MAX_REPEAT_SECONDS, FailureLog
from kafkaguard.store import StoreUnavailableError


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kafkaguard.following"]


def test_a_failing_poll_is_logged_with_back_off_and_when_it_recovers(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="kafkaguard.following")
    now = [0.0]
    failures = FailureLog("ACLs", clock=lambda: now[0])
    error = StoreUnavailableError("connection refused")
    for _ in range(200):  # 100 s of polls every 0.5 s
        failures.failed(error, expected=True)
        now[0] += 0.5
    got = lines(caplog)
    assert len(got) == 2  # the start, and once after 60 s
    assert got[0] == "syncing ACLs from the store failed, keeping the last snapshot: connection refused"
    assert "still fails (121 attempts)" in got[1]
    caplog.clear()
    for _ in range(7200):  # 10 hours more, a poll every 5 s: after 120 s, 240 s, … then hourly
        failures.failed(error, expected=True)
        now[0] += 5
    gaps = len(lines(caplog))
    assert 10 <= gaps <= 16, gaps  # 120+240+480+960+1920+3600 s, then one an hour
    caplog.clear()
    failures.worked()
    assert failures.failing is False
    assert lines(caplog) == [f"syncing ACLs from the store works again (after {200 + 7200} failed attempts)"]
    assert MAX_REPEAT_SECONDS >= FIRST_REPEAT_SECONDS


def test_an_unexpected_error_gets_its_traceback_once(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="kafkaguard.following")
    failures = FailureLog("topics", clock=lambda: 0.0)
    for _ in range(50):
        try:
            raise ValueError("a corrupt row")
        except ValueError as e:
            failures.failed(e, expected=False)
    records = [r for r in caplog.records if r.name == "kafkaguard.following"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None and records[0].exc_info[0] is ValueError
    assert failures.failing


def test_a_new_failure_after_recovery_is_logged_again(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="kafkaguard.following")
    failures = FailureLog("SCRAM credentials", clock=lambda: 0.0)
    failures.failed(StoreUnavailableError("down"), expected=True)
    failures.worked()
    failures.failed(StoreUnavailableError("down again"), expected=True)
    assert [line.split(":")[-1].strip() for line in lines(caplog)] == [
        "down",
        "syncing SCRAM credentials from the store works again (after 1 failed attempts)",
        "down again",
    ]

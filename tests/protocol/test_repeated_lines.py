"""Repeated failure lines collapse per text (address and reason) into one line and a count (issue 40: ~900 lines in
20 s from two misconfigured clients), and no count is lost: reported when the window passes or at ``flush``."""

from __future__ import annotations

import logging

from kafkaguard.protocol.repeated_lines import COLLAPSE, RepeatedLines


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def setup(window: float = 60.0, max_keys: int = 100) -> tuple[logging.Logger, list[str], RepeatedLines, Clock]:
    lines: list[str] = []
    clock = Clock()

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    repeated = RepeatedLines(handler.handle, window=window, max_keys=max_keys, clock=clock)
    handler.addFilter(repeated)
    logger = logging.getLogger(f"test.repeated.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger, lines, repeated, clock


def test_a_run_of_the_same_failure_is_one_line_and_its_count_when_the_window_passes() -> None:
    log, lines, _, clock = setup()
    for _ in range(450):
        log.info("Failed authentication with /%s: %s", "10.0.0.7", "certificate required", extra=COLLAPSE)
        clock.now += 0.05
    assert lines == ["Failed authentication with /10.0.0.7: certificate required"]
    clock.now += 60
    log.info("Failed authentication with /%s: %s", "10.0.0.7", "certificate required", extra=COLLAPSE)
    assert lines[1:] == [
        "Failed authentication with /10.0.0.7: certificate required [repeated 449 more times in 22 s]",
        "Failed authentication with /10.0.0.7: certificate required",
    ]


def test_each_address_and_reason_is_its_own_run() -> None:
    log, lines, repeated, _ = setup()
    for _ in range(3):
        log.info("Failed authentication with /10.0.0.7: wrong password", extra=COLLAPSE)
        log.info("Failed authentication with /10.0.0.8: wrong password", extra=COLLAPSE)
        log.info("Failed authentication with /10.0.0.7: unknown user", extra=COLLAPSE)
    assert len(lines) == 3
    repeated.flush()  # the process stops: every count is written
    assert sorted(lines[3:]) == [
        "Failed authentication with /10.0.0.7: unknown user [repeated 2 more times in 0 s]",
        "Failed authentication with /10.0.0.7: wrong password [repeated 2 more times in 0 s]",
        "Failed authentication with /10.0.0.8: wrong password [repeated 2 more times in 0 s]",
    ]


def test_lines_not_marked_pass_as_they_are() -> None:
    log, lines, repeated, _ = setup()
    for _ in range(3):
        log.info("listening on SASL_PLAINTEXT://127.0.0.1:9092")
    repeated.flush()
    assert lines == ["listening on SASL_PLAINTEXT://127.0.0.1:9092"] * 3


def test_a_flood_of_distinct_addresses_keeps_the_runs_bounded_and_reports_the_oldest() -> None:
    log, lines, repeated, clock = setup(max_keys=10)
    for address in range(30):
        log.info("Failed authentication with /10.0.1.%d: wrong password", address, extra=COLLAPSE)
        log.info("Failed authentication with /10.0.1.%d: wrong password", address, extra=COLLAPSE)
        clock.now += 0.001
    assert len(repeated._runs) <= 10
    # 30 first lines, and every address's one repeat reported: 20 evicted early, 10 at flush
    repeated.flush()
    assert len(lines) == 60
    assert sum("[repeated 1 more time in" in line for line in lines) == 30

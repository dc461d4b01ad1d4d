"""Shared test configuration: hypothesis profiles (``ci`` is derandomized, so every run checks the same cases), and
the running-server fixtures of ``tests.serving`` (``tls_files``, ``server``), which the tests of ``protocol``,
``node`` and ``server`` all use, and the session's KDC of ``tests.kerberos`` (``kdc``, started only when a test asks
for it)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.kafka.broker import kafka_source
from tests.kerberos import kdc
from tests.serving import server, tls_files

__all__ = ["kdc", "server", "tls_files"]  # fixtures: visible to every test module

settings.register_profile("ci", derandomize=True, max_examples=200, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile("nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One visible line when the real-Kafka suite did not run (docs/development.md: how to enable it)."""
    if kafka_source() is None:
        terminalreporter.write_line(
            "real-Kafka tests (tests/kafka) did NOT run: set KAFKA_TGZ=../shared/kafka/kafka_2.13-3.9.0-offline.tar.gz "
            "(or KAFKA_HOME) to run them",
            yellow=True,
            bold=True,
        )

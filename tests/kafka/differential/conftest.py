"""Targets for the differential suite: the session's real Kafka broker and one kafkaguard server per module, both
with ``User:admin`` as super user; a ``token`` per test isolates resource and user names on the shared broker.
The terminal summary reports how many steps were compared and how many differences were documented ones."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests import serving as guard_conftest
from tests.kafka import broker
from tests.kafka.broker import KafkaBroker
from tests.kafka.differential.runner import TALLY, Pair, Target
from tests.serving import ServerHandle, sasl_server


@pytest.fixture(scope="module")
def guard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with sasl_server(tmp_path_factory.mktemp("kafkaguard-differential")) as handle:
        yield handle


@pytest.fixture(scope="module")
def targets(kafka: KafkaBroker, guard_server: ServerHandle) -> tuple[Target, Target]:
    host, port = kafka.bootstrap.split(":")
    return (
        Target("kafka", (host, int(port)), broker.ADMIN, broker.ADMIN_PASSWORD),
        Target("kafkaguard", guard_server.sasl, guard_conftest.ADMIN, guard_conftest.ADMIN_PASSWORD),
    )


@pytest.fixture
def token() -> str:
    return f"dt{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(targets: tuple[Target, Target], token: str) -> Iterator[Pair]:
    """The super user's connections to both targets."""
    kafka, guard = targets
    connected = Pair(kafka, guard, kafka.admin, kafka.admin_password, token)
    try:
        yield connected
    finally:
        connected.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.steps:
        terminalreporter.write_line(TALLY.summary(), green=not TALLY.undocumented, red=bool(TALLY.undocumented))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """An undocumented difference fails the run even when DIFFERENTIAL_KEEP_GOING let its test go on."""
    if TALLY.undocumented and exitstatus == 0:
        session.exitstatus = 1

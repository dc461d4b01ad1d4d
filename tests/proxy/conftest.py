"""Fixtures of the proxy's unit tests (``memory_upstream``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.bootstrap import Services
from tests.proxy.memory_upstream import memory_services


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """Real services over a store in a temporary directory, closed after the test."""
    built = memory_services(tmp_path / "data")
    yield built
    built.close()

"""One local SparkSession for the whole test run (local[2], 2 shuffle partitions, UI off)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from kafkaguard.pipeline.session import start_spark

    session = start_spark(
        "kafkaguard-tests",
        master="local[2]",
        config={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
        },
    )
    yield session
    session.stop()

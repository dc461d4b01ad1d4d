"""``benchmarks/bench_logins --workers-phase``'s pieces (``benchmarks.workers_phase``): a ``proxy --workers 2``
target is up only once both workers listen, its CPU is metered over the supervisor and both workers, the pipelined
load keeps its requests in flight and drains, and the report lands in its own section of a scratch copy of
docs/benchmarks.md, the rest of the file untouched. Nothing here is timed."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks.bench_logins import Plan
from benchmarks.bench_proxy import process_tree
from benchmarks.bench_server import CLIENT_ID, CachedScramClient, api_versions_request
from benchmarks.workers_phase import (
    DEPTH,
    LOGINS,
    PIPELINED,
    Window,
    WorkersOutcome,
    WorkersTarget,
    listeners_on,
    model_rate,
    open_pipelined,
    render,
    start_proxy,
    tree_cpu,
)
from tests.kafka.broker import KafkaBroker
from tests.wire import encode_request, frame

SECTION = "workers-issue-39"


@pytest.fixture(scope="module")
def two_workers(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkersTarget]:
    target = start_proxy(2, tmp_path_factory.mktemp("workers"), kafka)
    try:
        yield target
    finally:
        target.process.stop()


def test_a_two_worker_proxy_is_up_with_both_workers_listening(two_workers: WorkersTarget):
    assert listeners_on(two_workers.port) == 2  # one listening socket per worker (SO_REUSEPORT)
    tree = process_tree(two_workers.process.pid)
    assert len(tree) == 3  # the supervisor and its two workers
    assert set(tree_cpu(two_workers.process.pid)) == set(tree)


def test_the_pipelined_load_keeps_its_requests_in_flight_and_drains(two_workers: WorkersTarget):
    async def load() -> list[int]:
        conns = await open_pipelined(two_workers.port, CachedScramClient(), 4)
        request = frame(encode_request(api_versions_request(), 1, CLIENT_ID))
        try:
            for conn in conns:
                conn.start(request, DEPTH)
            await asyncio.sleep(0.5)
            await asyncio.gather(*(conn.drain(30.0) for conn in conns))
            assert not any(conn.lost.done() for conn in conns)  # the proxy took duplicate correlation ids
            return [conn.answered for conn in conns]
        finally:
            for conn in conns:
                conn.close()

    answered = asyncio.run(load())
    assert all(count > DEPTH for count in answered)  # answers came back and each was replaced by a new request


def _window(workload: str, workers: int, round_: int, count: int) -> Window:
    per_process = {100: 0.9} if workers == 1 else {200: 0.01, 201: 0.7, 202: 0.8}
    return Window(workload, workers, round_, count, 2.0, sum(per_process.values()), per_process, 0.3, 0.02, 1.9)


def test_the_report_is_written_into_its_section_of_a_scratch_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tracked = report.DOC.read_bytes()
    scratch = tmp_path / "benchmarks.md"
    shutil.copy(report.DOC, scratch)
    monkeypatch.setattr(report, "DOC", scratch)
    outcome = WorkersOutcome(Plan(False, 2, 2.0, 0.3, 1.0), {1: 100, 2: 200}, quiet=[0.05, 0.01])
    for round_ in range(2):
        for workload, count in ((PIPELINED, 30_000), (LOGINS, 1_500)):
            outcome.windows += [_window(workload, 1, round_, count), _window(workload, 2, round_, 2 * count)]
    markdown = render(outcome, 2.0)

    report.write_section(SECTION, markdown)
    report.write_section(SECTION, markdown)  # again: replaced in place, not appended

    text = scratch.read_text()
    assert text.count(f"<!-- begin {SECTION} -->") == 1
    before, rest = text.split(f"<!-- begin {SECTION} -->")
    section, after = rest.split(f"<!-- end {SECTION} -->")
    original = tracked.decode()
    assert original.startswith(before)
    assert original.endswith(after)
    assert "| pipelined ApiVersions (proxy-bound) | 15,000 | 30,000 | **2.00×** | 2.00, 2.00 |" in section
    assert "| 47% |" in section  # the least-loaded worker's share: 0.7 of 1.5
    assert "Not measured yet" not in section
    assert (Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md").read_bytes() == tracked


def test_the_cost_model_bounds_a_second_worker_by_the_shared_cores():
    # the proxy at 0.05 ms a request, the generator at 0.025, the broker idle, two cores: 2 ÷ 0.075 ms, not 2 ÷ 0.05
    assert model_rate(1, 50e-6, 25e-6, 0.0, 2.0) == pytest.approx(20_000)
    assert model_rate(2, 50e-6, 25e-6, 0.0, 2.0) == pytest.approx(26_667, rel=1e-3)
    # logins: the generator's cost about the proxy's, so a second worker gains nothing here
    assert model_rate(2, 0.6e-3, 0.6e-3, 0.0, 2.0) == pytest.approx(model_rate(1, 0.6e-3, 0.6e-3, 0.0, 2.0))

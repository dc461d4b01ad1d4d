"""``kafkaguard audit collect``'s pure half: file names, the range planner's invariants, envelope → row, and the
durable write's listing (resume points, temporary files) on a real local directory."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaguard.pipeline import collect_files
from kafkaguard.pipeline.collect_plan import (
    COLUMNS,
    FileRange,
    RangePlanner,
    RepeatWindow,
    check_topic,
    event_key,
    overlaps,
    parse_file_name,
    resume_offsets,
    row_day,
    to_row,
)
from kafkaguard.pipeline.errors import PipelineError

DAY = date(2025, 3, 14)
T0 = datetime(2025, 3, 14, 23, 59, 58, tzinfo=UTC)


def envelope(i: int, when: datetime = T0, category: str = "authorization", **data: object) -> bytes:
    body = {
        "version": 2,
        "time": when.isoformat().replace("+00:00", "Z"),
        "principal": f"User:u{i % 3}",
        "host": "10.0.0.1",
        "api": "Fetch",
        "operation": "READ",
        "resource_type": "TOPIC",
        "pattern_type": "LITERAL",
        "resource_name": f"t{i % 5}",
        "decision": "ALLOWED",
        "rule": None,
        **data,
    }
    event = {
        "specversion": "1.0",
        "id": f"id-{i}",
        "source": "kafkaguard://n1",
        "type": f"io.kafkaguard.{category}.v2",
        "time": body["time"],
        "subject": "TOPIC:t",
        "datacontenttype": "application/json",
        "dataschema": "https://kafkaguard.dev/schemas/audit/v2.json",
        "data": body,
    }
    return json.dumps(event).encode()


# --- names --------------------------------------------------------------------------------------------------------


@given(
    topic=st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True).filter(lambda t: t not in (".", "..")),
    partition=st.integers(0, 10_000),
    first=st.integers(0, 2**62),
    length=st.integers(0, 10**9),
)
def test_a_file_name_says_its_range_back_for_its_topic_only(topic, partition, first, length) -> None:
    r = FileRange(partition, first, first + length, DAY)
    assert parse_file_name(r.name(topic), topic, DAY) == r
    assert parse_file_name(r.name(topic), topic + "-x", DAY) is None  # a topic that extends another's name
    assert parse_file_name(r.temp_name(topic, "abc"), topic, DAY) is None
    assert r.path(topic) == f"date=2025-03-14/part-{topic}-{partition}-{first}-{first + length}.parquet"


def test_bad_topics_and_ranges_are_refused() -> None:
    for bad in ("", "a/b", "..", "x" * 250, "a b"):
        with pytest.raises(ValueError, match="not a Kafka topic name"):
            check_topic(bad)
    with pytest.raises(ValueError, match="not an offset range"):
        FileRange(0, 5, 4, DAY)


# --- the planner --------------------------------------------------------------------------------------------------

steps = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 3), st.booleans(), st.sampled_from(["add", "tick"])),
    min_size=1,
    max_size=200,
)


@settings(max_examples=200)
@given(steps=steps, max_records=st.integers(1, 7), max_seconds=st.floats(0.5, 5))
def test_files_cover_each_offset_once_in_order_of_one_day(steps, max_records, max_seconds) -> None:
    """Whatever the order of partitions, gaps (transaction markers), day changes and clock: the files written are
    contiguous runs of the records fed, never overlap, each of one partition and one day, each ≤ max_records."""
    planner = RangePlanner(max_records, max_seconds)
    next_offset = dict.fromkeys(range(3), 0)
    days = dict.fromkeys(range(3), 0)
    fed: list[tuple[int, int]] = []
    files = []
    now = 0.0
    for partition, gap, next_day, action in steps:
        now += 0.7
        if action == "tick":
            files += planner.due(now)
            continue
        offset = next_offset[partition] + gap - 1
        next_offset[partition] = offset + 1
        days[partition] += next_day
        row = to_row(envelope(offset, T0 + timedelta(days=days[partition])), partition, offset, None)
        fed.append((partition, offset))
        files += planner.add(row, now)
    files += planner.drain()
    written = [(f.range.partition, row["kafka_offset"]) for f in files for row in f.rows]
    assert sorted(written) == sorted(fed)
    assert overlaps(f.range for f in files) == []
    for f in files:
        assert 1 <= len(f.rows) <= max_records
        assert [row["kafka_offset"] for row in f.rows] == sorted(row["kafka_offset"] for row in f.rows)
        assert (f.range.first, f.range.last) == (f.rows[0]["kafka_offset"], f.rows[-1]["kafka_offset"])
        assert {row_day(row) for row in f.rows if row["error"] is None} <= {f.range.day}
        assert {row["kafka_partition"] for row in f.rows} == {f.range.partition}
    assert planner.buffered() == 0


def test_a_row_that_is_not_an_event_joins_the_open_file() -> None:
    planner = RangePlanner(10, 60)
    planner.add(to_row(envelope(1, T0 - timedelta(days=3)), 0, 0, None), 0)
    planner.add(to_row(b"junk", 0, 1, 1_741_996_798_000), 0)
    planner.add(to_row(b"junk", 1, 0, 1_741_996_798_000), 0)
    assert [f.range for f in planner.drain()] == [FileRange(0, 0, 1, DAY - timedelta(days=3)), FileRange(1, 0, 0, DAY)]


def test_out_of_order_offsets_and_dropped_partitions() -> None:
    planner = RangePlanner(10, 60)
    planner.add(to_row(envelope(1), 0, 5, None), 0)
    with pytest.raises(ValueError, match="not in order"):
        planner.add(to_row(envelope(1), 0, 5, None), 0)
    planner.add(to_row(envelope(1), 1, 3, None), 0)
    assert planner.drop([0]) == 1
    assert [f.range for f in planner.drain()] == [FileRange(1, 3, 3, DAY)]


def test_resume_is_after_the_last_file_of_each_partition_and_overlaps_are_found() -> None:
    ranges = [FileRange(0, 0, 9, DAY), FileRange(0, 11, 20, DAY + timedelta(1)), FileRange(2, 4, 4, DAY)]
    assert resume_offsets(ranges) == {0: 21, 2: 5}
    assert overlaps([*ranges, FileRange(0, 20, 25, DAY)]) == [(ranges[1], FileRange(0, 20, 25, DAY))]


# --- envelope → row -----------------------------------------------------------------------------------------------


def test_an_authorization_envelope_is_flattened() -> None:
    row = to_row(envelope(4, count=7, last_time="2025-03-14T23:59:59Z", enforced=False, login_groups=["Group:g"]),
                 3, 42, 1_741_996_798_000)  # fmt: skip
    assert set(row) == set(COLUMNS)
    assert row["error"] is None and row["raw"] is None and row["data"] is None
    assert (row["category"], row["id"], row["principal"], row["resource_name"], row["count"]) == (
        "authorization", "id-4", "User:u1", "t4", 7)  # fmt: skip
    assert (row["enforced"], row["login_groups"], row["record_version"]) == (False, ["Group:g"], 2)
    assert row["time"] == T0 and row["last_time"] == T0 + timedelta(seconds=1)
    assert (row["kafka_partition"], row["kafka_offset"]) == (3, 42)


def test_other_categories_keep_data_as_json() -> None:
    row = to_row(envelope(1, category="management", action="acl.created"), 0, 0, None)
    assert row["category"] == "management" and json.loads(row["data"])["action"] == "acl.created"
    assert row["principal"] is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty record (no value)"),
        (b"\xff\xfe{", "not valid JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"version":1}', 'not a CloudEvents 1.0 envelope (specversion is not "1.0")'),
        (b'{"specversion":"1.0","id":"a","source":"s","type":"t","time":"yesterday"}', "missing or invalid time"),
        (b'{"specversion":"1.0","id":"a","source":"s","type":"io.kafkaguard.authorization.v2",'
         b'"time":"2025-03-14T00:00:00Z"}', "a kafkaguard event without a data object"),
    ],
)  # fmt: skip
def test_a_value_that_is_not_an_envelope_is_kept_with_its_reason(value, reason) -> None:
    row = to_row(value, 1, 9, 1_741_996_798_000)
    assert row["error"] == reason
    assert row["raw"] == (None if value is None else value.decode("utf-8", errors="replace"))
    assert row_day(row) == DAY  # its Kafka timestamp's day


@given(st.binary(max_size=200))
def test_to_row_never_raises(value: bytes) -> None:
    row = to_row(value, 0, 0, None)
    assert (row["error"] is None) == (row["id"] is not None)


# --- repeats of a resent record ------------------------------------------------------------------------------------


def keep(window: RepeatWindow, records: list[tuple[int, str]], partition: int = 0) -> list[int]:
    return [offset for offset, key in records if not window.is_repeat(partition, offset, ("node-1", key))]


def test_the_worked_example_of_the_repeat_window() -> None:
    records = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (6, "c"), (7, "d"), (9, "e")]
    assert keep(RepeatWindow(5), records) == [1, 2, 3, 4, 9]
    resumed = RepeatWindow(5)
    resumed.seed(0, [(o, ("node-1", k)) for o, k in records[:4]])
    assert keep(resumed, records[4:]) == [9]
    assert keep(RepeatWindow(5), [(1, "a"), (7, "a")]) == [1, 7]  # beyond the window: another event, kept
    other = RepeatWindow(5)
    other.is_repeat(0, 1, ("node-1", "a"))
    assert not other.is_repeat(0, 2, ("node-2", "a"))  # another node's id is another event
    assert not other.is_repeat(1, 2, ("node-1", "a"))  # partitions are apart
    assert not other.is_repeat(0, 3, None)  # a row kept with its error is never a repeat
    with pytest.raises(ValueError, match="at least 1"):
        RepeatWindow(0)


def test_event_key_is_source_and_id_of_a_valid_envelope_only() -> None:
    assert event_key(to_row(envelope(3), 0, 0, None)) == ("kafkaguard://n1", "id-3")
    assert event_key(to_row(b"not json", 0, 0, None)) is None


@given(
    keys=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=60),
    gaps=st.lists(st.integers(1, 3), min_size=60, max_size=60),
    size=st.integers(1, 12),
    cut=st.integers(0, 60),
)
@settings(max_examples=300, deadline=None)
def test_a_resumed_run_keeps_exactly_what_an_unbroken_run_keeps(keys, gaps, size, cut) -> None:
    """The kill-anywhere property: a run stopped at ``cut`` and resumed with the window seeded from what it kept
    (what the dataset's files hold) keeps the same rows as one that never stopped."""
    offsets = list(itertools.accumulate(gaps[: len(keys)]))
    records = list(zip(offsets, keys, strict=True))
    whole = keep(RepeatWindow(size), records)
    first = keep(RepeatWindow(size), records[:cut])
    resume = records[cut][0] if cut < len(records) else offsets[-1] + 1
    resumed = RepeatWindow(size)
    resumed.seed(0, [(o, ("node-1", k)) for o, k in records[:cut] if o in set(first) and o >= resume - size])
    assert first + keep(resumed, records[cut:]) == whole


def test_kept_keys_are_read_back_from_the_files(tmp_path: Path) -> None:
    dataset = collect_files.open_dataset(str(tmp_path / "ds"))
    planner = RangePlanner(2, 60)
    rows = [to_row(envelope(i), 0, 10 + i, None) for i in range(5)] + [to_row(b"junk", 0, 15, None)]
    files = [f for row in rows for f in planner.add(row, 0)] + planner.drain()
    for f in files:
        collect_files.write_file(dataset, "audit", f)
    ranges, _ = collect_files.scan(dataset, "audit")
    assert collect_files.kept_keys(dataset, "audit", ranges, 0, 12) == [
        (12, ("kafkaguard://n1", "id-2")), (13, ("kafkaguard://n1", "id-3")),
        (14, ("kafkaguard://n1", "id-4")),
    ]  # fmt: skip
    assert collect_files.kept_keys(dataset, "audit", ranges, 1, 0) == []


# --- the durable write on a real directory ------------------------------------------------------------------------


def test_written_files_are_found_again_and_temporary_ones_removed(tmp_path: Path) -> None:
    dataset = collect_files.open_dataset(str(tmp_path / "ds"))
    planner = RangePlanner(2, 60)
    files = [f for i in range(5) for f in planner.add(to_row(envelope(i), 0, i * 2, None), 0)] + planner.drain()
    for f in files:
        collect_files.write_file(dataset, "audit.t-1", f)
    stray = tmp_path / "ds" / "date=2025-03-14" / FileRange(0, 10, 11, DAY).temp_name("audit.t-1", "dead")
    stray.write_bytes(b"partial")
    ranges, temps = collect_files.scan(dataset, "audit.t-1")
    assert sorted(ranges) == [FileRange(0, 0, 2, DAY), FileRange(0, 4, 6, DAY), FileRange(0, 8, 8, DAY)]
    assert temps == [str(stray)]
    collect_files.remove_temps(dataset, temps)
    assert not stray.exists()
    rows = collect_files.read_rows(dataset, sorted(ranges), "audit.t-1")
    assert [r["id"] for r in rows] == [f"id-{i}" for i in range(5)]
    assert collect_files.table([]).schema == collect_files.schema()
    with pytest.raises(PipelineError, match="exists already"):
        collect_files.write_file(dataset, "audit.t-1", files[0])
    with (
        collect_files.lock(dataset, "audit.t-1"),
        pytest.raises(PipelineError, match="another collector"),
        collect_files.lock(dataset, "audit.t-1"),
    ):
        pass


def test_a_filesystem_that_is_not_local_gets_the_same_files(tmp_path: Path) -> None:
    """pyarrow's in-memory ``mock://`` filesystem stands for HDFS or S3: the stream-and-move path, no fsync."""
    dataset = collect_files.open_dataset("mock:///warehouse/audit")
    assert not dataset.local
    planner = RangePlanner(3, 60)
    files = [f for i in range(4) for f in planner.add(to_row(envelope(i), 1, i, None), 0)] + planner.drain()
    paths = [collect_files.write_file(dataset, "audit", f) for f in files]
    assert paths == [f"warehouse/audit/date=2025-03-14/part-audit-1-{a}-{b}.parquet" for a, b in ((0, 2), (3, 3))]
    ranges, temps = collect_files.scan(dataset, "audit")
    assert (sorted(ranges), temps) == ([f.range for f in files], [])
    assert [r["id"] for r in collect_files.read_rows(dataset, sorted(ranges), "audit")] == [f"id-{i}" for i in range(4)]
    with collect_files.lock(dataset, "audit"):  # no lock file off a local disk
        pass


def test_a_directory_pyarrow_cannot_open_is_one_clear_error() -> None:
    with pytest.raises(PipelineError, match=r"cannot open --to nosuch://x"):
        collect_files.open_dataset("nosuch://x")

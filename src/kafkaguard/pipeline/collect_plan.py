"""The pure half of ``kafkaguard audit collect``: which Kafka records go into which Parquet file, the files' names,
and one CloudEvents envelope as one row. No I/O, no clock, no Kafka client (the consumer loop is
``kafkaguard.cli.collect``; the Parquet writing is ``kafkaguard.pipeline.collect_files``).

The invariant
=============

A file holds the records of ONE partition, of ONE contiguous offset range, of ONE day, and is named for that
range::

    DIR/date=2025-03-14/part-<topic>-<partition>-<first offset>-<last offset>.parquet

1. **A renamed file is final.** It is written under a hidden temporary name (``.part-….parquet.<token>.tmp``),
   fsynced, renamed to its final name, and its directory fsynced; nothing ever rewrites, extends or deletes it.
2. **The dataset, not the committed offset, says where a partition resumes**: at the largest ``last offset`` + 1
   among the partition's files (any day), or — when it has no file yet — at the group's committed offset, or the
   earliest one. The commit (``last offset + 1``, made after the rename) only keeps the group's lag honest.
3. So ranges never overlap: a new file starts after every existing one of its partition, and only one collector
   writes a (topic, DIR) at a time (a lock file locally; see ``collect_files``).

Range boundaries therefore do NOT have to be chosen the same way by two runs (they depend on the clock through
``--max-seconds-per-file`` and ``--until-idle``, and on when a run was killed): whatever the first run renamed is
what the dataset holds, and a re-run never reads those offsets again. The records a killed run had only buffered
(or written to a temporary file) were not committed and are not covered by any file, so the re-run reads them
again; the temporary files are deleted when a collector starts.

Worked example (partition 0, ``--max-records-per-file 3``, offsets 7 and 12 are transaction markers that a
``read_committed`` consumer never sees)::

    run 1 reads 5 6 8 | 9 10 11 | 13 …    writes part-t-0-5-8, commits 9; writes part-t-0-9-11, SIGKILL before commit
    run 2: files end at 11 → resumes at 12 (not at the committed 9): reads 13 14 15, writes part-t-0-13-15
    dataset: 5-8, 9-11, 13-15 — each offset once; the gap 12 is a marker, not a lost record

A file also ends where the envelope's day changes (``time``, UTC), so each file lies in one ``date=`` directory (a
record that is not an envelope goes into its partition's open file, or opens one on its Kafka timestamp's day):
the midnight of a replayed spool (yesterday's events arriving today, interleaved) can make small files; that is the
only cost of partitioning by event day.

**Repeats.** The topic sink delivers at least once: after a crash a node sends again what the cluster had
acknowledged but its spool had not yet committed (at most one round, ``kafka_sink._BATCH_RECORDS``), with the same
CloudEvents ``source`` and ``id``, keyed by the same subject, so into the same partition a few thousand offsets
later. ``RepeatWindow`` drops an envelope whose (source, id) a KEPT row of its partition holds within the
``REPEAT_WINDOW_OFFSETS`` offsets before it. The decision depends only on the dataset's rows (a dropped repeat never
extends the window), so a resumed run seeds the window from the files it resumes after and decides exactly as an
unbroken run: the dataset holds each event once, and re-running still writes nothing new.

Cost model: per record, one ``json.loads`` and a dict of ~30 entries (the row); Arrow builds each file's columns
from those dicts once. Per file, one temporary write, two fsyncs (file, directory), one rename and one synchronous
commit, amortised over the default 100,000 records per file. At start and at
each rebalance, one listing of every ``date=`` directory (a year of 12 partitions × 10 files a day is ~44,000 names,
parsed in well under a second). Memory: the open files' rows, at most ``max_records_per_file`` per partition.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from kafkaguard.audit.records.cloudevents import AUTHORIZATION, SHADOW

#: The CloudEvents ``type`` of each category (issue 27's spec, section 1).
TYPE_PATTERN = re.compile(r"^io\.kafkaguard\.([a-z]+)\.v[0-9]+$")
#: Categories whose data is an authorization record (a shadow record adds the candidate set's answer).
FLATTENED_CATEGORIES = frozenset({AUTHORIZATION, SHADOW})
ENVELOPE_STRINGS = ("specversion", "id", "source", "type", "time", "subject", "datacontenttype", "dataschema")
#: The authorization record's string fields, flattened into columns of the same names.
RECORD_STRINGS = (
    "principal",
    "host",
    "api",
    "operation",
    "resource_type",
    "pattern_type",
    "resource_name",
    "decision",
    "rule",
)
#: Every column of the dataset, in order (``collect_files.SCHEMA`` gives their types; README documents them).
COLUMNS = (
    *ENVELOPE_STRINGS,
    "category",
    "record_version",
    *RECORD_STRINGS,
    "count",
    "last_time",
    "enforced",
    "login_groups",
    "data",
    "error",
    "raw",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
)

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_FILE = re.compile(
    r"^part-(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>[0-9]+)-(?P<first>[0-9]+)-(?P<last>[0-9]+)\.parquet$"
)
_DAY_DIR = re.compile(r"^date=([0-9]{4}-[0-9]{2}-[0-9]{2})$")
TEMP_SUFFIX = ".tmp"


# --- names -------------------------------------------------------------------------------------------------------


def check_topic(topic: str) -> str:
    """:raises ValueError: not a legal Kafka topic name (which is also what keeps file names safe)."""
    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise ValueError(f"not a Kafka topic name: {topic!r} (letters, digits, '.', '_', '-', at most 249)")
    return topic


@dataclass(frozen=True, order=True, slots=True)
class FileRange:
    """One file's place: a partition's offsets ``first``..``last`` (both included) of one day."""

    partition: int
    first: int
    last: int
    day: date

    def __post_init__(self) -> None:
        if self.partition < 0 or self.first < 0 or self.last < self.first:
            raise ValueError(f"not an offset range: partition {self.partition}, {self.first}..{self.last}")

    def directory(self) -> str:
        return f"date={self.day.isoformat()}"

    def name(self, topic: str) -> str:
        return f"part-{check_topic(topic)}-{self.partition}-{self.first}-{self.last}.parquet"

    def path(self, topic: str) -> str:
        """Relative to the dataset's root."""
        return f"{self.directory()}/{self.name(topic)}"

    def temp_name(self, topic: str, token: str) -> str:
        """Hidden (Spark and Hive skip names starting with ``.``) and never a final name."""
        return f".{self.name(topic)}.{token}{TEMP_SUFFIX}"


def parse_day_dir(name: str) -> date | None:
    match = _DAY_DIR.match(name)
    if match is None:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


def parse_file_name(name: str, topic: str, day: date) -> FileRange | None:
    """The range a final file name of ``topic`` stands for, or None (another topic's file, a temporary file, or
    something else). A topic may contain ``-``: the name is matched for this topic exactly."""
    match = _FILE.match(name)
    if match is None or match.group("topic") != topic:
        return None
    first, last = int(match.group("first")), int(match.group("last"))
    if last < first:
        return None
    return FileRange(int(match.group("partition")), first, last, day)


def is_temp_file(name: str, topic: str) -> bool:
    return name.startswith(f".part-{topic}-") and name.endswith(TEMP_SUFFIX)


def resume_offsets(ranges: Iterable[FileRange]) -> dict[int, int]:
    """Per partition with files, where collecting resumes: the largest last offset + 1 (the invariant, 2)."""
    resume: dict[int, int] = {}
    for r in ranges:
        resume[r.partition] = max(resume.get(r.partition, 0), r.last + 1)
    return resume


def overlaps(ranges: Iterable[FileRange]) -> list[tuple[FileRange, FileRange]]:
    """Pairs of files of one partition whose offset ranges overlap (the invariant says: none)."""
    found: list[tuple[FileRange, FileRange]] = []
    by_partition: dict[int, list[FileRange]] = {}
    for r in ranges:
        by_partition.setdefault(r.partition, []).append(r)
    for items in by_partition.values():
        items.sort(key=lambda r: (r.first, r.last))
        found += [(a, b) for a, b in itertools.pairwise(items) if b.first <= a.last]
    return found


# --- one record → one row ----------------------------------------------------------------------------------------


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 time with an offset (``Z`` included), in UTC; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


def kafka_time(timestamp_ms: int | None) -> datetime | None:
    if timestamp_ms is None or timestamp_ms < 0:
        return None
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC)


def _envelope_error(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return "not a JSON object"
    if obj.get("specversion") != "1.0":
        return 'not a CloudEvents 1.0 envelope (specversion is not "1.0")'
    for name in ("id", "source", "type"):
        if not isinstance(obj.get(name), str) or not obj[name]:
            return f"missing or non-string {name}"
    for name in ("subject", "datacontenttype", "dataschema"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            return f"non-string {name}"
    if parse_time(obj.get("time")) is None:
        return "missing or invalid time"
    data = obj.get("data")
    if TYPE_PATTERN.match(obj["type"]) and not isinstance(data, dict):
        return "a kafkaguard event without a data object"
    return None


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def to_row(value: bytes | None, partition: int, offset: int, timestamp_ms: int | None) -> dict[str, Any]:
    """One Kafka record → one row of ``COLUMNS``. Never raises: a value that is not an envelope keeps ``error``
    (why) and ``raw`` (its text, undecodable bytes replaced), so it is counted, reported and kept once."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(kafka_partition=partition, kafka_offset=offset, kafka_timestamp=kafka_time(timestamp_ms))
    if value is None:
        row["error"] = "empty record (no value)"
        return row
    text = value.decode("utf-8", errors="replace")
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
        error: str | None = "not valid JSON"
    else:
        error = _envelope_error(obj)
    if error is not None or not isinstance(obj, dict):
        row.update(error=error or "not a JSON object", raw=text)
        return row
    for name in ENVELOPE_STRINGS:
        row[name] = obj.get(name)
    row["time"] = parse_time(obj["time"])
    match = TYPE_PATTERN.match(obj["type"])
    category = match.group(1) if match else None
    row["category"] = category
    data = obj.get("data")
    if category in FLATTENED_CATEGORIES and isinstance(data, dict):
        row["record_version"] = _integer(data.get("version"))
        for name in RECORD_STRINGS:
            row[name] = _string(data.get(name))
        row["count"] = _integer(data.get("count"))
        row["last_time"] = parse_time(data.get("last_time"))
        enforced = data.get("enforced")
        row["enforced"] = enforced if isinstance(enforced, bool) else None
        groups = data.get("login_groups")
        if isinstance(groups, list) and all(isinstance(g, str) for g in groups):
            row["login_groups"] = groups
    if category != AUTHORIZATION and data is not None:
        row["data"] = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return row


def row_day(row: Mapping[str, object]) -> date:
    """The ``date=`` directory of a row: the event's day (UTC), else its Kafka timestamp's, else 1970-01-01."""
    when = row.get("time") or row.get("kafka_timestamp")
    return when.date() if isinstance(when, datetime) else date(1970, 1, 1)


def event_day(row: Mapping[str, object]) -> date | None:
    """The event's day, or None for a row that is not an event (it goes with its neighbours)."""
    when = row.get("time")
    return when.date() if isinstance(when, datetime) else None


# --- the range planner: an I/O-free state machine ----------------------------------------------------------------


@dataclass
class OpenFile:
    partition: int
    day: date
    first: int
    last: int
    opened: float
    rows: list[dict[str, Any]] = field(default_factory=list)

    def range(self) -> FileRange:
        return FileRange(self.partition, self.first, self.last, self.day)


@dataclass(frozen=True)
class ClosedFile:
    """A file to write: its range and rows (in offset order)."""

    range: FileRange
    rows: list[dict[str, Any]]


class RangePlanner:
    """Decides where files end. Fed records in each partition's offset order; returns the files to write.

    A partition's open file closes before an event of another day (that record opens the next file), when it holds
    ``max_records`` rows, when it has been open ``max_seconds`` (``due``, with the caller's monotonic clock) and at
    the end (``drain``). ``drop`` forgets the open files of revoked partitions: they were never written, their
    offsets were never committed, the next owner reads them again.
    """

    def __init__(self, max_records: int, max_seconds: float) -> None:
        if max_records < 1:
            raise ValueError("max_records must be at least 1")
        if max_seconds <= 0:
            raise ValueError("max_seconds must be positive")
        self.max_records = max_records
        self.max_seconds = max_seconds
        self._open: dict[int, OpenFile] = {}

    def add(self, row: dict[str, Any], now: float) -> list[ClosedFile]:
        partition, offset = int(row["kafka_partition"]), int(row["kafka_offset"])
        day = event_day(row)
        closed: list[ClosedFile] = []
        current = self._open.get(partition)
        if current is not None:
            if offset <= current.last:
                raise ValueError(f"partition {partition}: offset {offset} after {current.last} (not in order)")
            if day is not None and current.day != day:
                closed.append(self._close(partition))
                current = None
        if current is None:
            current = self._open[partition] = OpenFile(partition, day or row_day(row), offset, offset, now)
        current.rows.append(row)
        current.last = offset
        if len(current.rows) >= self.max_records:
            closed.append(self._close(partition))
        return closed

    def due(self, now: float) -> list[ClosedFile]:
        return [self._close(p) for p, f in list(self._open.items()) if now - f.opened >= self.max_seconds]

    def drain(self) -> list[ClosedFile]:
        return [self._close(p) for p in list(self._open)]

    def drop(self, partitions: Iterable[int]) -> int:
        """Forget these partitions' open files; returns how many rows were dropped."""
        return sum(len(f.rows) for p in partitions if (f := self._open.pop(p, None)) is not None)

    def buffered(self) -> int:
        return sum(len(f.rows) for f in self._open.values())

    def _close(self, partition: int) -> ClosedFile:
        f = self._open.pop(partition)
        return ClosedFile(f.range(), f.rows)


# --- repeats of a resent record: an I/O-free window per partition -------------------------------------------------

#: How far back (in offsets of one partition) a repeat is looked for: two rounds of the sink's resend.
REPEAT_WINDOW_OFFSETS = 10_000

#: What identifies an event: its CloudEvents (source, id).
EventKey = tuple[str, str]


def event_key(row: Mapping[str, object]) -> EventKey | None:
    """A valid envelope's (source, id); None for a row kept with its error (never taken for a repeat)."""
    if row.get("error") is not None or row.get("source") is None or row.get("id") is None:
        return None
    return str(row["source"]), str(row["id"])


class RepeatWindow:
    """Which rows repeat an event a kept row of the same partition holds within ``size`` offsets before them.

    Worked example (``size`` 5; the sink's crash resent the records at offsets 3 and 4 as 6 and 7)::

        offset 1 a, 2 b, 3 c, 4 d, 6 c, 7 d, 9 e    → keeps 1 2 3 4 9; 6 and 7 repeat 3 and 4
        offset 9's window is 4..8: 3 has left it, and 6, 7 were never in it (dropped rows do not count)

    A run killed after writing offsets 1..4 resumes at 5: ``seed`` gives it the kept rows of offsets 0..4 from the
    dataset, and 6, 7 and 9 are decided as above.

    Cost model: per row, one deque append, one dict probe and the evictions it causes (amortised one).
    Memory: at most ``size`` keys per partition (~150 bytes each: 10,000 offsets ≈ 1.5 MB).
    """

    def __init__(self, size: int = REPEAT_WINDOW_OFFSETS) -> None:
        if size < 1:
            raise ValueError("the repeat window must be at least 1 offset")
        self.size = size
        self._order: dict[int, deque[tuple[int, EventKey]]] = {}
        self._keys: dict[int, dict[EventKey, int]] = {}

    def seed(self, partition: int, kept: Iterable[tuple[int, EventKey]]) -> None:
        """Start ``partition`` over from the dataset's kept rows (offset, key), in offset order."""
        self.forget(partition)
        for offset, key in kept:
            self._add(partition, offset, key)

    def forget(self, partition: int) -> None:
        self._order.pop(partition, None)
        self._keys.pop(partition, None)

    def is_repeat(self, partition: int, offset: int, key: EventKey | None) -> bool:
        """Whether the row at ``offset`` repeats a kept one; a row that does not is kept (remembered)."""
        order = self._order.setdefault(partition, deque())
        keys = self._keys.setdefault(partition, {})
        while order and order[0][0] < offset - self.size:
            _, old = order.popleft()
            left = keys[old] - 1
            if left:
                keys[old] = left
            else:
                del keys[old]
        if key is None:
            return False
        if key in keys:
            return True
        self._add(partition, offset, key)
        return False

    def _add(self, partition: int, offset: int, key: EventKey) -> None:
        self._order.setdefault(partition, deque()).append((offset, key))
        keys = self._keys.setdefault(partition, {})
        keys[key] = keys.get(key, 0) + 1

"""The Parquet half of ``kafkaguard audit collect``: the dataset's fixed schema, listing what a dataset holds, and
writing one file durably (temporary name, fsync, rename, directory fsync) — the steps ``collect_plan``'s invariant
stands on.

The directory is any URI ``pyarrow.fs.FileSystem.from_uri`` accepts: a local path, ``file:///…``, and where
pyarrow was built with them and configured, ``hdfs://…`` or ``s3://…``. Tested: local paths only. On a local
filesystem the file and its directory are fsynced and the rename is atomic; on other filesystems durability is what
the filesystem gives at ``close`` (HDFS acknowledges a closed file once its blocks are replicated), and a move on
S3 is a copy and a delete, so a crash between the two can leave a temporary copy (hidden, ignored, deleted at the
next start) but never a partial final file (S3 writes an object whole).

Only one collector may write a (topic, directory) at a time. Locally a lock file (``.collect-<topic>.lock``,
``flock``) makes a second one fail at start with a clear message; elsewhere that is the operator's job.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import IO, TYPE_CHECKING, Any

from kafkaguard.pipeline.collect_plan import (
    COLUMNS,
    ClosedFile,
    EventKey,
    FileRange,
    check_topic,
    event_key,
    is_temp_file,
    parse_day_dir,
    parse_file_name,
)
from kafkaguard.pipeline.errors import PipelineError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow import fs as pafs


def schema() -> pa.Schema:
    """The dataset's columns (``collect_plan.COLUMNS``), fixed: every file has exactly these, in this order."""
    import pyarrow as pa

    utc = pa.timestamp("us", tz="UTC")
    types: dict[str, pa.DataType] = {name: pa.string() for name in COLUMNS}
    types.update(
        time=utc,
        record_version=pa.int32(),
        count=pa.int64(),
        last_time=utc,
        enforced=pa.bool_(),
        login_groups=pa.list_(pa.string()),
        kafka_partition=pa.int32(),
        kafka_offset=pa.int64(),
        kafka_timestamp=pa.timestamp("ms", tz="UTC"),
    )
    return pa.schema(
        [pa.field(name, types[name], nullable=name not in ("kafka_partition", "kafka_offset")) for name in COLUMNS]
    )


@dataclass(frozen=True)
class Dataset:
    """A dataset's root on its filesystem."""

    fs: pafs.FileSystem
    root: str
    local: bool

    def path(self, relative: str) -> str:
        return f"{self.root.rstrip('/')}/{relative}"


def open_dataset(uri: str) -> Dataset:
    """The root directory (created when missing).

    :raises PipelineError: a URI pyarrow cannot open (unknown scheme, a filesystem it was built without).
    """
    from pyarrow import fs as pafs

    if "://" not in uri:
        uri = os.path.abspath(uri)
    try:
        filesystem, root = pafs.FileSystem.from_uri(uri)
        filesystem.create_dir(root, recursive=True)
    except (OSError, ValueError, ImportError) as e:  # pyarrow raises ArrowInvalid (a ValueError) for bad URIs
        raise PipelineError(f"cannot open --to {uri}: {e}") from e
    return Dataset(filesystem, root, isinstance(filesystem, pafs.LocalFileSystem))


def _list(dataset: Dataset, path: str) -> list[Any]:
    from pyarrow import fs as pafs

    return list(dataset.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)))


def scan(dataset: Dataset, topic: str) -> tuple[list[FileRange], list[str]]:
    """The final files of ``topic`` (their ranges) and its temporary files (full paths), in every ``date=`` dir."""
    from pyarrow import fs as pafs

    check_topic(topic)
    ranges: list[FileRange] = []
    temps: list[str] = []
    for entry in _list(dataset, dataset.root):
        day = parse_day_dir(entry.base_name) if entry.type == pafs.FileType.Directory else None
        if day is None:
            continue
        for item in _list(dataset, entry.path):
            if item.type != pafs.FileType.File:
                continue
            found = parse_file_name(item.base_name, topic, day)
            if found is not None:
                ranges.append(found)
            elif is_temp_file(item.base_name, topic):
                temps.append(item.path)
    return ranges, temps


def remove_temps(dataset: Dataset, temps: Sequence[str]) -> None:
    """Temporary files a killed collector left (never renamed, so never committed)."""
    for path in temps:
        with contextlib.suppress(FileNotFoundError):
            dataset.fs.delete_file(path)


def table(rows: list[dict[str, Any]]) -> pa.Table:
    """Column by column: faster than ``Table.from_pylist`` on these rows (see docs/benchmarks.md, "Figures from the
    code")."""
    import pyarrow as pa

    return pa.Table.from_pydict({name: [row[name] for row in rows] for name in COLUMNS}, schema=schema())


def write_file(dataset: Dataset, topic: str, closed: ClosedFile) -> str:
    """Write one file durably; returns its final path. Its rows must be the range's records, in offset order.

    :raises PipelineError: a final file of that name exists already (the invariant was broken: two collectors?).
    """
    import pyarrow.parquet as pq

    directory = dataset.path(closed.range.directory())
    final = f"{directory}/{closed.range.name(topic)}"
    temp = f"{directory}/{closed.range.temp_name(topic, uuid.uuid4().hex[:12])}"
    data = table(closed.rows)
    if dataset.local:
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(final):
            raise PipelineError(f"{final} exists already: is another collector writing {dataset.root}?")
        with open(temp, "wb") as out:
            pq.write_table(data, out, compression="zstd")
            _fsync(out)
        os.rename(temp, final)
        _fsync_dir(directory)
        return final
    dataset.fs.create_dir(directory, recursive=True)
    with dataset.fs.open_output_stream(temp) as out:
        pq.write_table(data, out, compression="zstd")
    dataset.fs.move(temp, final)
    return final


def _fsync(out: IO[bytes]) -> None:
    out.flush()
    os.fsync(out.fileno())


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def lock(dataset: Dataset, topic: str) -> Iterator[None]:
    """Hold ``.collect-<topic>.lock`` (local filesystems; elsewhere a no-op).

    :raises PipelineError: another collector holds it.
    """
    if not dataset.local:
        yield
        return
    import fcntl

    path = dataset.path(f".collect-{check_topic(topic)}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PipelineError(
                f"another collector is writing topic {topic} into {dataset.root} (it holds {path}); "
                "run one collector per topic and directory"
            ) from None
        yield
    finally:
        os.close(fd)


def read_rows(dataset: Dataset, ranges: Sequence[FileRange], topic: str) -> list[dict[str, Any]]:
    """Every row of these files (tests and checks)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for r in ranges:
        rows += pq.read_table(dataset.path(r.path(topic)), filesystem=dataset.fs).to_pylist()
    return rows


def kept_keys(
    dataset: Dataset, topic: str, ranges: Sequence[FileRange], partition: int, since: int
) -> list[tuple[int, EventKey]]:
    """The (offset, event key) of ``partition``'s rows at ``since`` or after, in offset order (what a resumed run's
    ``RepeatWindow`` is seeded with): three columns of the files that reach ``since``."""
    import pyarrow.parquet as pq

    kept: list[tuple[int, EventKey]] = []
    for r in sorted(r for r in ranges if r.partition == partition and r.last >= since):
        columns = pq.read_table(
            dataset.path(r.path(topic)), filesystem=dataset.fs, columns=["kafka_offset", "source", "id", "error"]
        ).to_pydict()
        for offset, source, id_, error in zip(
            columns["kafka_offset"], columns["source"], columns["id"], columns["error"], strict=True
        ):
            key = event_key({"source": source, "id": id_, "error": error})
            if offset >= since and key is not None:
                kept.append((offset, key))
    kept.sort(key=lambda item: item[0])
    return kept


def days(ranges: Sequence[FileRange]) -> list[date]:
    return sorted({r.day for r in ranges})

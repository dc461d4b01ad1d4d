"""The Kafka sink's bounded on-disk spool: records the cluster has not acknowledged yet, in the order they came.

Every record bound for Kafka is appended here first (a write-ahead log), and the sender produces from the head and
``commit``s what the cluster acknowledged. With the cluster up the spool holds a few milliseconds of records; with
the cluster down it grows, and once the cluster is back its backlog is sent in order before anything newer — newer
records are behind it in the same log. A kill of the process loses nothing that reached the spool: on restart the
sender starts again at the last commit (records sent after that commit and before the kill are sent again: the only
duplicates, and they carry the same CloudEvents id).

Layout (one directory, owner-only files)::

    00000000000000000001.seg   append-only segments of frames; a new one when the tail reaches segment_bytes
                               (max_bytes / 8 within 64 KiB..16 MiB, and at most max_bytes / 4)
    00000000000000000002.seg
    committed                  "<segment> <offset>": everything before it was acknowledged

A frame is ``length (4 bytes) | crc32 (4) | payload``, the payload ``topic length (2) | key length (4) | topic |
key | value``. A segment wholly behind the commit is deleted.

**Bound.** The segments' bytes on disk never exceed ``max_bytes``: a record that would go beyond is dropped and
counted (``dropped``); the caller logs the count. **Durability.** Appends are written at once (a killed process
loses nothing) and fsynced when ``fsync_seconds`` have passed since the last fsync (a power loss loses at most that
much). **Corruption.** A torn frame at the end of the last segment (a crash in the middle of a write) is cut off at
``open`` with a WARNING; a bad frame elsewhere is logged with its segment and offset and the rest of that segment
is skipped (counted in ``corrupt_bytes``); neither stops the spool.

Thread-safe: one thread appends (the audit writer), another reads and commits (the sender). Standard library only.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kafkaguard.errors import InvalidConfigError

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">II")
_PAYLOAD_HEADER = struct.Struct(">HI")
_SUFFIX = ".seg"
_COMMITTED = "committed"
_PRIVATE = 0o600


@dataclass(frozen=True, slots=True)
class SpoolItem:
    """One record bound for Kafka: its topic, key and value."""

    topic: str
    key: bytes
    value: bytes

    def frame(self) -> bytes:
        topic = self.topic.encode("utf-8")
        payload = _PAYLOAD_HEADER.pack(len(topic), len(self.key)) + topic + self.key + self.value
        return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a record ends in the spool: its segment and the offset after it."""

    segment: int
    offset: int


def _decode(payload: bytes) -> SpoolItem | None:
    if len(payload) < _PAYLOAD_HEADER.size:
        return None
    topic_length, key_length = _PAYLOAD_HEADER.unpack_from(payload)
    start = _PAYLOAD_HEADER.size
    if start + topic_length + key_length > len(payload):
        return None
    try:
        topic = payload[start : start + topic_length].decode("utf-8")
    except UnicodeDecodeError:
        return None
    key = payload[start + topic_length : start + topic_length + key_length]
    return SpoolItem(topic, key, payload[start + topic_length + key_length :])


def _frames(data: bytes, start: int) -> tuple[list[tuple[int, SpoolItem]], int, bool]:
    """The whole frames of ``data`` from ``start``: (end offset, item) each, where the good frames end, and whether
    a bad (torn or corrupt) frame follows."""
    found: list[tuple[int, SpoolItem]] = []
    offset = start
    while offset < len(data):
        if offset + _HEADER.size > len(data):
            return found, offset, True
        length, crc = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + length
        if end > len(data):
            return found, offset, True
        payload = data[offset + _HEADER.size : end]
        item = _decode(payload) if zlib.crc32(payload) == crc else None
        if item is None:
            return found, offset, True
        found.append((end, item))
        offset = end
    return found, offset, False


class Spool:
    """The segments of one directory. ``open()`` before use; ``close()`` fsyncs the tail."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int,
        segment_bytes: int | None = None,
        fsync_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_bytes < 1024:
            raise InvalidConfigError(f"the audit spool's bound ({max_bytes} bytes) is below 1024 bytes")
        self.directory = directory
        self.max_bytes = max_bytes
        # At most a quarter of the bound: the tail must roll (and, once sent, be deleted) well before the bound is
        # reached, or a tail full of acknowledged records would refuse every new one.
        self.segment_bytes = min(
            segment_bytes or max(64 * 1024, min(16 * 1024 * 1024, max_bytes // 8)), max(256, max_bytes // 4)
        )
        self.fsync_seconds = fsync_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._segments: list[int] = []  # sequence numbers, oldest first
        self._sizes: dict[int, int] = {}
        self._tail: BinaryIO | None = None
        self._committed = Position(1, 0)
        self._last_fsync = clock()
        self._unsynced = False
        #: Records refused because the spool was full, since it was opened.
        self.dropped = 0
        #: Records appended since it was opened.
        self.appended = 0
        #: Bytes of frames skipped as corrupt since it was opened.
        self.corrupt_bytes = 0

    # ------------------------------------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Create the directory, find the segments and the commit, cut a torn frame off the last segment.

        :raises InvalidConfigError: the directory cannot be created or written.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            probe = self.directory / f".probe-{os.getpid()}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE))
            probe.unlink()
        except OSError as e:
            raise InvalidConfigError(
                f"audit_spool_dir {self.directory} cannot be written ({e.strerror}): name a directory this user can "
                "write"
            ) from None
        with self._lock:
            self._segments = sorted(
                int(path.name[: -len(_SUFFIX)])
                for path in self.directory.glob("*" + _SUFFIX)
                if path.name[: -len(_SUFFIX)].isdigit()
            )
            self._sizes = {seq: self._path(seq).stat().st_size for seq in self._segments}
            self._committed = self._read_committed()
            if self._segments:
                self._cut_torn_tail(self._segments[-1])
                if not self._segments[0] <= self._committed.segment <= self._segments[-1]:
                    self._committed = Position(self._segments[0], 0)  # a commit of other files: resend, never lose
                size = self._sizes.get(self._committed.segment)
                if size is not None and self._committed.offset > size:  # a segment cut shorter than the commit
                    self._committed = Position(self._committed.segment, size)
            else:
                self._segments = [max(self._committed.segment, 1)]
                self._sizes[self._segments[0]] = 0
                self._committed = Position(self._segments[0], 0)
            self._tail = self._open_tail()

    def close(self) -> None:
        with self._lock:
            if self._tail is not None:
                self._tail.flush()
                os.fsync(self._tail.fileno())
                self._tail.close()
                self._tail = None

    # ------------------------------------------------------------------------------------------------- writing

    def append(self, items: Sequence[SpoolItem]) -> int:
        """Append ``items`` in order; returns how many were dropped because the spool is full (counted too)."""
        dropped = 0
        with self._lock:
            tail = self._tail
            if tail is None:
                raise RuntimeError("the spool is not open")
            chunks: list[bytes] = []
            chunked = 0
            size = self._total()
            for item in items:
                frame = item.frame()
                if size + len(frame) > self.max_bytes:
                    dropped += 1
                    continue
                in_tail = self._sizes[self._segments[-1]] + chunked
                if in_tail and in_tail + len(frame) > self.segment_bytes:
                    self._write(chunks)
                    chunks, chunked = [], 0
                    self._roll()
                chunks.append(frame)
                chunked += len(frame)
                size += len(frame)
                self.appended += 1
            self._write(chunks)
            self.dropped += dropped
            self._sync_if_due()
        return dropped

    def sync(self) -> None:
        """fsync the tail if ``fsync_seconds`` have passed since the last fsync and something was written since."""
        with self._lock:
            self._sync_if_due()

    # ------------------------------------------------------------------------------------------------- reading

    def read(self, max_items: int, max_bytes: int = 4 * 1024 * 1024) -> list[tuple[Position, SpoolItem]]:
        """Up to ``max_items`` records (and about ``max_bytes``) from the last commit, oldest first, each with the
        position to commit once it and everything before it were acknowledged."""
        with self._lock:
            if self._tail is not None:
                self._tail.flush()
            found: list[tuple[Position, SpoolItem]] = []
            taken = 0
            segment, offset = self._committed.segment, self._committed.offset
            for seq in [s for s in self._segments if s >= segment]:
                start = offset if seq == segment else 0
                if start >= self._sizes[seq]:
                    continue
                with self._path(seq).open("rb") as segment_file:
                    segment_file.seek(start)
                    data = segment_file.read(self._sizes[seq] - start)  # a segment is at most segment_bytes
                frames, good_end, bad = _frames(data, 0)
                previous = 0
                for end, item in frames:
                    found.append((Position(seq, start + end), item))
                    taken, previous = taken + end - previous, end
                    if len(found) >= max_items or taken >= max_bytes:
                        return found
                if bad:
                    self._skip_corrupt(seq, start + good_end)
            return found

    def commit(self, position: Position) -> None:
        """Everything up to ``position`` was acknowledged: remember it, and delete segments wholly behind it."""
        with self._lock:
            if position <= self._committed:
                return
            self._committed = position
            done = [
                seq
                for seq in self._segments[:-1]  # never the tail: it is being appended to
                if seq < position.segment or (seq == position.segment and position.offset >= self._sizes[seq])
            ]
            for seq in done:
                self._path(seq).unlink(missing_ok=True)
                self._segments.remove(seq)
                del self._sizes[seq]
            self._write_committed()

    # ------------------------------------------------------------------------------------------------- state

    @property
    def size_bytes(self) -> int:
        """Bytes of segment files on disk (what the bound counts)."""
        with self._lock:
            return self._total()

    @property
    def pending_bytes(self) -> int:
        """Bytes of records not acknowledged yet."""
        with self._lock:
            return sum(
                size - (self._committed.offset if seq == self._committed.segment else 0)
                for seq, size in self._sizes.items()
                if seq >= self._committed.segment
            )

    # ----------------------------------------------------------------------------------------------- internals

    def _path(self, seq: int) -> Path:
        return self.directory / f"{seq:020d}{_SUFFIX}"

    def _total(self) -> int:
        return sum(self._sizes.values())

    def _open_tail(self) -> BinaryIO:
        path = self._path(self._segments[-1])
        return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _PRIVATE), "ab")

    def _write(self, chunks: list[bytes]) -> None:
        if not chunks or self._tail is None:
            return
        data = b"".join(chunks)
        self._tail.write(data)
        self._tail.flush()  # into the page cache at once: a killed process loses nothing written
        self._sizes[self._segments[-1]] += len(data)
        self._unsynced = True

    def _roll(self) -> None:
        if self._tail is not None:
            os.fsync(self._tail.fileno())
            self._tail.close()
        seq = self._segments[-1] + 1
        self._segments.append(seq)
        self._sizes[seq] = 0
        self._tail = self._open_tail()
        self._last_fsync, self._unsynced = self._clock(), False

    def _sync_if_due(self) -> None:
        if self._unsynced and self._tail is not None and self._clock() - self._last_fsync >= self.fsync_seconds:
            os.fsync(self._tail.fileno())
            self._last_fsync, self._unsynced = self._clock(), False

    def _read_committed(self) -> Position:
        path = self.directory / _COMMITTED
        try:
            text = path.read_text("ascii").split()
            return Position(int(text[0]), int(text[1]))
        except FileNotFoundError:
            return Position(self._segments[0] if self._segments else 1, 0)
        except (OSError, ValueError, IndexError, UnicodeDecodeError) as e:
            # A damaged commit file: sending again from the oldest segment duplicates, never loses.
            log.warning("audit spool %s: cannot read %s (%s); sending again from the oldest segment", self.directory,
                        path.name, e)  # fmt: skip
            return Position(self._segments[0] if self._segments else 1, 0)

    def _write_committed(self) -> None:
        path = self.directory / _COMMITTED
        temporary = self.directory / f"{_COMMITTED}.tmp"
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE), "w") as out:
            out.write(f"{self._committed.segment} {self._committed.offset}\n")
        temporary.replace(path)

    def _cut_torn_tail(self, seq: int) -> None:
        """A crash while writing may leave a partial frame at the end of the last segment: cut it off, so that new
        frames are appended after the last whole one."""
        path = self._path(seq)
        data = path.read_bytes()
        start = self._committed.offset if self._committed.segment == seq else 0
        _, good_end, bad = _frames(data, min(start, len(data)))
        if bad:
            log.warning(
                "audit spool %s: segment %s ends in %d byte(s) that are not a whole record (a crash while writing); "
                "they are cut off, the records before them are kept",
                self.directory, path.name, len(data) - good_end,
            )  # fmt: skip
            self.corrupt_bytes += len(data) - good_end
            with path.open("r+b") as out:
                out.truncate(good_end)
            self._sizes[seq] = good_end

    def _skip_corrupt(self, seq: int, offset: int) -> None:
        """A bad frame inside a segment: what follows cannot be found again frame by frame, so the rest of the
        segment is skipped (logged, counted). The tail is cut there, so new records are appended after the good
        ones; an older segment is read as ending there (deleted once the commit passes it)."""
        size = self._sizes[seq]
        log.error(
            "audit spool %s: segment %s has a corrupt record at offset %d; its last %d byte(s) are skipped (not sent)",
            self.directory, self._path(seq).name, offset, size - offset,
        )  # fmt: skip
        self.corrupt_bytes += size - offset
        if seq == self._segments[-1]:
            with self._path(seq).open("r+b") as out:
                out.truncate(offset)
        self._sizes[seq] = offset

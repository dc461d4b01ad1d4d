"""The Kafka sink's bounded on-disk spool: records the cluster has not acknowledged yet, in the order they came, and
when it is full, fair: the principals with the largest share lose their oldest records first.

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

A frame is ``length (4 bytes) | crc32 (4) | payload``, the payload ``topic length (2) | key length (4) | [principal
length (1) | category length (1) | principal | category] | topic | key | value``. The bracketed owner is there when
the topic length has its top bit (``_HAS_OWNER``) set: topic names are at most 249 bytes, so frames written before
owners existed (no flag) still read, as owner ``("", "")``. A segment wholly behind the commit is deleted.

**Bound and fairness.** The segments' bytes on disk never exceed ``max_bytes``. Each record carries its owner: the
principal who caused it (at most ``MAX_OWNER_BYTES`` of UTF-8) and its audit category. The spool keeps an index of
the frames not committed yet — per segment, three arrays: offset, length, owner — and each principal's *share*:
its pending bytes. When an append does not fit, it makes room: it takes, again and again, the oldest frame of the
principal with the largest share (the incoming record counted in its principal's share, and never itself taken),
until the record fits plus ``slack`` bytes (so that the next appends fit too: eviction is amortised, not per
record). It does this in one step: the water level L at which ``sum(min(evictable, share - L))`` covers what is
needed gives each principal above L a quota, and one scan from the oldest evictable frame takes each principal's
oldest frames until its quota is met. A principal whose share is below L loses nothing: a quiet one keeps every
record while a noisy one floods. A record larger than the whole bound is dropped and counted (``dropped``); so is
a record that does not fit even with every evictable frame gone (the sender's in-flight batch fills the spool).

**The sender's batch is never touched.** ``read`` pins what it returned (the read position): frames up to it are
never evicted or moved, so every position the sender may ``commit`` stays valid. ``release`` unpins what the sender
no longer holds (after a failed round it reads again from the commit), ``commit`` what it acknowledged.

**Compaction.** The victims of one step are cut out of their segments: each affected segment is rewritten from its
first victim on without the victims (the frames before that offset keep their offsets), into a temporary file
(``<segment>.seg.tmp``) that is fsynced and renamed over the segment. A crash leaves either the old segment (and a
stale temporary file, deleted at ``open``) or the new one, never a torn one: a kill loses nothing that was not
chosen as a victim. The directory is not fsynced after the rename: a power loss may undo it, and then the old
segment is back whole (the victims are sent after all, nothing else is lost). A segment left with no pending frame
is deleted (the tail is kept); one thinned to a few records stays until the commit passes it, so a long outage with
a flood leaves about one small file per ``segment_bytes`` the flood wrote, holding the others' records. ``open``
rebuilds the index by reading every frame after the commit (the owner is in the frame).

Worked example: ``max_bytes`` 64 KiB (segments of 16 KiB, ``slack`` 4 KiB), the cluster down. User:noisy floods
700-byte records while User:quiet records a few. At the append that does not fit, noisy holds 63,700 bytes and quiet
1,400 (2 records): 65,100 in all, 264 bytes short, 4,360 wanted with the slack. With the new record noisy's share is
64,400, so the level is 60,040: noisy's quota is 4,360, quiet's nothing (1,400 is below the level). The scan takes
noisy's 7 oldest records (4,900 bytes), all in the oldest segment, which is rewritten from the first of them without
them; the next 6 appends fit without eviction. Quiet's records all stay; noisy keeps its newest.

**Cost model.** An append that fits costs one write (into the page cache; fsynced every ``fsync_seconds``) and
three array appends. A step of eviction costs a scan of the pinned frames, a sort of the principals with evictable
records (and a binary search of the level over them, stopping at the first share below it), a scan from the oldest
evictable frame to the last victim, and a rewrite of each affected segment from its first victim on (at most
``segment_bytes`` each, a temporary file, one fsync); it frees at least ``slack`` (``max_bytes / 16``, at most half
a segment) bytes. In a flood whose victims sit in the oldest segments that is about ``segment_bytes / slack`` (2)
bytes rewritten per byte evicted. The index costs about 24 bytes of
memory per pending record (a full 1 GiB spool of 700-byte records: ~37 MB) plus one entry per owner; ``open`` reads
every pending byte once. ``read`` reads exactly the bytes of the frames it returns.

**Durability.** Appends are written at once (a killed process loses nothing) and fsynced when ``fsync_seconds``
have passed since the last fsync (a power loss loses at most that much). **Corruption.** A torn frame at the end of
the last segment (a crash in the middle of a write) is cut off at ``open`` with a WARNING; a bad frame elsewhere is
logged with its segment and offset and the rest of that segment is skipped (counted in ``corrupt_bytes``); neither
stops the spool.

Thread-safe: one thread appends (the audit writer), another reads, commits and releases (the sender). Standard
library only.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kafkaguard.errors import InvalidConfigError

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">II")
_PAYLOAD_HEADER = struct.Struct(">HI")
_OWNER_HEADER = struct.Struct(">BB")
#: The flag in a payload's topic length: an owner (principal, category) follows the key length.
_HAS_OWNER = 0x8000
#: The longest principal (and category) a frame holds, in UTF-8 bytes; longer ones are cut (``bounded_owner``).
MAX_OWNER_BYTES = 255
_SUFFIX = ".seg"
_TEMPORARY = ".tmp"
_COMMITTED = "committed"
_PRIVATE = 0o600
#: Bytes copied at a time when a compaction copies a segment's kept prefix.
_COPY_BYTES = 1024 * 1024


def _cut(text: str) -> bytes:
    """``text`` as UTF-8, cut to ``MAX_OWNER_BYTES`` at a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= MAX_OWNER_BYTES:
        return data
    return data[:MAX_OWNER_BYTES].decode("utf-8", "ignore").encode("utf-8")


@dataclass(frozen=True, slots=True)
class SpoolItem:
    """One record bound for Kafka: its topic, key and value, and its owner: the principal who caused it (its share
    of the spool is counted by this name; cut to ``MAX_OWNER_BYTES``) and its audit category (for the drop counts).
    """

    topic: str
    key: bytes
    value: bytes
    principal: str = ""
    category: str = ""

    def frame(self) -> bytes:
        """:raises ValueError: the topic name is too long for a frame (Kafka's limit is 249 bytes)."""
        topic = self.topic.encode("utf-8")
        if len(topic) >= _HAS_OWNER:
            raise ValueError(f"a topic name of {len(topic)} bytes cannot be spooled (Kafka's limit is 249)")
        principal, category = _cut(self.principal), _cut(self.category)
        payload = b"".join(
            (
                _PAYLOAD_HEADER.pack(len(topic) | _HAS_OWNER, len(self.key)),
                _OWNER_HEADER.pack(len(principal), len(category)),
                principal,
                category,
                topic,
                self.key,
                self.value,
            )
        )
        return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a record ends in the spool: its segment and the offset after it."""

    segment: int
    offset: int


#: A record's owner: (principal, category).
Owner = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Dropped:
    """What one ``append`` lost to the bound, per owner (principal, category): older records evicted to make room and
    new ones refused (``refused`` of them: larger than the bound, or no room could be made)."""

    counts: Mapping[Owner, int] = field(default_factory=dict)
    refused: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:
        return bool(self.counts)


def _decode(payload: bytes) -> SpoolItem | None:
    if len(payload) < _PAYLOAD_HEADER.size:
        return None
    topic_length, key_length = _PAYLOAD_HEADER.unpack_from(payload)
    start = _PAYLOAD_HEADER.size
    principal = category = ""
    try:
        if topic_length & _HAS_OWNER:
            topic_length &= ~_HAS_OWNER
            if start + _OWNER_HEADER.size > len(payload):
                return None
            principal_length, category_length = _OWNER_HEADER.unpack_from(payload, start)
            start += _OWNER_HEADER.size
            if start + principal_length + category_length > len(payload):
                return None
            principal = payload[start : start + principal_length].decode("utf-8")
            category = payload[start + principal_length : start + principal_length + category_length].decode("utf-8")
            start += principal_length + category_length
        if start + topic_length + key_length > len(payload):
            return None
        topic = payload[start : start + topic_length].decode("utf-8")
    except UnicodeDecodeError:
        return None
    key = payload[start + topic_length : start + topic_length + key_length]
    return SpoolItem(topic, key, payload[start + topic_length + key_length :], principal, category)


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


@dataclass(slots=True)
class _Segment:
    """One segment file: its bytes on disk and its pending (not committed) frames, in order."""

    seq: int
    size: int = 0
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    lengths: array[int] = field(default_factory=lambda: array("Q"))
    owners: array[int] = field(default_factory=lambda: array("Q"))

    def end(self, index: int) -> Position:
        return Position(self.seq, self.offsets[index] + self.lengths[index])


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
        #: Bytes freed beyond what an append needs when it has to evict (so the next appends fit).
        self.slack = max(1, min(max_bytes // 16, self.segment_bytes // 2))
        self.fsync_seconds = fsync_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._segments: list[_Segment] = []  # oldest first; the last is the tail
        self._bytes = 0  # the segments' sizes, summed
        self._tail: BinaryIO | None = None
        self._committed = Position(1, 0)
        #: The end of the last frame ``read`` returned (or the commit): frames up to it are never evicted or moved.
        self._read_to = Position(1, 0)
        #: Pending bytes per principal, and the owners of the indexed frames (id → (principal, category), frames).
        self._shares: dict[str, int] = {}
        self._owner_ids: dict[Owner, int] = {}
        self._owners: dict[int, tuple[Owner, int]] = {}
        self._next_owner = 0
        self._last_fsync = clock()
        self._unsynced = False
        #: Records lost to the bound since it was opened: evicted older ones and refused new ones.
        self.dropped = 0
        #: Of them, records evicted to make room for newer ones.
        self.evicted = 0
        #: Records appended since it was opened.
        self.appended = 0
        #: Bytes of frames skipped as corrupt since it was opened.
        self.corrupt_bytes = 0
        #: Segment rewrites (compactions) since it was opened.
        self.compactions = 0

    # ------------------------------------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Create the directory, find the segments and the commit, delete a compaction's stale temporary file, cut a
        torn frame off the last segment, and index every frame after the commit.

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
            for stale in self.directory.glob("*" + _SUFFIX + _TEMPORARY):
                log.warning(
                    "audit spool %s: %s is a compaction that did not finish (a crash); its segment is kept as "
                    "it was, the file is deleted",
                    self.directory,
                    stale.name,
                )
                stale.unlink(missing_ok=True)
            numbers = sorted(
                int(path.name[: -len(_SUFFIX)])
                for path in self.directory.glob("*" + _SUFFIX)
                if path.name[: -len(_SUFFIX)].isdigit()
            )
            self._segments = [_Segment(seq, self._path(seq).stat().st_size) for seq in numbers]
            self._committed = self._read_committed(numbers)
            if self._segments:
                if not numbers[0] <= self._committed.segment <= numbers[-1]:
                    self._committed = Position(numbers[0], 0)  # a commit of other files: resend, never lose
                for done in [s for s in self._segments[:-1] if s.seq < self._committed.segment]:
                    self._path(done.seq).unlink(missing_ok=True)  # acknowledged, left by a crash before its deletion
                    self._segments.remove(done)
                for segment in self._segments:
                    self._index(segment, last=segment is self._segments[-1])
            else:
                self._segments = [_Segment(max(self._committed.segment, 1))]
                self._committed = Position(self._segments[0].seq, 0)
            self._bytes = sum(s.size for s in self._segments)
            self._read_to = self._committed
            self._tail = self._open_tail()

    def close(self) -> None:
        with self._lock:
            if self._tail is not None:
                self._tail.flush()
                os.fsync(self._tail.fileno())
                self._tail.close()
                self._tail = None

    # ------------------------------------------------------------------------------------------------- writing

    def append(self, items: Sequence[SpoolItem]) -> Dropped:
        """Append ``items`` in order, evicting the oldest records of the largest shares when they do not fit;
        returns what was lost (counted in ``dropped`` too)."""
        counts: dict[Owner, int] = {}
        refused = 0
        with self._lock:
            if self._tail is None:
                raise RuntimeError("the spool is not open")
            chunks: list[bytes] = []
            owners: list[Owner] = []
            chunked = 0
            for item in items:
                owner = (item.principal, item.category)
                try:
                    frame = item.frame()
                except ValueError as e:
                    log.error("audit spool %s: a record is refused: %s", self.directory, e)
                    frame = b""
                fits = 0 < len(frame) <= self.max_bytes
                if fits and self._bytes + chunked + len(frame) > self.max_bytes:
                    self._write(chunks, owners)  # indexed first: they count in the shares and can be taken too
                    chunks, owners, chunked = [], [], 0
                    fits = self._make_room(len(frame), item.principal, counts)
                if not fits:
                    counts[owner] = counts.get(owner, 0) + 1
                    refused += 1
                    continue
                in_tail = self._segments[-1].size + chunked
                if in_tail and in_tail + len(frame) > self.segment_bytes:
                    self._write(chunks, owners)
                    chunks, owners, chunked = [], [], 0
                    self._roll()
                chunks.append(frame)
                owners.append(owner)
                chunked += len(frame)
                self.appended += 1
            self._write(chunks, owners)
            dropped = Dropped(counts, refused)
            self.dropped += dropped.total
            self._sync_if_due()
        return dropped

    def sync(self) -> None:
        """fsync the tail if ``fsync_seconds`` have passed since the last fsync and something was written since."""
        with self._lock:
            self._sync_if_due()

    # ------------------------------------------------------------------------------------------------- reading

    def read(self, max_items: int, max_bytes: int = 4 * 1024 * 1024) -> list[tuple[Position, SpoolItem]]:
        """Up to ``max_items`` records (and about ``max_bytes``) from the last commit, oldest first, each with the
        position to commit once it and everything before it were acknowledged. What it returns is pinned (never
        evicted or moved) until committed or ``release``d."""
        with self._lock:
            if self._tail is not None:
                self._tail.flush()
            found: list[tuple[Position, SpoolItem]] = []
            taken = 0
            for segment in list(self._segments):
                if len(found) >= max_items or taken >= max_bytes:
                    break
                count = 0
                while count < len(segment.offsets) and len(found) + count < max_items and taken < max_bytes:
                    taken += segment.lengths[count]
                    count += 1
                if not count:
                    continue
                start = segment.offsets[0]
                end = segment.offsets[count - 1] + segment.lengths[count - 1]
                with self._path(segment.seq).open("rb") as segment_file:
                    segment_file.seek(start)
                    data = segment_file.read(end - start)  # exactly the frames returned
                frames, good_end, bad = _frames(data, 0)
                found += [(Position(segment.seq, start + frame_end), item) for frame_end, item in frames]
                if bad:
                    self._skip_corrupt(segment, start + good_end)
            if found:
                self._read_to = max(self._read_to, found[-1][0])
            return found

    def commit(self, position: Position) -> None:
        """Everything up to ``position`` was acknowledged: remember it, and delete segments wholly behind it."""
        with self._lock:
            if position <= self._committed:
                return
            self._committed = position
            self._read_to = max(self._read_to, position)
            for segment in self._segments:
                if segment.seq > position.segment:
                    break
                done = 0
                while done < len(segment.offsets) and segment.end(done) <= position:
                    done += 1
                self._forget(segment, 0, done)
            finished = [
                segment
                for segment in self._segments[:-1]  # never the tail: it is being appended to
                if segment.seq < position.segment
                or (segment.seq == position.segment and position.offset >= segment.size)
            ]
            for segment in finished:
                self._path(segment.seq).unlink(missing_ok=True)
                self._segments.remove(segment)
                self._bytes -= segment.size
            self._write_committed()

    def release(self, keep: Position | None = None) -> None:
        """The sender holds no position beyond ``keep`` (None: beyond the commit) any more: what it read after that
        may be evicted again. (After a failed round it reads again from the commit.)"""
        with self._lock:
            self._read_to = max(self._committed, keep) if keep is not None else self._committed

    # ------------------------------------------------------------------------------------------------- state

    @property
    def size_bytes(self) -> int:
        """Bytes of segment files on disk (what the bound counts)."""
        with self._lock:
            return self._bytes

    @property
    def pending_bytes(self) -> int:
        """Bytes of records not acknowledged yet."""
        with self._lock:
            return sum(self._shares.values())

    def shares(self) -> dict[str, int]:
        """A copy: principal → bytes of its records not acknowledged yet."""
        with self._lock:
            return {principal: size for principal, size in self._shares.items() if size}

    # ----------------------------------------------------------------------------------------------- eviction

    def _make_room(self, length: int, principal: str, counts: dict[Owner, int]) -> bool:
        """Evict so that a new frame of ``length`` bytes of ``principal`` fits (plus ``slack`` when there is that
        much to take): the oldest frames of the largest shares. False when it cannot fit (nothing evicted then)."""
        needed = self._bytes + length - self.max_bytes
        pinned = self._pinned_shares()
        shares = dict(self._shares)
        shares[principal] = shares.get(principal, 0) + length  # the new record counts, but is never taken
        evictable = {p: size - pinned.get(p, 0) for p, size in self._shares.items() if size > pinned.get(p, 0)}
        available = sum(evictable.values())
        if available < needed:
            return False
        wanted = min(needed + self.slack, available)
        quotas = _quotas(shares, evictable, wanted)
        victims = self._victims(quotas)
        for segment, indices in victims:
            try:
                self._compact(segment, indices, counts)
            except OSError as e:
                log.error(
                    "audit spool %s: segment %s cannot be compacted (%s); new records are dropped instead",
                    self.directory,
                    self._path(segment.seq).name,
                    e,
                )
                break
        return self._bytes + length <= self.max_bytes

    def _pinned_shares(self) -> dict[str, int]:
        """Bytes per principal of the pending frames up to the read position (the sender's, never evicted)."""
        pinned: dict[str, int] = {}
        for segment, index in self._pending():
            if segment.end(index) > self._read_to:
                break
            principal = self._owners[segment.owners[index]][0][0]
            pinned[principal] = pinned.get(principal, 0) + segment.lengths[index]
        return pinned

    def _pending(self) -> Iterator[tuple[_Segment, int]]:
        for segment in self._segments:
            for index in range(len(segment.offsets)):
                yield segment, index

    def _victims(self, quotas: dict[str, int]) -> list[tuple[_Segment, list[int]]]:
        """From the oldest frame after the read position on: each principal's oldest frames until its quota is met."""
        remaining = {p: quota for p, quota in quotas.items() if quota > 0}
        victims: list[tuple[_Segment, list[int]]] = []
        for segment in self._segments:
            if not remaining:
                break
            chosen: list[int] = []
            for index in range(len(segment.offsets)):
                if not remaining:
                    break
                if segment.end(index) <= self._read_to:
                    continue
                principal = self._owners[segment.owners[index]][0][0]
                quota = remaining.get(principal)
                if quota is None:
                    continue
                chosen.append(index)
                quota -= segment.lengths[index]
                if quota > 0:
                    remaining[principal] = quota
                else:
                    del remaining[principal]
            if chosen:
                victims.append((segment, chosen))
        return victims

    def _compact(self, segment: _Segment, victims: list[int], counts: dict[Owner, int]) -> None:
        """Rewrite ``segment`` from its first victim on without the victims (indices of its pending frames, in
        order), crash-safe: a temporary file, fsynced, renamed over it. A segment left with no pending frame is
        deleted instead (never the tail).

        :raises OSError: the temporary file cannot be written or renamed (then the segment is as it was).
        """
        first = victims[0]
        start = segment.offsets[first]
        taken = set(victims)
        kept = [index for index in range(first, len(segment.offsets)) if index not in taken]
        path = self._path(segment.seq)
        is_tail = segment is self._segments[-1]
        if not kept and first == 0 and not is_tail:
            path.unlink()  # nothing pending is left in it
            self._segments.remove(segment)
            self._bytes -= segment.size
            self._take(segment, victims, counts)
            self.compactions += 1
            return
        if is_tail and self._tail is not None:
            self._tail.flush()
        temporary = path.with_name(path.name + _TEMPORARY)
        try:
            with path.open("rb") as source:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE)
                with os.fdopen(fd, "wb") as out:
                    copied = 0
                    while copied < start:  # the frames before the first victim, byte for byte
                        block = source.read(min(_COPY_BYTES, start - copied))
                        if not block:
                            raise OSError(f"{path.name} is shorter than its index ({copied} of {start} bytes)")
                        out.write(block)
                        copied += len(block)
                    rest = source.read(segment.size - start)
                    for index in kept:
                        at = segment.offsets[index] - start
                        out.write(rest[at : at + segment.lengths[index]])
                    out.flush()
                    os.fsync(out.fileno())
            if is_tail and self._tail is not None:
                self._tail.close()  # its descriptor would go on writing into the replaced file
                self._tail = None
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            if is_tail and self._tail is None:
                self._tail = self._open_tail()
            raise
        # The new segment is in place: the index follows it before anything else may fail.
        if is_tail:
            self._tail = self._open_tail()
        self._take(segment, victims, counts)
        offsets, lengths, owners = array("Q"), array("Q"), array("Q")
        offset = start  # the frames before the first victim keep their offsets; those after it move up
        for index in kept:
            offsets.append(offset)
            lengths.append(segment.lengths[index])
            owners.append(segment.owners[index])
            offset += segment.lengths[index]
        del segment.offsets[first:], segment.lengths[first:], segment.owners[first:]
        segment.offsets += offsets
        segment.lengths += lengths
        segment.owners += owners
        self._bytes -= segment.size - offset
        segment.size = offset
        self.compactions += 1

    def _take(self, segment: _Segment, victims: list[int], counts: dict[Owner, int]) -> None:
        """Count ``victims`` as dropped and take them out of the shares (their index entries are rebuilt)."""
        for index in victims:
            owner_id = segment.owners[index]
            owner, _frames_of = self._owners[owner_id]
            counts[owner] = counts.get(owner, 0) + 1
            self._unshare(owner_id, segment.lengths[index])
        self.evicted += len(victims)

    # ----------------------------------------------------------------------------------------------- internals

    def _path(self, seq: int) -> Path:
        return self.directory / f"{seq:020d}{_SUFFIX}"

    def _open_tail(self) -> BinaryIO:
        path = self._path(self._segments[-1].seq)
        return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _PRIVATE), "ab")

    def _owner_id(self, owner: Owner) -> int:
        found = self._owner_ids.get(owner)
        if found is None:
            found = self._next_owner
            self._next_owner += 1
            self._owner_ids[owner] = found
            self._owners[found] = (owner, 0)
        return found

    def _share(self, owner: Owner, length: int) -> int:
        owner_id = self._owner_id(owner)
        key, frames = self._owners[owner_id]
        self._owners[owner_id] = (key, frames + 1)
        self._shares[owner[0]] = self._shares.get(owner[0], 0) + length
        return owner_id

    def _unshare(self, owner_id: int, length: int) -> None:
        owner, frames = self._owners[owner_id]
        if frames <= 1:
            del self._owners[owner_id], self._owner_ids[owner]
        else:
            self._owners[owner_id] = (owner, frames - 1)
        left = self._shares[owner[0]] - length
        if left > 0:
            self._shares[owner[0]] = left
        else:
            del self._shares[owner[0]]

    def _add(self, segment: _Segment, offset: int, length: int, owner: Owner) -> None:
        segment.offsets.append(offset)
        segment.lengths.append(length)
        segment.owners.append(self._share(owner, length))

    def _forget(self, segment: _Segment, start: int, stop: int) -> None:
        """Take the pending frames ``start:stop`` of ``segment`` out of the index (committed, or skipped)."""
        if stop <= start:
            return
        for index in range(start, stop):
            self._unshare(segment.owners[index], segment.lengths[index])
        del segment.offsets[start:stop], segment.lengths[start:stop], segment.owners[start:stop]

    def _write(self, chunks: list[bytes], owners: list[Owner]) -> None:
        if not chunks or self._tail is None:
            return
        data = b"".join(chunks)
        self._tail.write(data)
        self._tail.flush()  # into the page cache at once: a killed process loses nothing written
        segment = self._segments[-1]
        offset = segment.size
        for frame, owner in zip(chunks, owners, strict=True):
            self._add(segment, offset, len(frame), owner)
            offset += len(frame)
        segment.size += len(data)
        self._bytes += len(data)
        self._unsynced = True

    def _roll(self) -> None:
        if self._tail is not None:
            os.fsync(self._tail.fileno())
            self._tail.close()
        self._segments.append(_Segment(self._segments[-1].seq + 1))
        self._tail = self._open_tail()
        self._last_fsync, self._unsynced = self._clock(), False

    def _sync_if_due(self) -> None:
        if self._unsynced and self._tail is not None and self._clock() - self._last_fsync >= self.fsync_seconds:
            os.fsync(self._tail.fileno())
            self._last_fsync, self._unsynced = self._clock(), False

    def _read_committed(self, numbers: list[int]) -> Position:
        path = self.directory / _COMMITTED
        try:
            text = path.read_text("ascii").split()
            return Position(int(text[0]), int(text[1]))
        except FileNotFoundError:
            return Position(numbers[0] if numbers else 1, 0)
        except (OSError, ValueError, IndexError, UnicodeDecodeError) as e:
            # A damaged commit file: sending again from the oldest segment duplicates, never loses.
            log.warning(
                "audit spool %s: cannot read %s (%s); sending again from the oldest segment",
                self.directory,
                path.name,
                e,
            )
            return Position(numbers[0] if numbers else 1, 0)

    def _write_committed(self) -> None:
        path = self.directory / _COMMITTED
        temporary = self.directory / f"{_COMMITTED}.tmp"
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE), "w") as out:
            out.write(f"{self._committed.segment} {self._committed.offset}\n")
        os.replace(temporary, path)

    def _index(self, segment: _Segment, *, last: bool) -> None:
        """Index ``segment``'s frames after the commit (at ``open``). A bad frame in the last segment is a torn write:
        cut off; elsewhere the rest of the segment is skipped."""
        path = self._path(segment.seq)
        start = self._committed.offset if segment.seq == self._committed.segment else 0
        if start > segment.size:  # a segment cut shorter than the commit
            self._committed = Position(segment.seq, segment.size)
            start = segment.size
        with path.open("rb") as segment_file:
            segment_file.seek(start)
            data = segment_file.read(segment.size - start)
        frames, _good_end, bad = _frames(data, 0)
        offset = start
        for end, item in frames:
            self._add(segment, offset, end - (offset - start), (item.principal, item.category))
            offset = start + end
        if not bad:
            return
        if last:
            log.warning(
                "audit spool %s: segment %s ends in %d byte(s) that are not a whole record (a crash while writing); "
                "they are cut off, the records before them are kept",
                self.directory,
                path.name,
                segment.size - offset,
            )
            self.corrupt_bytes += segment.size - offset
            with path.open("r+b") as out:
                out.truncate(offset)
            segment.size = offset
        else:
            self._skip_corrupt(segment, offset)

    def _skip_corrupt(self, segment: _Segment, offset: int) -> None:
        """A bad frame inside a segment: what follows cannot be found again frame by frame, so the rest of the
        segment is skipped (logged, counted, taken out of the index). The tail is cut there, so new records are
        appended after the good ones; an older segment is read as ending there (deleted once the commit passes it)."""
        log.error(
            "audit spool %s: segment %s has a corrupt record at offset %d; its last %d byte(s) are skipped (not sent)",
            self.directory,
            self._path(segment.seq).name,
            offset,
            segment.size - offset,
        )
        self.corrupt_bytes += segment.size - offset
        if segment is self._segments[-1]:
            if self._tail is not None:
                self._tail.flush()
            with self._path(segment.seq).open("r+b") as out:
                out.truncate(offset)
        first_bad = 0
        while first_bad < len(segment.offsets) and segment.offsets[first_bad] < offset:
            first_bad += 1
        self._forget(segment, first_bad, len(segment.offsets))
        self._bytes -= segment.size - offset
        segment.size = offset


def _quotas(shares: Mapping[str, int], evictable: Mapping[str, int], wanted: int) -> dict[str, int]:
    """Bytes each principal gives up so that ``wanted`` bytes are freed, largest shares first: the highest level L
    with ``sum(min(evictable, share - L))`` >= ``wanted`` (what taking, again and again, from the largest share
    comes to), each principal above L giving up ``min(evictable, share - L)``.

    >>> _quotas({"noisy": 900, "quiet": 100}, {"noisy": 900, "quiet": 100}, 200)
    {'noisy': 200}
    >>> sorted(_quotas({"a": 500, "b": 500, "c": 10}, {"a": 500, "b": 400, "c": 10}, 300).items())
    [('a', 150), ('b', 150)]
    """

    ranked = sorted(((share, p) for p, share in shares.items() if evictable.get(p, 0) > 0), reverse=True)

    def freed(level: int) -> int:
        total = 0
        for share, principal in ranked:  # largest first: stop at the first share at or below the level
            if share <= level:
                break
            total += min(evictable[principal], share - level)
        return total

    low, high = 0, ranked[0][0] if ranked else 0  # freed(low) >= wanted (the caller checked): find the highest
    while low < high:
        middle = (low + high + 1) // 2
        if freed(middle) >= wanted:
            low = middle
        else:
            high = middle - 1
    quotas = {principal: min(evictable[principal], share - low) for share, principal in ranked if share > low}
    return {principal: quota for principal, quota in quotas.items() if quota > 0}

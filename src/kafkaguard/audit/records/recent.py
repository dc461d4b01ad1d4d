"""The recent denials of an audit log, read from its end: what the console's Denials tab lists (``/api/denials``).

Three kinds of decision are listed, each from the JSON lines file the audit trail writes (``audit_log``: CloudEvents
envelopes, or the flat records of older files):

* ``denied``: an authorization record with decision DENIED, enforced (the client was refused);
* ``permissive``: a permissive proxy's would-be denial (DENIED with ``"enforced": false``: forwarded anyway);
* ``shadow``: a shadow event (``audit.records.shadow``), a decision the candidate ACL set would flip, either way;
* ``broker``: in passthrough, a resource kafkaguard allowed and the broker refused (``audit.records.broker_refusals``).

Only the tail is read: lines are taken from the end of the file backwards, in chunks, until ``limit`` of them are
found or ``max_bytes`` have been read; when the file is read whole before that, its newest rotated backup
(``audit.log.1``, as ``audit.trail.sinks.FileSink`` rotates) is read on from its end within the same budget. The first
line of the window is dropped when the window starts inside it (a partial line), as is a last line the writer has not
finished. Lines that are no such decision (allowed records, other categories, bad lines) are skipped: this is a view,
not a validator (``kafkaguard audit`` and ``explain --from-audit`` report bad lines).

Cost model: at most ``max_bytes`` read (plus one chunk), one chunk and its lines in memory at a time besides the
``limit`` decisions kept; a substring test per line, and a JSON parse only for the lines that say ``DENIED`` or are
shadow events (and, with a principal filter, name it). Measured (4 MiB window, 527-byte lines): 8 ms to scan a window
of allowed decisions or to find 500 denials; a filter whose principal is in no line, 130 ms without the substring test
on the principal, a few ms with it. Blocking file I/O: callers off the event loop run it on a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from kafkaguard.audit.records.broker_refusals import BROKER_TYPE, broker_refusal_of, explained
from kafkaguard.audit.records.record import AuditRecord, format_time, from_json_line
from kafkaguard.audit.records.shadow import SHADOW_TYPE, shadow_of
from kafkaguard.model import AuthorizationResult

#: How much of the log's end is read at most, by default: a few thousand decisions, read in tens of milliseconds.
TAIL_BYTES = 4 * 1024 * 1024
#: The size of each backward read.
CHUNK_BYTES = 64 * 1024

Kind = Literal["denied", "permissive", "shadow", "broker"]

_DENIED = b'"DENIED"'
_SHADOW = SHADOW_TYPE.encode()
_BROKER = BROKER_TYPE.encode()


@dataclass(frozen=True, slots=True)
class RecentDecision:
    """One listed decision, as the log says it (times as written: ISO 8601 UTC with ``Z``)."""

    kind: Kind
    time: str
    #: The last of ``count`` requests (equal to ``time`` when the record stands for one).
    last_time: str
    count: int
    principal: str
    host: str
    api: str | None
    operation: str
    resource_type: str
    resource_name: str
    #: The active ACLs' decision and deciding rule (for a shadow flip: what the client got).
    decision: str
    rule: str | None
    #: A shadow flip's: the candidate set's decision and rule; None for the other kinds.
    shadow_decision: str | None = None
    shadow_rule: str | None = None
    #: A broker refusal's: Kafka's error name the broker answered (kafkaguard's decision is ``decision``: ALLOWED).
    broker_error: str | None = None
    #: A broker refusal's: which side refused, in a sentence.
    explanation: str | None = None


@dataclass(frozen=True, slots=True)
class RecentDecisions:
    """What a read found: the decisions, newest first, and how much of the log it read."""

    decisions: list[RecentDecision]
    #: Bytes read from the end of the log (and of its backup).
    read_bytes: int
    #: True when the log (and its backup) were read whole: nothing older exists there.
    complete: bool


def _of_record(record: AuditRecord) -> RecentDecision | None:
    if record.decision is not AuthorizationResult.DENIED:
        return None
    return RecentDecision(
        kind="denied" if record.enforced else "permissive",
        time=format_time(record.time),
        last_time=format_time(record.last),
        count=record.count,
        principal=record.principal,
        host=record.host,
        api=record.api,
        operation=record.operation.name,
        resource_type=record.resource_type.name,
        resource_name=record.resource_name,
        decision=record.decision.value,
        rule=record.rule,
    )


def decision_of(line: bytes) -> RecentDecision | None:
    """The listed decision of one line of the log, or None (another kind of line, or one that is not valid)."""
    if _BROKER in line:
        refusal = _broker_of(line.decode("utf-8", errors="replace"))
        if refusal is not None:
            return refusal  # else a line merely naming that type (a topic of that name): read on
    shadow = _SHADOW in line
    if not shadow and _DENIED not in line:
        return None  # an allowed record, a login, a management event: no JSON parse
    text = line.decode("utf-8", errors="replace")
    if shadow:
        flip = _flip_of(text)
        if flip is not None:
            return flip
    record = from_json_line(text)
    return _of_record(record) if isinstance(record, AuditRecord) else None


def _flip_of(text: str) -> RecentDecision | None:
    try:
        decoded: Any = json.loads(text)
    except ValueError:
        return None
    flip = shadow_of(decoded)
    if flip is None or isinstance(flip, str):
        return None
    data = decoded.get("data") if "specversion" in decoded else decoded
    rule = data.get("rule")
    return RecentDecision(
        kind="shadow",
        time=flip.time,
        last_time=flip.last_time,
        count=flip.count,
        principal=flip.principal,
        host=flip.host,
        api=flip.api,
        operation=flip.operation,
        resource_type=flip.resource_type,
        resource_name=flip.resource_name,
        decision=flip.decision,
        rule=rule if isinstance(rule, str) else None,
        shadow_decision=flip.shadow_decision,
        shadow_rule=flip.shadow_rule,
    )


def _broker_of(text: str) -> RecentDecision | None:
    try:
        decoded: Any = json.loads(text)
    except ValueError:
        return None
    refusal = broker_refusal_of(decoded)
    if refusal is None:
        return None
    return RecentDecision(
        kind="broker",
        time=refusal.time,
        last_time=refusal.time,
        count=1,
        principal=refusal.principal,
        host=refusal.host,
        api=refusal.api,
        operation=refusal.operation,
        resource_type=refusal.resource_type,
        resource_name=refusal.resource_name,
        decision="ALLOWED",
        rule=refusal.rule,
        broker_error=refusal.broker_error,
        explanation=explained(refusal),
    )


def _lines_backwards(file: IO[bytes], size: int, budget: int) -> Iterator[tuple[bytes, int]]:
    """(line, bytes read so far) of ``file``'s last ``budget`` bytes, last line first. The window's first line is
    yielded only when the window starts at the file's start (else it may be the end of a longer line); a last line
    without its newline is the writer's unfinished one, never yielded."""
    position = size
    start = max(0, size - budget)
    unfinished = False
    if size:
        file.seek(size - 1)
        unfinished = file.read(1) != b"\n"
    rest = b""
    while position > start:
        step = min(CHUNK_BYTES, position - start)
        position -= step
        file.seek(position)
        parts = (file.read(step) + rest).split(b"\n")
        rest = parts[0]
        for part in reversed(parts[1:]):
            if unfinished:
                unfinished = False
            elif part:
                yield part, size - position
    if start == 0 and rest and not unfinished:
        yield rest, size


def recent_decisions(
    path: Path, *, limit: int, principal: str | None = None, max_bytes: int = TAIL_BYTES
) -> RecentDecisions:
    """The newest ``limit`` listed decisions of the log at ``path`` (of ``principal`` only, when given), newest
    first, from at most ``max_bytes`` of its end (and of ``path.1``'s).

    :raises OSError: the log exists but cannot be read (a missing log has no decisions yet: an empty answer).
    """
    found: list[RecentDecision] = []
    needle = _needle(principal)
    read = 0
    complete = True
    for candidate in (path, path.with_name(f"{path.name}.1")):
        budget = max_bytes - read
        if budget <= 0:
            complete = False
            break
        try:
            file = candidate.open("rb")
        except FileNotFoundError:
            break  # no log yet, or no backup: nothing older
        with file:
            size = _size(file)
            stopped = False
            for line, done in _lines_backwards(file, size, budget):
                if needle is not None and needle not in line:
                    continue  # another principal's: no JSON parse
                decision = decision_of(line)
                if decision is not None and (principal is None or decision.principal == principal):
                    found.append(decision)
                    if len(found) >= limit:
                        stopped = True
                        read += done
                        break
            if not stopped:
                read += min(size, budget)
        if stopped or size > budget:
            complete = False
            break
    # The file's order is the order of writing; a usage window's records are written when it ends, stamped with the
    # time of their first request: sorted by their last request, the newest first (stable for equal times).
    found.sort(key=lambda d: d.last_time, reverse=True)
    return RecentDecisions(found, read, complete)


def _needle(principal: str | None) -> bytes | None:
    """The bytes every line of ``principal`` holds, when they are certain: its JSON string, for a printable ASCII
    name that no JSON writer escapes (no quote, backslash or slash); None otherwise (every line is parsed)."""
    if (
        principal is None
        or not principal.isascii()
        or not principal.isprintable()
        or any(c in principal for c in '"\\/')
    ):
        return None
    return json.dumps(principal).encode()


def _size(file: IO[bytes]) -> int:
    file.seek(0, 2)
    return file.tell()

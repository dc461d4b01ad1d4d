"""The audit trail's Kafka topic sink: envelopes produced to topics of any cluster, through a bounded on-disk spool.

``write`` (the audit writer's thread) routes each event (``audit.records.routing``: a topic, or dropped) and appends it
to the spool (``audit.records.spool``), nothing more: it never waits on the cluster. A sender thread of its own produces
from the spool's head with an idempotent producer (confluent-kafka; ``enable.idempotence``, ``acks=all``), key = the
event's subject (so one resource's records stay in one partition, in order), value = the envelope's JSON line, and
commits what the cluster acknowledged. Every producer call is in that thread; none on the event loop.

**The cluster unreachable.** Deliveries fail after ``delivery_timeout_seconds`` (librdkafka's message.timeout.ms),
or the local queue is full: the records stay in the spool, the sender waits ``retry_backoff_seconds`` and tries
again from the first unacknowledged record, skipping those acknowledged after it (no duplicates while the process
lives). Records arriving meanwhile are appended behind the backlog, so once the cluster is back everything goes out
in the order it was recorded, the backlog first. While the cluster is unreachable each round sends only the first
unacknowledged record (a probe): the rest of the spool is not in flight, so the spool may make room in it. A round
never has more than a quarter of the spool in flight (``_batch_bytes``), and after a failed round the sink releases
what it read (``Spool.release``) but the positions it still holds.

**The spool's bound is fair** (``audit.records.spool``): each record carries the principal who caused it
(``Outgoing.principal``) and when the spool is full the principals with the largest share lose their oldest records
first, so one client flooding the trail during an outage cannot push the others' records out. What is lost is
counted (``dropped``; per principal and category in ``AuditTrailStatistics.spool_drops``) and logged as a WARNING
at most once per ``_WARN_SECONDS``, with the count and the principals that lost the most.

**A crash.** The spool survives it: the next start sends from the last commit. Records acknowledged after that
commit are sent again: duplicates, never losses (each keeps its CloudEvents id, so readers can drop them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafkaguard.audit.records.routing import Router
from kafkaguard.audit.records.spool import Position, Spool, SpoolItem
from kafkaguard.audit.records.trail_statistics import (
    DROPPED,
    ROUTED_DROP,
    SENT,
    SPOOLED,
    AuditTrailStatistics,
    DropCounts,
)
from kafkaguard.audit.trail.sinks import Outgoing

log = logging.getLogger(__name__)

#: Records produced per round at most: a round waits for all of them before it commits.
_BATCH_RECORDS = 5000
#: A WARNING about the cluster or the spool's bound at most this often (the counts say the rest).
_WARN_SECONDS = 30.0
#: How long close() lets the sender finish its round (what is left stays in the spool for the next start).
_CLOSE_SECONDS = 10.0
#: Bytes a round reads at most (and at most a quarter of the spool: what is in flight cannot make room).
_BATCH_BYTES = 4 * 1024 * 1024
#: Records a round sends while the cluster is unreachable: a probe, so that the rest of the spool is not in flight.
_PROBE_RECORDS = 1
#: Principals a WARNING about the spool's drops names (those that lost the most since the last one).
_WARN_PRINCIPALS = 3


def printable(name: str) -> str:
    """A client-chosen name for a log line: control and other unprintable characters escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)


class _LibrdkafkaLog:
    """librdkafka's log lines, at DEBUG: while the cluster is down it logs each failed connection; the sink says it
    once per interval, with the backlog, instead."""

    def __init__(self) -> None:
        self._log = logging.getLogger(__name__ + ".librdkafka")

    def log(self, level: int, message: str, *args: object) -> None:
        self._log.debug(message, *args)


ProducerFactory = Callable[[dict[str, Any]], Any]


def _confluent_producer(config: dict[str, Any]) -> Any:
    from confluent_kafka import Producer

    return Producer(config)


class KafkaSink:
    name = "kafka"

    def __init__(
        self,
        producer_config: dict[str, Any],
        router: Router,
        spool: Spool,
        *,
        statistics: AuditTrailStatistics | None = None,
        delivery_timeout_seconds: float = 30.0,
        retry_backoff_seconds: float = 1.0,
        producer_factory: ProducerFactory = _confluent_producer,
    ) -> None:
        """``producer_config``: librdkafka settings reaching the cluster (bootstrap.servers, security); the sink adds
        idempotence, acks, the delivery timeout and its logger."""
        self.router = router
        self.spool = spool
        self.statistics = statistics if statistics is not None else AuditTrailStatistics()
        self.delivery_timeout_seconds = delivery_timeout_seconds
        self.retry_backoff_seconds = retry_backoff_seconds
        self._config = {
            **producer_config,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": int(delivery_timeout_seconds * 1000),
            "linger.ms": 5,
            "client.id": producer_config.get("client.id", "kafkaguard-audit"),
            "logger": _LibrdkafkaLog(),
            "error_cb": self._on_error,
        }
        self._factory = producer_factory
        self._producer: Any = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        #: Positions acknowledged after the first unacknowledged one (not resent; cleared as the commit passes them).
        self._delivered: set[Position] = set()
        self._unreachable = False
        self._last_error: str | None = None
        self._fatal = False
        self._warned_at = -_WARN_SECONDS
        self._drops_lock = threading.Lock()
        self._drops_warned_at = -_WARN_SECONDS
        self._unwarned_drops = DropCounts()
        self._batch_bytes = max(1, min(_BATCH_BYTES, spool.max_bytes // 4))

    # ------------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Open the spool and start the sender.

        :raises InvalidConfigError: the spool directory cannot be written.
        """
        self.spool.open()
        self.statistics.watch_spool(lambda: self.spool.size_bytes)
        self._producer = self._factory(self._config)
        self._thread = threading.Thread(target=self._run, name="audit-kafka-sink", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the sender (what is not acknowledged stays in the spool for the next start) and close the spool."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(_CLOSE_SECONDS + self.delivery_timeout_seconds)
            self._thread = None
        if self._producer is not None:
            self._producer.flush(1.0)
            self._producer = None
        self._warn_drops(force=True)
        self.statistics.watch_spool(None)
        self.spool.close()

    # --------------------------------------------------------------------------------------------------- input

    def write(self, events: Sequence[Outgoing]) -> None:
        """Route and append to the spool (the audit writer's thread); wakes the sender."""
        items = []
        routed_drop = 0
        for event in events:
            if event.category is None:
                continue
            topic = self.router.route(event.category, event.subject, event.data)
            if topic is None:
                routed_drop += 1
                continue
            items.append(
                SpoolItem(
                    topic, event.subject.encode("utf-8"), event.line.encode("utf-8"), event.principal, event.category
                )
            )
        self.statistics.count(self.name, ROUTED_DROP, routed_drop)
        if not items:
            return
        dropped = self.spool.append(items)
        if self._unreachable:
            self.statistics.count(self.name, SPOOLED, len(items) - dropped.refused)
        if dropped:
            self.statistics.count(self.name, DROPPED, dropped.total)
            self.statistics.count_spool_drops(dropped.counts)
            with self._drops_lock:
                for (principal, category), records in dropped.counts.items():
                    self._unwarned_drops.add(principal, category, records)
            self._warn_drops()
        self._wake.set()

    # -------------------------------------------------------------------------------------------------- sender

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                sent_any = self._round()
            except Exception:
                log.exception("audit topic sink: unexpected error; retrying in %g s", self.retry_backoff_seconds)
                sent_any = False
                self._stopping.wait(self.retry_backoff_seconds)
            if not sent_any:
                self._wake.wait(0.2)
                self._wake.clear()
            self.spool.sync()
            self._warn_drops()

    def _round(self) -> bool:
        """Produce what the spool holds from its last commit, wait for the acknowledgements, commit the longest
        acknowledged prefix. False when there was nothing to send."""
        if self._fatal:
            self._renew_producer()
        batch = self.spool.read(_PROBE_RECORDS if self._unreachable else _BATCH_RECORDS, self._batch_bytes)
        if not batch:
            self._producer.poll(0)
            return False
        results: dict[Position, str | None] = {}
        pending = [(position, item) for position, item in batch if position not in self._delivered]
        produced = 0
        for position, item in pending:
            if not self._produce(position, item, results):
                break  # the rest waits for the next round
            produced += 1
        deadline = time.monotonic() + self.delivery_timeout_seconds + 5.0
        while len(results) < produced and time.monotonic() < deadline:
            self._producer.poll(0.1)
            if self._stopping.is_set() and len(results) < produced:
                self._producer.flush(min(_CLOSE_SECONDS, max(deadline - time.monotonic(), 0.0)))
                break
        return self._settle(batch, results)

    def _produce(self, position: Position, item: SpoolItem, results: dict[Position, str | None]) -> bool:
        def delivered(error: Any, _message: Any) -> None:
            results[position] = None if error is None else str(error)

        for _ in range(50):
            try:
                self._producer.produce(item.topic, value=item.value, key=item.key, on_delivery=delivered)
                return True
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                self._producer.poll(0.1)
            except Exception as e:  # noqa: BLE001 - an unknown topic name, a record too large …: not retriable here
                results[position] = f"{type(e).__name__}: {e}"
                return True
        return False

    def _settle(self, batch: list[tuple[Position, SpoolItem]], results: dict[Position, str | None]) -> bool:
        commit: Position | None = None
        sent = 0
        failure: str | None = None
        failed = 0
        for position, _item in batch:
            if position in self._delivered:
                if failure is None:
                    commit = position
                continue
            error = results.get(position, "not produced: the producer's local queue stayed full")
            if error is None:
                sent += 1
                if failure is None:
                    commit = position
                else:
                    self._delivered.add(position)
            else:
                failed += 1
                if failure is None:
                    failure = error
        self.statistics.count(self.name, SENT, sent)
        if commit is not None:
            self.spool.commit(commit)
            self._delivered = {p for p in self._delivered if p > commit}
        # The next round reads again from the commit: only the positions acknowledged after it stay pinned.
        self.spool.release(max(self._delivered, default=None))
        if failure is None:
            if self._unreachable:
                log.info("audit topic sink: the cluster takes records again; the spool's backlog is being sent")
            self._unreachable = False
            return True
        if not self._unreachable:
            self.statistics.count(self.name, SPOOLED, failed)
        self._unreachable = True
        self._warn(
            f"audit topic sink: {failed} record(s) not acknowledged ({failure}); they wait in the spool "
            f"({self.spool.pending_bytes} bytes pending) and are sent in order once the cluster takes them"
        )
        self._stopping.wait(self.retry_backoff_seconds)
        return sent > 0

    def _renew_producer(self) -> None:
        """After a fatal producer error (the idempotent producer's state is lost): a new producer; the spool resends
        from its commit."""
        log.error("audit topic sink: the producer failed fatally (%s); starting a new one", self._last_error)
        if self._producer is not None:
            self._producer.flush(1.0)
        self._producer = self._factory(self._config)
        self._delivered.clear()
        self.spool.release()
        self._fatal = False

    def _on_error(self, error: Any) -> None:
        self._last_error = str(error)
        fatal = getattr(error, "fatal", None)
        if callable(fatal) and fatal():
            self._fatal = True

    # ---------------------------------------------------------------------------------------------- warnings

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_SECONDS:
            self._warned_at = now
            log.warning("%s", message)

    def _warn_drops(self, *, force: bool = False) -> None:
        """Drops since the last warning, in one WARNING at most every ``_WARN_SECONDS`` (at close: whatever is left),
        so a count is never left unsaid; it names the principals that lost the most (``_WARN_PRINCIPALS``)."""
        with self._drops_lock:
            now = time.monotonic()
            if not self._unwarned_drops.total or (not force and now - self._drops_warned_at < _WARN_SECONDS):
                return
            dropped, self._unwarned_drops, self._drops_warned_at = self._unwarned_drops, DropCounts(), now
        most = "; ".join(
            f"{printable(principal)} {records} ("
            + ", ".join(f"{category or 'unknown'} {n}" for category, n in dropped.of(principal).items())
            + ")"
            for principal, records in dropped.principals(_WARN_PRINCIPALS)
        )
        log.warning(
            "audit topic sink: the spool is full (audit_spool_max_bytes %d): %d record(s) dropped (%d in all since "
            "start), the oldest of the principals with the largest share first; lost the most: %s",
            self.spool.max_bytes,
            dropped.total,
            self.spool.dropped,
            most,
        )

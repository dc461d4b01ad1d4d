"""Topic catalog use cases: CreateTopics, DeleteTopics, describe for Metadata, and Metadata's auto-creation.

The catalog is metadata only (names, ids, partition counts, replication factors, configs; no message data), and
this server is the cluster's one broker. CreateTopics follows the KRaft controller (``ControllerApis.createTopics``
and ``ReplicationControlManager.createTopics``, Kafka trunk 2024-10-25, SEMANTICS.md §0), per topic, first failure
wins, in this order:

1. a name given more than once → INVALID_REQUEST "Duplicate topic name." (one result for it, nothing created);
2. ``__cluster_metadata`` → INVALID_REQUEST "Creation of internal topic __cluster_metadata is prohibited.";
3. ``Topic.validate`` → INVALID_TOPIC_EXCEPTION "Topic name is invalid: …";
4. a stored name that collides ('.' and '_' are the same in metric names) → INVALID_TOPIC_EXCEPTION
   "Topic 'a.b' collides with existing topic: a_b"; the same name stored → TOPIC_ALREADY_EXISTS
   "Topic 'x' already exists.";
5. configs: a null value → INVALID_CONFIG "Null value not supported for topic configs: a,b"; a name that is not a
   topic config → INVALID_CONFIG "Unknown topic config name: x" (names only: values are not checked);
6. manual assignments: Kafka's two INVALID_REQUEST checks (replication factor, then partitions, must be -1), and
   then, since kafkaguard does not place replicas, INVALID_REQUEST ``MANUAL_ASSIGNMENT_UNSUPPORTED``;
7. replication factor 0 or below -1 → INVALID_REPLICATION_FACTOR "Replication factor must be larger than 0, or -1
   to use the default value."; partitions 0 or below -1 → INVALID_PARTITIONS "Number of partitions was set to an
   invalid non-positive value."; -1 means the service's default;
8. replication factor above the broker count → INVALID_REPLICATION_FACTOR "Unable to replicate the partition N
   time(s): The target replication factor of N cannot be reached because only B broker(s) are registered."

The topics that pass are stored in one transaction, which checks names and collisions again (another process may
have created one meanwhile: it then gets TOPIC_ALREADY_EXISTS, exactly one creator wins). Where kafkaguard differs:
results come one per distinct name in order of first mention (Kafka's order is a hash order); two colliding names
in one request are refused (the second collides with the first), where Kafka would store both; configs in a result
are the ones set, not every effective config.

Authorization (CREATE, DESCRIBE, DELETE, AUTO_CREATE; SEMANTICS.md §13) is the caller's: this service is asked
only about topics the caller may act on.

Reads never touch the store. The service holds the whole catalog in memory as one immutable ``TopicCatalog`` (by
name and by id, at one topic version of the store), replaced whole and read without a lock, so ``describe``,
``describe_by_id`` and ``cluster_id`` can be called on an event loop. Writes go to the store first (durable when it
returns) and then into the catalog, so a read after a write of this process sees it. Other processes' writes
reach the catalog through ``poll()``, which the server calls every ``sync_interval_seconds`` from a worker thread:
it compares the store's topic version with the catalog's and reloads the catalog when they differ.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeVar

from kafkaguard.errors import InvalidConfigError
from kafkaguard.model import Actor, ItemError, KafkaErrorCode, ManagementEvent
from kafkaguard.service.events import EventRelay, store_refused, topic_event
from kafkaguard.service.outage import unavailable
from kafkaguard.store import (
    ZERO_UUID,
    History,
    StoreError,
    StoreUnavailableError,
    TopicCreation,
    TopicRecord,
    TopicStore,
    random_uuid,
)

log = logging.getLogger(__name__)

_K = TypeVar("_K")
_K_contra = TypeVar("_K_contra", contravariant=True)


class _Deleter(Protocol[_K_contra]):
    """A store's ``delete_topics`` or ``delete_topics_by_id``."""

    def __call__(
        self, keys: Sequence[_K_contra], /, *, history: History[list[TopicRecord | None]] | None = None
    ) -> list[TopicRecord | None]: ...


def _id_refused(actor: Actor, topic_id: uuid.UUID, error: ItemError) -> ManagementEvent:
    """A refused deletion by id: the event names the id (no name is known)."""
    return topic_event("topic.deleted", actor, str(topic_id), None, error)


#: Kafka ``Topic.CLUSTER_METADATA_TOPIC_NAME``: the KRaft log, which CreateTopics may never create.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: Kafka 3.9's ``Topic.INTERNAL_TOPICS`` (flagged internal in Metadata; never authorized in AddPartitionsToTxn).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
#: Kafka ``Topic.MAX_NAME_LENGTH``.
MAX_NAME_LENGTH = 249
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

#: Every name Kafka's ``LogConfig`` accepts as a topic config (``LogConfig.configNames()``: the ``TopicConfig``
#: names plus the two ``QuotaConfig`` throttled-replicas lists), in the snapshot of SEMANTICS.md §0.
TOPIC_CONFIG_NAMES = frozenset(
    {
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)

DUPLICATE_NAME = "Duplicate topic name."
DUPLICATE_ID = "Duplicate topic id."
NO_NAME_OR_ID = "Neither topic name nor id were specified."
CLUSTER_METADATA_PROHIBITED = f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
INVALID_REPLICATION_FACTOR = "Replication factor must be larger than 0, or -1 to use the default value."
INVALID_PARTITIONS = "Number of partitions was set to an invalid non-positive value."
#: Kafka's controller writes one record per partition and refuses more than 10,000 records per request
#: (MAX_RECORDS_PER_USER_OP); kafkaguard makes that a per-topic limit with a clear error, so one request cannot
#: make every later Metadata answer enormous.
MAX_PARTITIONS = 10_000
ASSIGNMENT_WITH_REPLICATION_FACTOR = (
    "A manual partition assignment was specified, but replication factor was not set to -1."
)
ASSIGNMENT_WITH_PARTITIONS = "A manual partition assignment was specified, but numPartitions was not set to -1."
#: Ours: Kafka would place the replicas as asked; kafkaguard has one broker and stores no replicas.
MANUAL_ASSIGNMENT_UNSUPPORTED = (
    "Manual partition assignments are not supported by kafkaguard: leave them empty and set numPartitions "
    "and replicationFactor (or -1 for the defaults) instead."
)


def topic_name_error(name: str) -> str | None:
    """Kafka's ``Topic.validate`` message for an invalid name, or None for a valid one."""
    if not name:
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL_CHARS.issuperset(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTopic:
    """One topic of a CreateTopics request, as the wire carries it: -1 asks for the default partition count or
    replication factor; a config value may be None (which Kafka refuses); ``assignments`` are (partition index,
    broker ids) pairs, which kafkaguard refuses."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicCreateResult:
    """One topic's CreateTopics outcome. On success (and for validate-only), the id and the values the topic has:
    defaults resolved, ``configs`` the ones set. On failure, Kafka's defaults: zero id, -1, -1, no configs."""

    name: str
    error: ItemError | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class TopicDeleteResult:
    """One DeleteTopics outcome: the topic's name and id when known (a missing id has no name), and the error."""

    name: str | None
    topic_id: uuid.UUID = ZERO_UUID
    error: ItemError | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """One topic as Metadata describes it: its record, or the error for that name or id."""

    name: str | None
    record: TopicRecord | None = None
    error: ItemError | None = None
    topic_id: uuid.UUID = ZERO_UUID

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class TopicCatalog:
    """Every topic at one topic version of the store: built once, never changed, replaced whole. ``by_name``
    iterates in name order; ``by_id`` holds the same records by topic id. ``version`` -1 is a catalog the store's
    version is not known for (the next ``poll`` reloads it)."""

    version: int
    by_name: Mapping[str, TopicRecord]
    by_id: Mapping[uuid.UUID, TopicRecord]

    @classmethod
    def of(cls, records: Iterable[TopicRecord], version: int) -> TopicCatalog:
        by_name = {record.name: record for record in sorted(records, key=lambda record: record.name)}
        by_id = {record.topic_id: record for record in by_name.values()}
        return cls(version, MappingProxyType(by_name), MappingProxyType(by_id))

    def changed(
        self, version: int, *, added: Sequence[TopicRecord] = (), removed: Sequence[TopicRecord] = ()
    ) -> TopicCatalog:
        """A new catalog at ``version``: this one without ``removed`` (by name) and with ``added``."""
        gone = {record.name for record in removed}
        return TopicCatalog.of([*(r for r in self.by_name.values() if r.name not in gone), *added], version)


class TopicService:
    """The topic catalog of this one-broker cluster, backed by one store. Thread-safe: reads take the current
    ``TopicCatalog`` (no lock, no store); writes and reloads hold the service's lock, so the catalog follows the
    store's topic versions in order."""

    def __init__(
        self,
        store: TopicStore,
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        broker_count: int = 1,
        id_factory: Callable[[], uuid.UUID] = random_uuid,
        events: EventRelay | None = None,
    ) -> None:
        """``default_partitions`` and ``default_replication_factor`` are Kafka's ``num.partitions`` and
        ``default.replication.factor``, used for -1 and by auto-creation; ``broker_count`` is how many brokers
        replicas could be placed on (this server: 1). Reads the cluster id and the whole catalog from the store.

        :raises InvalidConfigError: a default or the broker count below 1.
        :raises StoreError: the store cannot be read (or, for a new store, the cluster id cannot be written).
        """
        for setting, value in (
            ("default_partitions", default_partitions),
            ("default_replication_factor", default_replication_factor),
            ("broker_count", broker_count),
        ):
            if value < 1:
                raise InvalidConfigError(f"{setting} must be at least 1, not {value}")
        self._events = events if events is not None else EventRelay()
        self._store = store
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor
        self._broker_count = broker_count
        self._id_factory = id_factory
        # Held across a store write and the catalog update that follows it, and across a reload; never by readers.
        self._lock = threading.Lock()
        self._cluster_id = store.cluster_id()
        snapshot = store.load_topics()
        self._catalog = TopicCatalog.of(snapshot.topics, snapshot.version)

    def cluster_id(self) -> str:
        """The cluster id for Metadata and DescribeCluster: the store's (the same across restarts and in every
        process on the same store), read once when the service was built. Reads no store."""
        return self._cluster_id

    @property
    def catalog(self) -> TopicCatalog:
        """The current catalog: every write of this process, and other processes' writes up to the last poll."""
        return self._catalog

    @property
    def version(self) -> int:
        """The store's topic version the catalog reflects (-1: unknown until the next poll)."""
        return self._catalog.version

    # ------------------------------------------------------------------------------------------- following

    def poll(self) -> bool:
        """Reload the catalog if the store's topic version is not the catalog's (another process created or
        deleted a topic); one cheap version read when nothing changed. True if it reloaded. The server calls it
        every ``sync_interval_seconds`` from a worker thread.

        :raises StoreError: the store cannot be read.
        """
        if self._store.topic_version() == self._catalog.version:
            return False
        with self._lock:
            if self._store.topic_version() == self._catalog.version:  # a write of this process caught up meanwhile
                return False
            self._reload()
        return True

    def _reload(self) -> None:
        snapshot = self._store.load_topics()
        self._catalog = TopicCatalog.of(snapshot.topics, snapshot.version)

    def _apply(self, *, added: Sequence[TopicRecord] = (), removed: Sequence[TopicRecord] = ()) -> None:
        """Put this process's committed write into the catalog; called with the lock held, right after the write.

        Every topic created or deleted takes one topic version, so if the store is now exactly this write's number
        of changes past the catalog, no other process wrote in between and the catalog plus this write is the
        store's state; otherwise reload.
        """
        catalog = self._catalog
        try:
            version = self._store.topic_version()
            if version == catalog.version + len(added) + len(removed):
                self._catalog = catalog.changed(version, added=added, removed=removed)
            else:
                self._reload()
        except StoreError as e:
            # The write itself is committed: show it at once, and let the next poll reload (-1 matches no version).
            self._catalog = catalog.changed(-1, added=added, removed=removed)
            log.warning(
                "topic catalog: the store's topic version cannot be read after a write (%s); reloading later", e
            )

    # ---------------------------------------------------------------------------------------------- create

    def create_topics(
        self, topics: Sequence[NewTopic], *, actor: Actor, validate_only: bool = False
    ) -> list[TopicCreateResult]:
        """CreateTopics (see the module docstring): one result per distinct name, in order of first mention.
        With ``validate_only`` (v1+) every check runs and nothing is stored; a success then carries a fresh id
        that no topic has, as Kafka's does.

        Events (not for ``validate_only``): one ``topic.created`` per topic stored, written with it; one per
        refused name, with its error.

        :raises StoreError: nothing was created (the whole request fails).
        """
        results = self._create_topics(topics, actor, validate_only)
        if not validate_only:
            self._refused([topic_event("topic.created", actor, r.name, None, r.error) for r in results if r.error])
        return results

    def _refused(self, events: list[ManagementEvent]) -> None:
        store_refused(self._store, events)
        self._events.publish(events)

    def _create_topics(self, topics: Sequence[NewTopic], actor: Actor, validate_only: bool) -> list[TopicCreateResult]:
        counts = Counter(topic.name for topic in topics)
        firsts = list({topic.name: topic for topic in topics}.values())  # first-mention order
        errors: dict[str, ItemError] = {}
        for topic in firsts:
            if counts[topic.name] > 1:
                errors[topic.name] = ItemError(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
            elif topic.name == CLUSTER_METADATA_TOPIC:
                errors[topic.name] = ItemError(KafkaErrorCode.INVALID_REQUEST, CLUSTER_METADATA_PROHIBITED)
            elif (reason := topic_name_error(topic.name)) is not None:
                errors[topic.name] = ItemError(KafkaErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        candidates = [topic for topic in firsts if topic.name not in errors]
        try:
            records = self._create(candidates, errors, actor, validate_only=validate_only)
        except StoreUnavailableError as e:
            errors.update((topic.name, unavailable(e)) for topic in candidates if topic.name not in errors)
            records = {}
        return [
            TopicCreateResult(topic.name, errors[topic.name]) if topic.name in errors else _created(records[topic.name])
            for topic in firsts
        ]

    def _create(
        self, candidates: Sequence[NewTopic], errors: dict[str, ItemError], actor: Actor, *, validate_only: bool
    ) -> dict[str, TopicRecord]:
        """The checks that need the store, then the write: the records created (or that would be), by name; the
        refused ones go into ``errors``."""
        conflicts = self._store.conflicting_topics([topic.name for topic in candidates]) if candidates else {}
        records: dict[str, TopicRecord] = {}
        for topic in candidates:
            conflict = conflicts.get(topic.name)
            checked = _conflict_error(topic.name, conflict) if conflict is not None else self._check(topic)
            if isinstance(checked, TopicRecord):
                records[topic.name] = checked
            else:
                errors[topic.name] = checked
        if records and not validate_only:
            events: list[ManagementEvent] = []

            def history(creations: list[TopicCreation]) -> list[ManagementEvent]:
                events[:] = [
                    topic_event("topic.created", actor, c.record.name, c.record) for c in creations if c.created
                ]
                return events

            with self._lock:
                creations = self._store.create_topics(list(records.values()), history=history)
                self._apply(added=[creation.record for creation in creations if creation.created])
            self._events.publish(events)
            for creation in creations:
                if creation.conflict is not None:
                    errors[creation.record.name] = _conflict_error(creation.record.name, creation.conflict)
                    del records[creation.record.name]
        return records

    def auto_create(self, name: str, *, actor: Actor) -> TopicCreateResult:
        """Create ``name`` with the defaults, for Metadata once the caller has checked AUTO_CREATE (KIP-755) and
        that auto-creation is on. A topic that exists (another request won the race, or another process created it
        since the last poll) is a success with its stored values, read from the store; an invalid name gets
        INVALID_TOPIC_EXCEPTION (Kafka's ``AutoTopicCreationManager``).

        :raises StoreError: nothing was created.
        """
        result = self.create_topics([NewTopic(name=name)], actor=actor)[0]
        if result.error is not None and result.error.code is KafkaErrorCode.TOPIC_ALREADY_EXISTS:
            record = self._store.get_topics([name]).get(name)
            if record is not None:
                return _created(record)
        return result

    def _check(self, topic: NewTopic) -> TopicRecord | ItemError:
        """Steps 5-8 of the module docstring: the record to store, or the error."""
        nulls = [config for config, value in topic.configs.items() if value is None]
        if nulls:
            return ItemError(
                KafkaErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
            )
        unknown = next((config for config in topic.configs if config not in TOPIC_CONFIG_NAMES), None)
        if unknown is not None:
            return ItemError(KafkaErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown}")
        if topic.assignments:
            if topic.replication_factor != -1:
                return ItemError(KafkaErrorCode.INVALID_REQUEST, ASSIGNMENT_WITH_REPLICATION_FACTOR)
            if topic.num_partitions != -1:
                return ItemError(KafkaErrorCode.INVALID_REQUEST, ASSIGNMENT_WITH_PARTITIONS)
            return ItemError(KafkaErrorCode.INVALID_REQUEST, MANUAL_ASSIGNMENT_UNSUPPORTED)
        if topic.replication_factor < -1 or topic.replication_factor == 0:
            return ItemError(KafkaErrorCode.INVALID_REPLICATION_FACTOR, INVALID_REPLICATION_FACTOR)
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            return ItemError(KafkaErrorCode.INVALID_PARTITIONS, INVALID_PARTITIONS)
        partitions = self._default_partitions if topic.num_partitions == -1 else topic.num_partitions
        if partitions > MAX_PARTITIONS:
            return ItemError(
                KafkaErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS} partitions per topic.",
            )
        replication = self._default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
        if replication > self._broker_count:
            return ItemError(
                KafkaErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                f"{replication} cannot be reached because only {self._broker_count} broker(s) are registered.",
            )
        configs = {config: value for config, value in topic.configs.items() if value is not None}
        return TopicRecord(
            name=topic.name,
            topic_id=self._id_factory(),
            num_partitions=partitions,
            replication_factor=replication,
            configs=configs,
        )

    # ---------------------------------------------------------------------------------------------- delete

    def delete_topics(self, names: Sequence[str], *, actor: Actor) -> list[TopicDeleteResult]:
        """DeleteTopics by name (``ControllerApis.deleteTopics``): one result per distinct name, in order of first
        mention. A name given twice → INVALID_REQUEST "Duplicate topic name." and is not deleted; a missing topic
        → UNKNOWN_TOPIC_OR_PARTITION. The rest are removed in one transaction; each result carries the id.

        :raises StoreError: nothing was removed.
        """
        counts = Counter(names)
        unique = [name for name, count in counts.items() if count == 1]
        try:
            removed = (
                dict(zip(unique, self._delete(self._store.delete_topics, unique, actor), strict=True)) if unique else {}
            )
        except StoreUnavailableError as e:
            failed = unavailable(e)
            return [
                TopicDeleteResult(
                    n, ZERO_UUID, failed if c == 1 else ItemError(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
                )
                for n, c in counts.items()
            ]
        results: list[TopicDeleteResult] = []
        for name, count in counts.items():
            record = removed.get(name)
            if count > 1:
                results.append(
                    TopicDeleteResult(name, ZERO_UUID, ItemError(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_NAME))
                )
            elif record is None:
                results.append(TopicDeleteResult(name, ZERO_UUID, ItemError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            else:
                results.append(TopicDeleteResult(name, record.topic_id))
        self._refused([topic_event("topic.deleted", actor, r.name or "", None, r.error) for r in results if r.error])
        return results

    def delete_topics_by_id(self, ids: Sequence[uuid.UUID], *, actor: Actor) -> list[TopicDeleteResult]:
        """DeleteTopics by id (v6+): as ``delete_topics``, with "Duplicate topic id.", UNKNOWN_TOPIC_ID for an id
        no topic has, and INVALID_REQUEST "Neither topic name nor id were specified." for the zero id.

        :raises StoreError: nothing was removed.
        """
        counts = Counter(ids)
        unique = [topic_id for topic_id, count in counts.items() if count == 1 and topic_id != ZERO_UUID]
        outage: ItemError | None = None
        try:
            removed = (
                dict(zip(unique, self._delete(self._store.delete_topics_by_id, unique, actor), strict=True))
                if unique
                else {}
            )
        except StoreUnavailableError as e:
            removed, outage = {}, unavailable(e)
        results: list[TopicDeleteResult] = []
        for topic_id, count in counts.items():
            record = removed.get(topic_id)
            if topic_id == ZERO_UUID:
                results.append(
                    TopicDeleteResult(None, topic_id, ItemError(KafkaErrorCode.INVALID_REQUEST, NO_NAME_OR_ID))
                )
            elif count > 1:
                results.append(
                    TopicDeleteResult(None, topic_id, ItemError(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_ID))
                )
            elif outage is not None:
                results.append(TopicDeleteResult(None, topic_id, outage))
            elif record is None:
                results.append(TopicDeleteResult(None, topic_id, ItemError(KafkaErrorCode.UNKNOWN_TOPIC_ID)))
            else:
                results.append(TopicDeleteResult(record.name, topic_id))
        self._refused([_id_refused(actor, r.topic_id, r.error) for r in results if r.error is not None])
        return results

    def _delete(self, delete: _Deleter[_K], keys: Sequence[_K], actor: Actor) -> list[TopicRecord | None]:
        """``delete(keys)`` (a store's delete by name or by id) with one ``topic.deleted`` event per topic removed,
        then its removals into the catalog."""
        events: list[ManagementEvent] = []

        def history(removed: list[TopicRecord | None]) -> list[ManagementEvent]:
            events[:] = [topic_event("topic.deleted", actor, r.name, r) for r in removed if r is not None]
            return events

        with self._lock:
            removed = delete(keys, history=history)
            self._apply(removed=[record for record in removed if record is not None])
        self._events.publish(events)
        return removed

    # -------------------------------------------------------------------------------------------- describe

    def describe(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Metadata's view: every topic sorted by name for None; else one description per distinct name, in order
        of first mention: the record, or INVALID_TOPIC_EXCEPTION for an invalid name and
        UNKNOWN_TOPIC_OR_PARTITION for a missing one (``KafkaApis.getTopicMetadata`` without auto-creation).
        From the current catalog (see ``catalog``): reads no store, takes no lock.
        """
        catalog = self._catalog
        if names is None:
            return [
                TopicDescription(record.name, record, topic_id=record.topic_id) for record in catalog.by_name.values()
            ]
        results: list[TopicDescription] = []
        for name in dict.fromkeys(names):
            record = catalog.by_name.get(name)
            if record is not None:
                results.append(TopicDescription(name, record, topic_id=record.topic_id))
            elif (reason := topic_name_error(name)) is not None:
                results.append(TopicDescription(name, None, ItemError(KafkaErrorCode.INVALID_TOPIC_EXCEPTION, reason)))
            else:
                results.append(TopicDescription(name, None, ItemError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
        return results

    def describe_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicDescription]:
        """Metadata v10+ by topic id: one description per distinct id, in order: the record, or UNKNOWN_TOPIC_ID
        (with no name). From the current catalog: reads no store, takes no lock.
        """
        catalog = self._catalog
        results: list[TopicDescription] = []
        for topic_id in dict.fromkeys(ids):
            record = catalog.by_id.get(topic_id)
            if record is not None:
                results.append(TopicDescription(record.name, record, topic_id=topic_id))
            else:
                results.append(
                    TopicDescription(None, None, ItemError(KafkaErrorCode.UNKNOWN_TOPIC_ID), topic_id=topic_id)
                )
        return results


def _conflict_error(name: str, conflict: TopicRecord) -> ItemError:
    if conflict.name == name:
        return ItemError(KafkaErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    return ItemError(
        KafkaErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {conflict.name}"
    )


def _created(record: TopicRecord) -> TopicCreateResult:
    return TopicCreateResult(
        record.name,
        topic_id=record.topic_id,
        num_partitions=record.num_partitions,
        replication_factor=record.replication_factor,
        configs=record.configs,
    )

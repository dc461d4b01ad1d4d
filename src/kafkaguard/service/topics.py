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
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from kafkaguard.errors import InvalidConfigError
from kafkaguard.service.errors import KafkaErrorCode
from kafkaguard.store import ZERO_UUID, TopicRecord, TopicStore, random_uuid

log = logging.getLogger(__name__)

_NONE = KafkaErrorCode.NONE
#: Kafka ``Topic.CLUSTER_METADATA_TOPIC_NAME``: the KRaft log, which CreateTopics may never create.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
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
    error_code: KafkaErrorCode = _NONE
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def succeeded(self) -> bool:
        return self.error_code is _NONE


@dataclass(frozen=True, slots=True)
class TopicDeleteResult:
    """One DeleteTopics outcome: the topic's name and id when known (a missing id has no name), and the error."""

    name: str | None
    topic_id: uuid.UUID = ZERO_UUID
    error_code: KafkaErrorCode = _NONE
    error_message: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.error_code is _NONE


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """One topic as Metadata describes it: its record, or the error for that name or id."""

    name: str | None
    record: TopicRecord | None = None
    error_code: KafkaErrorCode = _NONE
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID

    @property
    def succeeded(self) -> bool:
        return self.error_code is _NONE


def _error(code: KafkaErrorCode, message: str | None = None) -> tuple[KafkaErrorCode, str | None]:
    return code, message if message is not None else code.default_message


class TopicService:
    """The topic catalog of this one-broker cluster, backed by one store. Thread-safe as its store is."""

    def __init__(
        self,
        store: TopicStore,
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        broker_count: int = 1,
        id_factory: Callable[[], uuid.UUID] = random_uuid,
    ) -> None:
        """``default_partitions`` and ``default_replication_factor`` are Kafka's ``num.partitions`` and
        ``default.replication.factor``, used for -1 and by auto-creation; ``broker_count`` is how many brokers
        replicas could be placed on (this server: 1).

        :raises InvalidConfigError: a default or the broker count below 1.
        """
        for setting, value in (
            ("default_partitions", default_partitions),
            ("default_replication_factor", default_replication_factor),
            ("broker_count", broker_count),
        ):
            if value < 1:
                raise InvalidConfigError(f"{setting} must be at least 1, not {value}")
        self._store = store
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor
        self._broker_count = broker_count
        self._id_factory = id_factory

    def cluster_id(self) -> str:
        """The cluster id for Metadata and DescribeCluster: the store's, the same across restarts.

        :raises StoreError: the store cannot be read or written.
        """
        return self._store.cluster_id()

    # ---------------------------------------------------------------------------------------------- create

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False) -> list[TopicCreateResult]:
        """CreateTopics (see the module docstring): one result per distinct name, in order of first mention.
        With ``validate_only`` (v1+) every check runs and nothing is stored; a success then carries a fresh id
        that no topic has, as Kafka's does.

        :raises StoreError: nothing was created (the whole request fails).
        """
        counts = Counter(topic.name for topic in topics)
        firsts = list({topic.name: topic for topic in topics}.values())  # first-mention order
        errors: dict[str, tuple[KafkaErrorCode, str | None]] = {}
        for topic in firsts:
            if counts[topic.name] > 1:
                errors[topic.name] = _error(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
            elif topic.name == CLUSTER_METADATA_TOPIC:
                errors[topic.name] = _error(KafkaErrorCode.INVALID_REQUEST, CLUSTER_METADATA_PROHIBITED)
            elif (reason := topic_name_error(topic.name)) is not None:
                errors[topic.name] = _error(KafkaErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        candidates = [topic for topic in firsts if topic.name not in errors]
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
            for creation in self._store.create_topics(list(records.values())):
                if creation.conflict is not None:
                    errors[creation.record.name] = _conflict_error(creation.record.name, creation.conflict)
                    del records[creation.record.name]
            if records:
                log.info("created topics: %s", ", ".join(records))
        return [
            TopicCreateResult(topic.name, *errors[topic.name])
            if topic.name in errors
            else _created(records[topic.name])
            for topic in firsts
        ]

    def auto_create(self, name: str) -> TopicCreateResult:
        """Create ``name`` with the defaults, for Metadata once the caller has checked AUTO_CREATE (KIP-755) and
        that auto-creation is on. A topic that exists (another request won the race) is a success with its stored
        values; an invalid name gets INVALID_TOPIC_EXCEPTION (Kafka's ``AutoTopicCreationManager``).

        :raises StoreError: nothing was created.
        """
        result = self.create_topics([NewTopic(name=name)])[0]
        if result.error_code is KafkaErrorCode.TOPIC_ALREADY_EXISTS:
            record = self._store.get_topics([name]).get(name)
            if record is not None:
                return _created(record)
        return result

    def _check(self, topic: NewTopic) -> TopicRecord | tuple[KafkaErrorCode, str | None]:
        """Steps 5-8 of the module docstring: the record to store, or the error."""
        nulls = [config for config, value in topic.configs.items() if value is None]
        if nulls:
            return _error(
                KafkaErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
            )
        unknown = next((config for config in topic.configs if config not in TOPIC_CONFIG_NAMES), None)
        if unknown is not None:
            return _error(KafkaErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown}")
        if topic.assignments:
            if topic.replication_factor != -1:
                return _error(KafkaErrorCode.INVALID_REQUEST, ASSIGNMENT_WITH_REPLICATION_FACTOR)
            if topic.num_partitions != -1:
                return _error(KafkaErrorCode.INVALID_REQUEST, ASSIGNMENT_WITH_PARTITIONS)
            return _error(KafkaErrorCode.INVALID_REQUEST, MANUAL_ASSIGNMENT_UNSUPPORTED)
        if topic.replication_factor < -1 or topic.replication_factor == 0:
            return _error(KafkaErrorCode.INVALID_REPLICATION_FACTOR, INVALID_REPLICATION_FACTOR)
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            return _error(KafkaErrorCode.INVALID_PARTITIONS, INVALID_PARTITIONS)
        partitions = self._default_partitions if topic.num_partitions == -1 else topic.num_partitions
        if partitions > MAX_PARTITIONS:
            return _error(
                KafkaErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS} partitions per topic.",
            )
        replication = self._default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
        if replication > self._broker_count:
            return _error(
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

    def delete_topics(self, names: Sequence[str]) -> list[TopicDeleteResult]:
        """DeleteTopics by name (``ControllerApis.deleteTopics``): one result per distinct name, in order of first
        mention. A name given twice → INVALID_REQUEST "Duplicate topic name." and is not deleted; a missing topic
        → UNKNOWN_TOPIC_OR_PARTITION. The rest are removed in one transaction; each result carries the id.

        :raises StoreError: nothing was removed.
        """
        counts = Counter(names)
        unique = [name for name, count in counts.items() if count == 1]
        removed = dict(zip(unique, self._store.delete_topics(unique), strict=True)) if unique else {}
        results: list[TopicDeleteResult] = []
        for name, count in counts.items():
            record = removed.get(name)
            if count > 1:
                results.append(
                    TopicDeleteResult(name, ZERO_UUID, *_error(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_NAME))
                )
            elif record is None:
                results.append(TopicDeleteResult(name, ZERO_UUID, *_error(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            else:
                results.append(TopicDeleteResult(name, record.topic_id))
        _log_deleted(removed.values())
        return results

    def delete_topics_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicDeleteResult]:
        """DeleteTopics by id (v6+): as ``delete_topics``, with "Duplicate topic id.", UNKNOWN_TOPIC_ID for an id
        no topic has, and INVALID_REQUEST "Neither topic name nor id were specified." for the zero id.

        :raises StoreError: nothing was removed.
        """
        counts = Counter(ids)
        unique = [topic_id for topic_id, count in counts.items() if count == 1 and topic_id != ZERO_UUID]
        removed = dict(zip(unique, self._store.delete_topics_by_id(unique), strict=True)) if unique else {}
        results: list[TopicDeleteResult] = []
        for topic_id, count in counts.items():
            record = removed.get(topic_id)
            if topic_id == ZERO_UUID:
                results.append(
                    TopicDeleteResult(None, topic_id, *_error(KafkaErrorCode.INVALID_REQUEST, NO_NAME_OR_ID))
                )
            elif count > 1:
                results.append(TopicDeleteResult(None, topic_id, *_error(KafkaErrorCode.INVALID_REQUEST, DUPLICATE_ID)))
            elif record is None:
                results.append(TopicDeleteResult(None, topic_id, *_error(KafkaErrorCode.UNKNOWN_TOPIC_ID)))
            else:
                results.append(TopicDeleteResult(record.name, topic_id))
        _log_deleted(removed.values())
        return results

    # -------------------------------------------------------------------------------------------- describe

    def describe(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Metadata's view: every topic sorted by name for None; else one description per distinct name, in order
        of first mention: the record, or INVALID_TOPIC_EXCEPTION for an invalid name and
        UNKNOWN_TOPIC_OR_PARTITION for a missing one (``KafkaApis.getTopicMetadata`` without auto-creation).

        :raises StoreError: the store cannot be read.
        """
        if names is None:
            return [
                TopicDescription(record.name, record, topic_id=record.topic_id) for record in self._store.list_topics()
            ]
        unique = list(dict.fromkeys(names))
        found = self._store.get_topics(unique)
        results: list[TopicDescription] = []
        for name in unique:
            record = found.get(name)
            if record is not None:
                results.append(TopicDescription(name, record, topic_id=record.topic_id))
            elif (reason := topic_name_error(name)) is not None:
                results.append(TopicDescription(name, None, KafkaErrorCode.INVALID_TOPIC_EXCEPTION, reason))
            else:
                results.append(TopicDescription(name, None, *_error(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
        return results

    def describe_by_id(self, ids: Sequence[uuid.UUID]) -> list[TopicDescription]:
        """Metadata v10+ by topic id: one description per distinct id, in order: the record, or UNKNOWN_TOPIC_ID
        (with no name).

        :raises StoreError: the store cannot be read.
        """
        unique = list(dict.fromkeys(ids))
        found = self._store.get_topics_by_id(unique)
        results: list[TopicDescription] = []
        for topic_id in unique:
            record = found.get(topic_id)
            if record is not None:
                results.append(TopicDescription(record.name, record, topic_id=topic_id))
            else:
                results.append(
                    TopicDescription(None, None, *_error(KafkaErrorCode.UNKNOWN_TOPIC_ID), topic_id=topic_id)
                )
        return results


def _conflict_error(name: str, conflict: TopicRecord) -> tuple[KafkaErrorCode, str | None]:
    if conflict.name == name:
        return _error(KafkaErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    return _error(
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


def _log_deleted(records: Iterable[TopicRecord | None]) -> None:
    names = [record.name for record in records if record is not None]
    if names:
        log.info("deleted topics: %s", ", ".join(names))

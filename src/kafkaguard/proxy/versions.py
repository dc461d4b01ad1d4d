"""The APIs and versions the proxy offers: what it can authorize exactly, and the upstream serves (fail closed).

``CAPS`` caps each forwarded API at the last version the proxy authorizes exactly with topic names (topics named
by id are resolved to their names first, ``topic_ids``, and the name authorized) and without upstream addresses
reaching a client. Produce v10-v11 and Fetch v16-v17 answers may carry node endpoints for KIP-951 leader discovery,
rewritten to the proxy's per-broker addresses (``handlers.addresses.rewrite_node_endpoints``; a Fetch answer's in
place as it streams, ``handlers.fetch``, ``fetch_walk``); Produce v12 belongs to KIP-890's transactions v2
(partitions added to a transaction by the Produce itself), which the proxy does not authorize. By id: Fetch v13-v17,
Metadata v12 by id, DeleteTopics v6; and DescribeTopicPartitions v0 (KIP-966), paged over what the caller may
describe. OffsetCommit/OffsetFetch v10+ name topics by id and are not offered yet.

The KIP-848 consumer group protocol is offered at Kafka 3.9's versions: ConsumerGroupHeartbeat v0 and
ConsumerGroupDescribe v0 (``handlers.groups``, ``handlers.group_admin``), and OffsetCommit v9 / OffsetFetch v9, the
versions whose member id and epoch a KIP-848 member commits and fetches with (authorized by topic name as before; the
member fields pass unchanged). ConsumerGroupHeartbeat v1 (Kafka 4.0: ``SubscribedTopicRegex``, client-generated
member ids) is not offered, so a regex never reaches the upstream to be resolved there.

``negotiate`` intersects these with the upstream's ApiVersions, for the APIs the proxy has a handler for
(``connection.HANDLERS``): an API the upstream lacks is not offered, and an API without a proxy handler is never
offered at all, so a client cannot reach the upstream with a request the proxy did not authorize.

``FORWARDED_FROM`` names the versions the proxy forwards at a higher version than the client's, because the lower
ones cannot say what the proxy must ask: Metadata v1–v3 have no ``allow_auto_topic_creation`` and Kafka reads its
absence as true, so the proxy's "describe without creating" would create every topic named on a broker with
``auto.create.topics.enable`` (Kafka's default). They go upstream as v4 (the same request plus that field; the v4
response is v3's) and are answered at the client's version. ``negotiate`` offers them whenever the upstream serves
that version, even if it no longer serves the client's (Kafka 4.0 removed Metadata v0–v3).

``negotiate_features`` does for the cluster's features (ApiVersions v3+, KIP-584) what ``negotiate`` does for the
APIs. Clients read a finalized feature to pick a protocol: Java's producer turns on KIP-890's transactions v2 when
``transaction.version`` ≥ 2 (``TransactionManager.maybeUpdateTransactionV2Enabled``) and then relies on Produce v12
adding partitions to the transaction itself, EndTxn v5 and TxnOffsetCommit v5; a consumer on the KIP-848 protocol
(``group.version`` ≥ 1) needs ConsumerGroupHeartbeat and OffsetCommit v9, below which the coordinator refuses its
commits ("OffsetCommit version 9 or above must be used by members using the consumer group protocol",
``ConsumerGroup.validateOffsetCommit``, 3.9). Java's KafkaConsumer and librdkafka choose the consumer protocol by
whether ConsumerGroupHeartbeat is offered (librdkafka reads no features at all), and ``kafka-features.sh`` /
``Admin.describeFeatures`` show what ApiVersions says. So a feature is forwarded only at the levels whose APIs the
proxy offers: ``FEATURES`` maps each feature to the APIs (and lowest versions) each level needs, and a feature is
capped at its highest level whose needs, and those of every level below it, are met (level 0, "off", is not
listed). Worked example: upstream finalized ``transaction.version`` 2 and ``group.version`` 1, the proxy offering
Produce up to v11 and no ConsumerGroupHeartbeat → ``transaction.version`` 1 (Java then uses the v1 protocol, which a
4.0 broker still serves by request version) and no ``group.version``. A feature ``FEATURES`` does not know is not
forwarded (fail closed: it may change how clients use the APIs the proxy authorizes, as transactions v2 does). The
features are read at start with the API versions (a change of them upstream is seen after a restart, as a new API
version is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkaguard.apis import STORE_VERSIONS
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.api_versions import Features
from kafkaguard.protocol.codec import Versions
from kafkaguard.protocol.connection import CONNECTION_VERSIONS

#: Forwarded after authorization: (lowest, highest) version the proxy can authorize exactly.
CAPS: Mapping[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.METADATA: (1, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (2, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
}

#: Answered by the proxy itself from its store (never forwarded): the ACL, SCRAM and client-quota APIs.
LOCAL: Mapping[ApiKey, tuple[int, int]] = {**CONNECTION_VERSIONS, **STORE_VERSIONS}


#: API → the lowest version the proxy forwards it at: a client's lower version goes upstream at this one.
FORWARDED_FROM: Mapping[ApiKey, int] = {ApiKey.METADATA: 4}


def forwarded_version(api_key: ApiKey, api_version: int) -> int:
    """The version a client's ``api_key`` request of ``api_version`` is forwarded at (see ``FORWARDED_FROM``)."""
    return max(api_version, FORWARDED_FROM.get(api_key, api_version))


def negotiate(upstream: Mapping[int, tuple[int, int]], forwarded: Iterable[ApiKey]) -> Versions:
    """The proxy's ApiVersions: every local API, and each ``forwarded`` API (those with a handler) in the overlap
    of its cap with the upstream's range (absent when they do not overlap or the upstream lacks it). An API of
    ``FORWARDED_FROM`` is offered below that version only when the upstream serves it (then from the cap's lowest,
    whatever the upstream's lowest): Metadata against upstream v0-v12 → v1-v12, v4-v12 → v1-v12, v0-v3 → none."""
    offered: dict[ApiKey, tuple[int, int]] = dict(LOCAL)
    for key in forwarded:
        low, high = CAPS[key]
        theirs = upstream.get(int(key))
        if theirs is None:
            continue
        floor = FORWARDED_FROM.get(key)
        if floor is not None and theirs[0] <= floor <= theirs[1]:
            theirs = min(theirs[0], low), theirs[1]  # the versions below ``floor`` are forwarded at ``floor``
        elif floor is not None:
            low = max(low, floor)  # nothing below ``floor`` can be forwarded safely (fail closed)
        overlap = max(low, theirs[0]), min(high, theirs[1])
        if overlap[0] <= overlap[1]:
            offered[key] = overlap
    return offered


@dataclass(frozen=True, slots=True)
class FeatureRule:
    """What clients do with one feature: ``needs`` maps a level to the APIs a client uses from that level on, with
    the lowest version it uses of each; ``highest`` is the highest level whose client behaviour is known (None: no
    client changes anything at any level, as for ``metadata.version``)."""

    needs: Mapping[int, Mapping[ApiKey, int]]
    highest: int | None


#: The features the proxy forwards (see the module docstring). Levels from Kafka 3.9's ``server.common`` enums
#: (``GroupVersion``, ``TransactionVersion``) and KIP-890 part 2 (Kafka 4.0: Produce v12, EndTxn v5, TxnOffsetCommit
#: v5 "if transaction V2 is enabled").
FEATURES: Mapping[str, FeatureRule] = {
    # the cluster's metadata format and the controller quorum's (KIP-853), and KIP-966's eligible leader replicas:
    # the brokers' business, no client protocol depends on them
    "metadata.version": FeatureRule({}, None),
    "kraft.version": FeatureRule({}, None),
    "eligible.leader.replicas.version": FeatureRule({}, None),
    "group.version": FeatureRule({1: {ApiKey.CONSUMER_GROUP_HEARTBEAT: 0, ApiKey.OFFSET_COMMIT: 9}}, 1),
    "transaction.version": FeatureRule(
        {2: {ApiKey.PRODUCE: 12, ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5}}, 2
    ),  # level 1 only changes the coordinator's own records (flexible transaction state)
}


#: ApiVersions v4 is the first whose answer lists supported features with a minimum version of 0 (KAFKA-17011; Kafka
#: 3.9 omits them below v4): the proxy asks its upstream at v4 when it can, to know every feature.
FEATURES_COMPLETE_FROM = 4


def features_of(answer: Any) -> Features:
    """The features of an upstream's ApiVersions v3+ answer (none below v3)."""
    return Features(
        supported=tuple(
            (str(f.name), int(f.min_version), int(f.max_version)) for f in getattr(answer, "supported_features", ())
        ),
        finalized=tuple(
            (str(f.name), int(f.min_version_level), int(f.max_version_level))
            for f in getattr(answer, "finalized_features", ())
        ),
        epoch=int(getattr(answer, "finalized_features_epoch", -1)),
    )


def servable_level(name: str, offered: Versions) -> int:
    """The highest level of feature ``name`` the proxy can let clients use with the ``offered`` versions (0: none;
    a feature ``FEATURES`` does not know: -1, never forwarded)."""
    rule = FEATURES.get(name)
    if rule is None:
        return -1
    top = rule.highest if rule.highest is not None else 2**15 - 1  # an int16 level: any
    for level in sorted(rule.needs):
        if level > top:
            break
        if any(offered.get(api, (0, -1))[1] < version for api, version in rule.needs[level].items()):
            return level - 1
    return top


def negotiate_features(upstream: Features, offered: Versions) -> Features:
    """The upstream's ``features`` as the proxy answers them, given the versions it ``offered``: each capped at its
    ``servable_level`` (a supported range whose cap falls below its minimum is left out; a finalized one capped to
    level 0 is "off" and left out), unknown ones left out, the epoch kept."""
    supported = []
    for name, low, high in upstream.supported:
        cap = min(high, servable_level(name, offered))
        if cap >= low:
            supported.append((name, low, cap))
    finalized = []
    for name, low, high in upstream.finalized:
        cap = min(high, servable_level(name, offered))
        if cap >= 1:
            finalized.append((name, min(low, cap), cap))
    return Features(tuple(supported), tuple(finalized), upstream.epoch)

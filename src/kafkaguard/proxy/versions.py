"""The APIs and versions the proxy offers: what it can authorize exactly, and the upstream serves (fail closed).

``CAPS`` caps each forwarded API at the last version the proxy authorizes exactly with topic names and
without broker endpoints in the body: Produce v10+ and Fetch v16+ carry node endpoints for KIP-951 leader
discovery (they would reveal upstream addresses), Fetch v13+ and OffsetCommit/OffsetFetch v10+ name topics by id,
DeleteTopics v6 deletes by id, and the KIP-890 versions belong to a protocol the proxy does not yet authorize.
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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.protocol.codec import SUPPORTED_VERSIONS, Versions

#: Forwarded after authorization: (lowest, highest) version the proxy can authorize exactly.
CAPS: Mapping[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
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
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
}

#: Answered by the proxy itself from its store (never forwarded): the ACL, SCRAM and client-quota APIs.
LOCAL: Mapping[ApiKey, tuple[int, int]] = {
    key: SUPPORTED_VERSIONS[key]
    for key in (
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.DESCRIBE_ACLS,
        ApiKey.CREATE_ACLS,
        ApiKey.DELETE_ACLS,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        ApiKey.ALTER_CLIENT_QUOTAS,
    )
}


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

"""Which ACL checks each Kafka API needs (SEMANTICS.md §13), as data, and their evaluation in one snapshot.

A request is authorized in three parts, each optional:

* ``cluster``: a check on ``Cluster:kafka-cluster`` the whole request needs (e.g. DescribeAcls: DESCRIBE);
* ``cluster_override``: a check on the cluster that, when it passes, grants every named resource at once
  (e.g. CreateTopics: CREATE on the cluster);
* ``per_resource``: checks every named resource of the request must pass (e.g. CreateTopics: CREATE on the
  topic; DeleteTopics: DESCRIBE and DELETE on the topic).

``authorize_request`` decides every action of a request against one snapshot (taken once, or handed in by the
caller so that several calls of one request share it), and the outcome keeps that snapshot: the deciding rule of
each decisive action (``RequestAuthorization.decisions``), which the audit record is written from, comes from
the same snapshot as the result, never from asking the authorizer again after a possible swap.

Deliberate difference (SEMANTICS.md §16.1): Metadata's auto-creation of a missing topic checks AUTO_CREATE (on the
cluster, else on the topic) where Kafka checks CREATE; ALLOW CREATE implies AUTO_CREATE, so existing ACL sets work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kafkaguard.authorizer.decision_memo import DecisionMemo
from kafkaguard.authorizer.rules import Decision
from kafkaguard.authorizer.standard import AuthorizerSnapshot, StandardAuthorizer, authorize_in, explain_in
from kafkaguard.model import (
    CLUSTER_NAME,
    AclOperation,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)


class ApiKey(IntEnum):
    """Kafka API keys this module knows the checks of."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75

    @property
    def api_name(self) -> str:
        """Kafka's name, e.g. ``DescribeAcls``."""
        special = {ApiKey.SASL_HANDSHAKE: "SaslHandshake", ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate"}
        return special.get(self) or "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class Check:
    operation: AclOperation
    resource_type: ResourceType


@dataclass(frozen=True, slots=True)
class Requirement:
    """The checks of one API (or of one part of it, such as Metadata's auto-creation); see the module docstring.
    ``denial_error`` is the name of the Kafka error a denied resource (or request) gets."""

    name: str
    cluster: Check | None = None
    cluster_override: Check | None = None
    per_resource: tuple[Check, ...] = ()
    denial_error: str = "CLUSTER_AUTHORIZATION_FAILED"


_C, _T, _G, _X = ResourceType.CLUSTER, ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
_O = AclOperation


def _cluster(op: AclOperation, name: str) -> Requirement:
    return Requirement(name, cluster=Check(op, _C))


def _each(name: str, error: str, *checks: Check) -> Requirement:
    return Requirement(name, per_resource=checks, denial_error=error)


_TOPIC_DENIED, _GROUP_DENIED = "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"

#: The checks per API (SEMANTICS.md §13). APIs answered before authentication (ApiVersions, SASL) need none.
REQUIREMENTS: Mapping[ApiKey, Requirement] = {
    ApiKey.PRODUCE: _each("Produce", _TOPIC_DENIED, Check(_O.WRITE, _T), Check(_O.WRITE, _X)),
    ApiKey.FETCH: _each("Fetch", _TOPIC_DENIED, Check(_O.READ, _T)),
    ApiKey.LIST_OFFSETS: _each("ListOffsets", _TOPIC_DENIED, Check(_O.DESCRIBE, _T)),
    ApiKey.METADATA: _each("Metadata", _TOPIC_DENIED, Check(_O.DESCRIBE, _T)),
    ApiKey.OFFSET_COMMIT: _each("OffsetCommit", _GROUP_DENIED, Check(_O.READ, _G), Check(_O.READ, _T)),
    ApiKey.OFFSET_FETCH: _each("OffsetFetch", _GROUP_DENIED, Check(_O.DESCRIBE, _G), Check(_O.DESCRIBE, _T)),
    ApiKey.FIND_COORDINATOR: _each("FindCoordinator", _GROUP_DENIED, Check(_O.DESCRIBE, _G), Check(_O.DESCRIBE, _X)),
    ApiKey.JOIN_GROUP: _each("JoinGroup", _GROUP_DENIED, Check(_O.READ, _G)),
    ApiKey.HEARTBEAT: _each("Heartbeat", _GROUP_DENIED, Check(_O.READ, _G)),
    ApiKey.LEAVE_GROUP: _each("LeaveGroup", _GROUP_DENIED, Check(_O.READ, _G)),
    ApiKey.SYNC_GROUP: _each("SyncGroup", _GROUP_DENIED, Check(_O.READ, _G)),
    ApiKey.DESCRIBE_GROUPS: _each("DescribeGroups", _GROUP_DENIED, Check(_O.DESCRIBE, _G)),
    ApiKey.LIST_GROUPS: Requirement(
        "ListGroups", cluster_override=Check(_O.DESCRIBE, _C), per_resource=(Check(_O.DESCRIBE, _G),), denial_error=""
    ),
    ApiKey.SASL_HANDSHAKE: Requirement("SaslHandshake", denial_error=""),
    ApiKey.API_VERSIONS: Requirement("ApiVersions", denial_error=""),
    ApiKey.SASL_AUTHENTICATE: Requirement("SaslAuthenticate", denial_error=""),
    ApiKey.CREATE_TOPICS: Requirement(
        "CreateTopics",
        cluster_override=Check(_O.CREATE, _C),
        per_resource=(Check(_O.CREATE, _T),),
        denial_error=_TOPIC_DENIED,
    ),
    ApiKey.DELETE_TOPICS: Requirement(
        "DeleteTopics",
        cluster_override=Check(_O.DELETE, _C),
        per_resource=(Check(_O.DESCRIBE, _T), Check(_O.DELETE, _T)),
        denial_error=_TOPIC_DENIED,
    ),
    ApiKey.DELETE_RECORDS: _each("DeleteRecords", _TOPIC_DENIED, Check(_O.DELETE, _T)),
    ApiKey.INIT_PRODUCER_ID: _each("InitProducerId", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Check(_O.WRITE, _X)),
    # A consumer's OffsetForLeaderEpoch (replica id -1) needs DESCRIBE on the topic; a follower's, CLUSTER_ACTION.
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _each("OffsetForLeaderEpoch", _TOPIC_DENIED, Check(_O.DESCRIBE, _T)),
    ApiKey.ADD_PARTITIONS_TO_TXN: _each(
        "AddPartitionsToTxn", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Check(_O.WRITE, _X), Check(_O.WRITE, _T)
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: _each(
        "AddOffsetsToTxn", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Check(_O.WRITE, _X), Check(_O.READ, _G)
    ),
    ApiKey.END_TXN: _each("EndTxn", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Check(_O.WRITE, _X)),
    ApiKey.TXN_OFFSET_COMMIT: _each(
        "TxnOffsetCommit",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        Check(_O.WRITE, _X),
        Check(_O.READ, _G),
        Check(_O.READ, _T),
    ),
    ApiKey.DESCRIBE_ACLS: _cluster(_O.DESCRIBE, "DescribeAcls"),
    ApiKey.CREATE_ACLS: _cluster(_O.ALTER, "CreateAcls"),
    ApiKey.DELETE_ACLS: _cluster(_O.ALTER, "DeleteAcls"),
    ApiKey.DESCRIBE_CONFIGS: _each("DescribeConfigs", _TOPIC_DENIED, Check(_O.DESCRIBE_CONFIGS, _T)),
    ApiKey.ALTER_CONFIGS: _each("AlterConfigs", _TOPIC_DENIED, Check(_O.ALTER_CONFIGS, _T)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _each("IncrementalAlterConfigs", _TOPIC_DENIED, Check(_O.ALTER_CONFIGS, _T)),
    ApiKey.DESCRIBE_LOG_DIRS: _cluster(_O.DESCRIBE, "DescribeLogDirs"),
    ApiKey.CREATE_PARTITIONS: _each("CreatePartitions", _TOPIC_DENIED, Check(_O.ALTER, _T)),
    ApiKey.DELETE_GROUPS: _each("DeleteGroups", _GROUP_DENIED, Check(_O.DELETE, _G)),
    ApiKey.ELECT_LEADERS: _cluster(_O.ALTER, "ElectLeaders"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster(_O.ALTER, "AlterPartitionReassignments"),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(_O.DESCRIBE, "ListPartitionReassignments"),
    ApiKey.OFFSET_DELETE: _each("OffsetDelete", _GROUP_DENIED, Check(_O.DELETE, _G), Check(_O.READ, _T)),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(_O.DESCRIBE_CONFIGS, "DescribeClientQuotas"),
    ApiKey.ALTER_CLIENT_QUOTAS: _cluster(_O.ALTER_CONFIGS, "AlterClientQuotas"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(_O.DESCRIBE, "DescribeUserScramCredentials"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(_O.ALTER, "AlterUserScramCredentials"),
    ApiKey.UPDATE_FEATURES: _cluster(_O.ALTER, "UpdateFeatures"),
    # A broker answers DescribeCluster without a check (only its authorized-operations field needs CLUSTER DESCRIBE);
    # kafkaguard is the broker clients talk to.
    ApiKey.DESCRIBE_CLUSTER: Requirement("DescribeCluster", denial_error=""),
    ApiKey.DESCRIBE_PRODUCERS: _each("DescribeProducers", _TOPIC_DENIED, Check(_O.READ, _T)),
    ApiKey.DESCRIBE_TRANSACTIONS: _each(
        "DescribeTransactions", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Check(_O.DESCRIBE, _X)
    ),
    # ListTransactions lists only the transactional ids the caller may DESCRIBE (no error for the others).
    ApiKey.LIST_TRANSACTIONS: Requirement("ListTransactions", per_resource=(Check(_O.DESCRIBE, _X),), denial_error=""),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _each("ConsumerGroupHeartbeat", _GROUP_DENIED, Check(_O.READ, _G)),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _each("ConsumerGroupDescribe", _GROUP_DENIED, Check(_O.DESCRIBE, _G)),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _each("DescribeTopicPartitions", _TOPIC_DENIED, Check(_O.DESCRIBE, _T)),
}

#: Metadata's auto-creation of a missing topic (KIP-755, SEMANTICS.md §16.1): AUTO_CREATE on the cluster, else on
#: the topic. CreateTopics keeps checking CREATE, so a principal with only AUTO_CREATE can have topics created by
#: Metadata with default settings but cannot create them with CreateTopics.
METADATA_AUTO_CREATE = Requirement(
    "Metadata(auto-create)",
    cluster_override=Check(_O.AUTO_CREATE, _C),
    per_resource=(Check(_O.AUTO_CREATE, _T),),
    denial_error=_TOPIC_DENIED,
)

#: Operations probed for "authorized operations" fields (SEMANTICS.md §4).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    _T: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    _G: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    _C: (
        _O.CREATE,
        _O.CLUSTER_ACTION,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
        _O.ALTER,
        _O.DESCRIBE,
    ),
    _X: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


#: What decisions are read from: the authorizer (its current snapshot is taken once per call) or a snapshot.
AuthorizationSource = StandardAuthorizer | AuthorizerSnapshot


def snapshot_of(source: AuthorizationSource) -> AuthorizerSnapshot:
    return source.snapshot if isinstance(source, StandardAuthorizer) else source


@dataclass(frozen=True, slots=True)
class RequestAuthorization:
    """The outcome for one request: whether its cluster-level check passed and, per named resource, whether it
    may be acted on. ``decisive`` lists the (action, result) pairs that decided it, in the order Kafka would have
    asked them: the cluster check, then the cluster override if it allowed, else the per-resource checks (what
    an audit log should record). ``snapshot`` and ``context`` are what the results were decided with."""

    request_allowed: bool
    resources: Mapping[tuple[ResourceType, str], bool]
    decisive: tuple[tuple[Action, AuthorizationResult], ...]
    snapshot: AuthorizerSnapshot
    context: RequestContext

    def decision(self, action: Action, memo: DecisionMemo | None = None) -> Decision:
        """The decision for one of this request's actions with its deciding rule and matching ACLs, from the same
        snapshot as ``decisive`` (so it agrees with the result recorded there); through ``memo`` when given."""
        if memo is not None:
            return memo.explain(self.snapshot, self.context, action)
        return explain_in(self.snapshot, self.context, action)

    def allows(self, resource_type: ResourceType, name: str) -> bool:
        return self.request_allowed and self.resources.get((resource_type, name), False)

    def denied(self) -> list[tuple[ResourceType, str]]:
        return [key for key, ok in self.resources.items() if not (ok and self.request_allowed)]


def authorize_request(
    source: AuthorizationSource,
    context: RequestContext,
    requirement: Requirement,
    resources: Mapping[ResourceType, Sequence[str]] | None = None,
) -> RequestAuthorization:
    """Evaluate ``requirement`` for the resources a request names (by type), in one snapshot.

    Per-resource checks apply to the types they name: a Produce naming topics but no transactional id checks
    only WRITE on the topics.
    """
    named = {(rtype, name) for rtype, names in (resources or {}).items() for name in names}
    cluster = ResourcePattern(_C, CLUSTER_NAME, PatternType.LITERAL)
    actions: list[Action] = []
    if requirement.cluster is not None:
        actions.append(Action(requirement.cluster.operation, cluster))
    if requirement.cluster_override is not None:
        actions.append(Action(requirement.cluster_override.operation, cluster))
    slots: list[tuple[tuple[ResourceType, str], int]] = []
    for rtype, name in sorted(named, key=lambda key: (key[0].code, key[1])):
        for check in requirement.per_resource:
            if check.resource_type is rtype:
                slots.append(((rtype, name), len(actions)))
                actions.append(Action(check.operation, ResourcePattern(rtype, name, PatternType.LITERAL)))
    snapshot = snapshot_of(source)
    results = authorize_in(snapshot, context, actions) if actions else []
    position = 0
    request_allowed = True
    if requirement.cluster is not None:
        request_allowed = results[position] is AuthorizationResult.ALLOWED
        position += 1
    override = False
    if requirement.cluster_override is not None:
        override = results[position] is AuthorizationResult.ALLOWED
    verdicts: dict[tuple[ResourceType, str], bool] = dict.fromkeys(named, True)
    decisive: list[tuple[Action, AuthorizationResult]] = []
    if requirement.cluster is not None:
        decisive.append((actions[0], results[0]))
    if override:
        decisive.append((actions[position], results[position]))
    else:
        for key, index in slots:
            decisive.append((actions[index], results[index]))
            if results[index] is not AuthorizationResult.ALLOWED:
                verdicts[key] = False
    return RequestAuthorization(request_allowed, verdicts, tuple(decisive), snapshot, context)


def authorized_operations(
    source: AuthorizationSource, context: RequestContext, resource_type: ResourceType, name: str
) -> int:
    """Kafka's 32-bit authorized-operations field for one resource: bit n set = operation code n allowed (§4)."""
    operations = SUPPORTED_OPERATIONS.get(resource_type, ())
    pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
    results = authorize_in(snapshot_of(source), context, [Action(op, pattern) for op in operations])
    field = 0
    for op, result in zip(operations, results, strict=True):
        if result is AuthorizationResult.ALLOWED:
            field |= 1 << op.code
    return field

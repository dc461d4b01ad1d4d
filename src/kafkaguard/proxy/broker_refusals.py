"""The broker's refusals of what kafkaguard allowed, read from the answers the proxy decodes (issue 38).

In ``upstream_authentication: passthrough`` a client's requests go upstream on its own login
(``Upstream.as_client``), so the broker's ACLs decide them too: both must allow. A handler that reads the broker's
answer hands ``noted`` the items it allowed with the error the broker gave each; an authorization error
(``audit.records.broker_refusals.AUTHORIZATION_ERRORS``) on a resource kafkaguard allowed is counted and, bounded
(``BrokerRefusals.admit``: once per principal, resource, operation and error a minute), becomes one audit event per
refused resource of the request, however many of its items (partitions) the broker refused. kafkaguard's own denials
never reach here (the handler answers them itself, and ``outcome.allows`` is asked again). With the service account
the broker refusing is a misconfiguration of the proxy's account, not the client's: nothing is noted.

Cost: nothing unless the answer holds an authorization error; then one dict entry per refused resource, and the
events (kafkaguard's deciding rule explained from the request's snapshot) are made in the audit writer's thread.

Where the answers are read: ``handlers.metadata`` (Metadata's named topics), ``handlers.admin`` (CreateTopics'
results: in passthrough always forwarded and read, it is rare), ``handlers.coordinator`` (FindCoordinator's keys),
``handlers.topic_partitions`` (DescribeTopicPartitions), ``handlers.groups`` (OffsetCommit when partly denied, its
partitions; OffsetFetch v8+, its groups and partitions), ``handlers.produce`` (its partitions and transactional id,
on the fast path only when the answer's bytes may hold the error: ``produce_walk.PassthroughProduceAnswerWalk``),
``handlers.fetch`` (its partitions: v13+ on the fast path, collected by the answer's streaming walk,
``fetch_walk.FetchAnswerWalk(refused=…)``; every version when partly denied, decoded). The other APIs relay a fully
allowed request's answer unread — and so does Fetch before v13 (its older layouts have no walk: the records
stream unread; clients that know topic ids use v13+) — so a broker's refusal there leaves only kafkaguard's ALLOWED
record (and the broker's own log).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from kafkaguard.audit.records.broker_refusals import AUTHORIZATION_ERRORS, broker_refusal_data
from kafkaguard.audit.records.cloudevents import BROKER
from kafkaguard.audit.records.record import record_from_decision, to_dict
from kafkaguard.audit.trail.writer import AuditLog, Event
from kafkaguard.authorizer.requests import RequestAuthorization
from kafkaguard.model import Action, AuthorizationResult, ResourceType
from kafkaguard.proxy.scope import ProxyScope


def noted(
    scope: ProxyScope,
    outcome: RequestAuthorization,
    resource_type: ResourceType,
    answered: Iterable[tuple[str | None, int]],
) -> None:
    """Note the broker's refusals among ``answered``: (resource name, the broker's error code) per item of its answer
    (a partition, a topic; a name may come many times)."""
    if not scope.upstream.as_client:
        return
    refused: dict[tuple[str, int], int] = {}
    for name, code in answered:
        if code in AUTHORIZATION_ERRORS and name is not None and outcome.allows(resource_type, name):
            refused[name, code] = refused.get((name, code), 0) + 1
    if not refused:
        return
    counts, api = scope.services.broker_refusals, scope.api_key.api_name
    admitted: list[_Refused] = []
    own, cluster = _allowing(outcome, resource_type)
    for (name, code), items in refused.items():
        action = own.get(name, cluster)
        if action is None:  # a permissive proxy's would-be denial: recorded as that already
            continue
        error = AUTHORIZATION_ERRORS[code]
        if counts.admit(api, error, scope.context.principal, resource_type.name, name, action.operation.name):
            admitted.append(_Refused(action, resource_type, name, code, items))
    if admitted and scope.audit is not None:
        _queue(scope.audit, outcome, api, admitted, datetime.now(UTC))


@dataclass(frozen=True, slots=True)
class _Refused:
    """One refused resource of a request: the action that allowed it, the broker's error, how many items."""

    action: Action
    resource_type: ResourceType
    name: str
    code: int
    items: int


def _allowing(outcome: RequestAuthorization, resource_type: ResourceType) -> tuple[dict[str, Action], Action | None]:
    """The decisive actions that allowed: per name, its own last check (DeleteTopics' DELETE after DESCRIBE), and
    the cluster check that granted every resource (CreateTopics' CREATE on the cluster), if any. One pass: a request
    of 10,000 topics has 10,000 decisive actions."""
    own: dict[str, Action] = {}
    cluster: Action | None = None
    for action, result in outcome.decisive:
        if result is not AuthorizationResult.ALLOWED:
            continue
        pattern = action.resource_pattern
        if pattern.resource_type is resource_type:
            own[pattern.name] = action
        elif cluster is None and pattern.resource_type is ResourceType.CLUSTER:
            cluster = action
    return own, cluster


def _queue(audit: AuditLog, outcome: RequestAuthorization, api: str, admitted: list[_Refused], now: datetime) -> None:
    def make() -> list[Event]:  # in the writer's thread: explaining the rule is not the event loop's work
        events = []
        for refused in admitted:
            decided = record_from_decision(outcome.decision(refused.action, audit.memo), now, api)
            # the resource the broker refused, even when a cluster check allowed it
            record = dataclasses.replace(decided, resource_type=refused.resource_type, resource_name=refused.name)
            data = broker_refusal_data(to_dict(record), error_code=refused.code, items=refused.items)
            events.append(Event(BROKER, f"{refused.resource_type.name}:{refused.name}", data, now))
        return events

    audit.record_events_later(make)

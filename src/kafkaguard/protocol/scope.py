"""What a handler sees of one request: who asks, which API and version, the services, and authorization with
auditing (every decisive decision goes to the audit log when one is configured).

``RequestScope.authorize`` is the one decision point of every handler, so it is where rolling out ACL changes
(``authorizer.rollout``) applies: with ``permissive`` every check passes (the handler takes its all-allowed path) and
the would-be denials are audited with ``enforced: false``; with a shadow ACL set, the audit writer's thread decides the
same actions under the candidate set and records each flip as a shadow event.

A scope holds the authorizer snapshot taken when the request was read: every check of the request (its
requirement, Metadata's auto-creation, authorized-operations fields) and every audit record of it are decided
from that one snapshot, even if an ACL change swaps the authorizer's snapshot meanwhile."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypedDict, TypeVar

from kafkaguard.audit.records.record import AuditRecord, record_from_decision
from kafkaguard.audit.records.shadow import shadow_data
from kafkaguard.audit.trail.writer import AuditLog
from kafkaguard.authorizer import AuthorizerSnapshot
from kafkaguard.authorizer.decision_memo import DecisionMemo
from kafkaguard.authorizer.requests import ApiKey, RequestAuthorization, Requirement, authorize_request
from kafkaguard.authorizer.rollout import Rollout, flips, permitted
from kafkaguard.bootstrap import Services
from kafkaguard.config import Listener
from kafkaguard.model import Actor, AuthorizationResult, ManagementEvent, RequestContext, ResourceType
from kafkaguard.protocol.codec import DecodedRequest, RequestHead
from kafkaguard.protocol.identity import Identity
from kafkaguard.protocol.sessions import SessionRegistry
from kafkaguard.protocol.violations import ProtocolViolations

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """This server as clients see it: the only broker, and the controller."""

    node_id: int
    host: str
    port: int
    cluster_id: str


@dataclass(frozen=True, slots=True)
class ListenerContext:
    """What a connection needs of the server it came in through, and nothing more: the services, this broker as
    advertised on the connection's listener, the audit log (None when off), the server's registry of logged-in
    sessions (``protocol.sessions``; None only in unit tests of one connection: then no session ends with its user)
    and how it identifies clients (``protocol.identity``)."""

    services: Services
    listener: Listener
    broker: BrokerInfo
    audit: AuditLog | None = None
    sessions: SessionRegistry | None = None
    #: How clients are identified (None only in unit tests of one connection: then it is made from the settings).
    identity: Identity | None = None
    violations: ProtocolViolations | None = None


@dataclass(frozen=True, slots=True)
class RequestScope:
    services: Services
    broker: BrokerInfo
    context: RequestContext
    api_key: ApiKey
    api_version: int
    client_id: str | None
    snapshot: AuthorizerSnapshot
    audit: AuditLog | None = None
    #: The interface of the listener the request came in on (``kafka:SASL_PLAINTEXT``) and the request's
    #: correlation id: with the client id and the caller, a management change's ``Actor``.
    interface: str = "kafka"
    correlation: int | None = None

    def actor(self) -> Actor:
        """Who asks for a management change through this request (``model.actor``)."""
        request_id = f"{self.client_id or ''}/{self.correlation}" if self.correlation is not None else None
        return Actor(
            principal=self.context.principal,
            address=self.context.host,
            interface=self.interface,
            request_id=request_id,
        )

    #: Permissive enforcement (``authorizer.rollout``): set by the proxy for the requests it forwards only, never
    #: for kafkaguard's own APIs (ACLs, SCRAM users, quotas), which stay enforced.
    permissive: bool = False

    async def refuse(self, items: Sequence[_T], event_of: Callable[[_T], ManagementEvent]) -> None:
        """Record the items of this request that were refused (``service.refused``: bounded per request, rate-limited
        per principal): admitted and made here, stored on a worker thread, before the handler answers (so that the
        history has them when the client has its answer). ``event_of`` makes one item's event."""
        refused = self.services.refused
        events = refused.events_for(self.actor(), self.api_key.api_name, items, event_of)
        if events:
            await asyncio.to_thread(refused.record, events)

    def authorize(
        self, requirement: Requirement, resources: Mapping[ResourceType, Sequence[str]] | None = None
    ) -> RequestAuthorization:
        outcome = authorize_request(self.snapshot, self.context, requirement, resources)
        if self.audit is not None:
            self._audit(self.audit, outcome)
        return permitted(outcome) if self.permissive else outcome

    def _audit(self, audit: AuditLog, outcome: RequestAuthorization) -> None:
        # Made in the audit writer's thread: going through, explaining and serializing the thousands of decisions of
        # one large request is not the event loop's work (nor, in usage mode, folding them per window: the writer
        # thread's ``UsageAggregator``). The rule comes from the snapshot the result came from; the shadow set is the
        # one current now (replaced whole on reload), decided there too.
        now = datetime.now(UTC)
        rollout = self.services.rollout
        shadow = rollout.shadow
        audit.record_later(
            partial(
                _audit_records,
                outcome,
                now,
                self.api_key.api_name,
                audit.log_allowed,
                self.permissive,
                None if shadow is None else shadow.snapshot,
                rollout,
                audit.memo,
            )
        )


def scope_of(context: ListenerContext, caller: RequestContext, request: DecodedRequest) -> RequestScope:
    """``request``'s scope, with the authorizer's snapshot as it is now (made field by field: once per request)."""
    services, header = context.services, request.header
    return RequestScope(
        services,
        context.broker,
        caller,
        request.api_key,
        header.api_version,
        header.client_id,
        services.authorizer.snapshot,
        context.audit,
        _interface(context),
        header.correlation_id,
    )


def _interface(context: ListenerContext) -> str:
    return f"kafka:{context.listener.protocol.name}"


class ScopeFields(TypedDict):
    """``RequestScope``'s fields, typed: a scope type that adds its own is made with ``**scope_fields(...)`` and mypy
    checks every one."""

    services: Services
    broker: BrokerInfo
    context: RequestContext
    api_key: ApiKey
    api_version: int
    client_id: str | None
    snapshot: AuthorizerSnapshot
    audit: AuditLog | None
    interface: str
    correlation: int | None


def scope_fields(
    context: ListenerContext, caller: RequestContext, request: DecodedRequest | RequestHead
) -> ScopeFields:
    """``RequestScope``'s fields for ``request`` (the snapshot taken now), for a scope type that adds its own."""
    services = context.services
    fields: ScopeFields = {
        "services": services,
        "broker": context.broker,
        "context": caller,
        "api_key": request.api_key,
        "api_version": request.header.api_version,
        "client_id": request.header.client_id,
        "snapshot": services.authorizer.snapshot,
        "audit": context.audit,
        "interface": _interface(context),
        "correlation": request.header.correlation_id,
    }
    return fields


def _audit_records(
    outcome: RequestAuthorization,
    now: datetime,
    api_name: str,
    log_allowed: bool,
    permissive: bool,
    shadow: AuthorizerSnapshot | None,
    rollout: Rollout,
    memo: DecisionMemo,
) -> list[AuditRecord | dict[str, Any]]:
    """The request's records (the writer thread's work): its decisive decisions (the allowed ones when
    ``log_allowed``; a denial marked not enforced when ``permissive``), then a shadow event per flipped decision."""

    def record_of(position: int) -> AuditRecord:
        action, result = outcome.decisive[position]
        record = record_from_decision(outcome.decision(action, memo), now, api_name)
        if permissive and result is not AuthorizationResult.ALLOWED:
            return dataclasses.replace(record, enforced=False)
        return record

    made: list[AuditRecord | dict[str, Any]] = []
    for position, (_, result) in enumerate(outcome.decisive):
        if result is not AuthorizationResult.ALLOWED:
            made.append(record_of(position))
            if permissive:
                rollout.would_be_denials += 1
        elif log_allowed:
            made.append(record_of(position))
    if shadow is not None:
        for position, candidate in flips(outcome, shadow):
            made.append(shadow_data(record_of(position), candidate.result.value, str(candidate.rule)))
            rollout.count_flip(outcome.decisive[position][1])
    return made

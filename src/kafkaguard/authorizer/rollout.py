"""Rolling out an ACL change on live evidence: permissive enforcement and a shadow ACL set (issue 27).

Two models: an admission controller's "warn" mode and IAM's policy simulator.

* **Permissive** (``enforcement: permissive``, the proxy only): every ACL check of a forwarded request passes, so the
  handler takes its all-allowed path and the request reaches the upstream as a fully authorized client's would;
  the decisions the active ACLs would have denied are still written to the audit log, as DENIED with
  ``"enforced": false``. ``RequestScope.authorize`` is the one place that applies it (``permitted``).
* **Shadow** (``shadow_acls: FILE``): a second, candidate ACL set decides every decisive action of every request
  alongside the active one, from the same request context; each action whose decision would flip becomes a shadow
  event. The candidate decides in the audit writer's thread (``flips``), never on the event loop: the loop only
  hands the active outcome and the shadow snapshot over, a constant cost per request.

``Rollout`` is the process's state of both, shared by the server, its audit writer and a console in the same process
(``/healthz``, ``/metrics``). Its counters are written by the audit writer's thread only (one flush at a time).

Cost model (shadow): one ``authorize_in`` over a request's decisive actions against the candidate snapshot
(per action, what the active decision costs), plus an ``explain_in`` for each flip only. A shadow set of the active
set's size therefore costs the writer thread about what the active decisions cost the loop.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkaguard.authorizer.requests import RequestAuthorization
from kafkaguard.authorizer.rules import Decision
from kafkaguard.authorizer.standard import AuthorizerSnapshot, StandardAuthorizer, authorize_in, explain_in
from kafkaguard.model import AclBinding, AclId, AuthorizationResult, StoredAcl
from kafkaguard.model.acl_json import binding_to_dict

#: ``enforcement`` values.
ENFORCING, PERMISSIVE = "enforcing", "permissive"


def content_id(binding: AclBinding) -> AclId:
    """The stable id of a file's ACL (``h-`` and 12 hex digits of its content): the id ``audit simulate`` and
    ``audit usage`` give an ACL document entry without one (``pipeline.acls.content_id``), so a shadow event's rule
    names the ACL as their reports do."""
    text = json.dumps(binding_to_dict(binding), sort_keys=True)
    return AclId("h-" + hashlib.sha256(text.encode()).hexdigest()[:12])


def stored_from_file(bindings: Iterable[AclBinding]) -> tuple[StoredAcl, ...]:
    """A file's bindings with their content ids (duplicates once)."""
    unique = dict.fromkeys(bindings)
    return tuple(StoredAcl(content_id(binding), binding) for binding in unique)


@dataclass(frozen=True, slots=True)
class ShadowSet:
    """A candidate ACL set, decided as the active authorizer decides (same super users and allow-everyone setting;
    the group memberships are the active snapshot's of each request, see ``flips``)."""

    source: str
    snapshot: AuthorizerSnapshot
    acl_count: int


def shadow_set(
    source: str,
    bindings: Iterable[AclBinding],
    *,
    super_users: Iterable[str],
    allow_everyone_if_no_acl_found: bool,
    memberships: Mapping[str, Iterable[str]],
) -> ShadowSet:
    """Build the candidate set's authorizer once (index build: O(ACLs), seconds at 100k; call it off the event
    loop)."""
    acls = stored_from_file(bindings)
    authorizer = StandardAuthorizer(super_users, allow_everyone_if_no_acl_found, acls=acls, memberships=memberships)
    return ShadowSet(source, authorizer.snapshot, len(acls))


def permitted(outcome: RequestAuthorization) -> RequestAuthorization:
    """``outcome`` with every check passed (permissive enforcement); its ``decisive`` pairs are kept as decided, so
    the audit records the would-be denials."""
    if outcome.request_allowed and all(outcome.resources.values()):
        return outcome
    return dataclasses.replace(outcome, request_allowed=True, resources=dict.fromkeys(outcome.resources, True))


def flips(outcome: RequestAuthorization, shadow: AuthorizerSnapshot) -> list[tuple[int, Decision]]:
    """The decisive actions of ``outcome`` whose decision the shadow snapshot makes differently: (position in
    ``outcome.decisive``, the shadow's decision with its rule). Decided from ``outcome``'s own context and with the
    principal groups of ``outcome``'s snapshot (a membership change in the store applies to both sets at once: the
    candidate is an ACL file, the groups are the store's)."""
    actions = [action for action, _ in outcome.decisive]
    if not actions:
        return []
    if shadow.memberships is not outcome.snapshot.memberships:  # the groups as the active decision saw them
        shadow = dataclasses.replace(shadow, memberships=outcome.snapshot.memberships)
    results = authorize_in(shadow, outcome.context, actions)
    return [
        (position, explain_in(shadow, outcome.context, actions[position]))
        for position, ((_, active), result) in enumerate(zip(outcome.decisive, results, strict=True))
        if result is not active
    ]


class Rollout:
    """This process's rollout state: whether forwarded requests are enforced, the shadow set, and counters.

    ``permissive`` never changes while the process runs (it is a start-up setting, announced at start).
    ``shadow`` is replaced whole when its file changes (an attribute swap: a request reads one set or the other).
    """

    def __init__(self, enforcement: str = ENFORCING) -> None:
        if enforcement not in (ENFORCING, PERMISSIVE):
            raise ValueError(f"enforcement must be {ENFORCING!r} or {PERMISSIVE!r}, not {enforcement!r}")
        self.permissive = enforcement == PERMISSIVE
        self.shadow: ShadowSet | None = None
        #: Decisions recorded as DENIED with ``enforced: false`` (audit writer thread).
        self.would_be_denials = 0
        #: Shadow events recorded, by direction (audit writer thread).
        self.shadow_newly_denied = 0
        self.shadow_newly_allowed = 0

    @property
    def enforcement(self) -> str:
        return PERMISSIVE if self.permissive else ENFORCING

    def count_flip(self, active: AuthorizationResult) -> None:
        if active is AuthorizationResult.ALLOWED:
            self.shadow_newly_denied += 1
        else:
            self.shadow_newly_allowed += 1

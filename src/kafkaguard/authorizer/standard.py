"""StandardAuthorizer: Kafka's KRaft StandardAuthorizer semantics over an immutable, indexed snapshot.

Decision procedure (SEMANTICS.md §3), for principal P, host H, operation OP on resource (type, name):

1. the resource must be LITERAL and OP concrete (not ANY/UNKNOWN), or the call is an error;
2. a super user (exact ``Type:Name`` string in ``super.users``) is ALLOWED, before anything else;
3. before the initial load completes, everyone else gets AuthorizerNotReadyError;
4. a matching DENY on any relevant pattern → DENIED, whatever its specificity;
5. else a matching ALLOW → ALLOWED (with ALLOW-only implication, see ``operations``);
6. else, if no ACL at all applies to the resource → allow.everyone.if.no.acl.found decides;
7. else DENIED.

Concurrency: all state is one ``AuthorizerSnapshot`` behind one reference. Readers take it once per call and
never lock; writers (serialised by a lock among themselves) build a new snapshot and swap the reference.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kafkaguard.authorizer.by_resource_type import scan_by_resource_type
from kafkaguard.authorizer.index import RELEVANT_BIT, AclIndex
from kafkaguard.authorizer.mutation import assign_ids, match_filters, plan_creation, plan_deletion
from kafkaguard.authorizer.operations import CONCRETE_OPERATIONS, allow_bit, covered_operations, deny_bit
from kafkaguard.authorizer.results import AclCreateResult, AclDeleteResult
from kafkaguard.authorizer.rules import Decision, DefaultRule, MatchingAclRule, Rule, SuperUserRule
from kafkaguard.errors import AuthorizerNotReadyError, InvalidActionError, InvalidConfigError
from kafkaguard.model import (
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StoredAcl,
    host_matches,
    principal_matches,
)
from kafkaguard.model.group import freeze_memberships

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
LITERAL = PatternType.LITERAL
_NOT_READY = "the authorizer has not finished loading its ACLs; retry shortly"
_KNOWN_TYPES = frozenset(t for t in ResourceType if t is not ResourceType.ANY)

#: Per operation code: (allow bit, deny bit); None for codes authorize() refuses (ANY, UNKNOWN, unknown).
_BITS: dict[AclOperation, tuple[int, int]] = {op: (allow_bit(op), deny_bit(op)) for op in CONCRETE_OPERATIONS}


@dataclass(frozen=True, slots=True)
class AuthorizerSnapshot:
    """Everything a decision reads, frozen together so that one request sees one consistent state."""

    index: AclIndex
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool
    ready: bool
    #: Principal groups (kafkaguard, beyond Kafka): user principal → the group principals (``Group:ops``) it
    #: belongs to. Read from the same snapshot as the ACLs, so a request sees one consistent pair of both.
    #: A plain dict, never changed after the snapshot is made (a dict probe costs less than a mappingproxy's on the
    #: hot path); changes replace it whole.
    memberships: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def groups_of(self, principal: str) -> tuple[str, ...]:
        """The group principals ``principal`` belongs to in the store (none for a principal in no group)."""
        return self.memberships.get(principal, ())

    def groups_for(self, context: RequestContext) -> tuple[str, ...]:
        """The group principals ``context``'s caller belongs to: the store's, then its login's (a token's)."""
        return with_login_groups(self.memberships.get(context.principal, ()), context.groups)


def with_login_groups(stored: tuple[str, ...], login: tuple[str, ...]) -> tuple[str, ...]:
    """The stored groups and then those of the login not among them (usually one of the two is empty)."""
    if not login:
        return stored
    if not stored:
        return login
    return tuple(dict.fromkeys((*stored, *login)))


def parse_super_users(value: str | Iterable[str]) -> frozenset[str]:
    """``super.users`` as Kafka parses it (SEMANTICS.md §3.1): split on ``;``, trim, drop empty entries; each
    entry must contain a colon.

    :raises InvalidConfigError: an entry is not ``principalType:principalName``.
    """
    entries = value.split(";") if isinstance(value, str) else value
    users = {entry.strip() for entry in entries if entry.strip()}
    for user in users:
        if ":" not in user:
            raise InvalidConfigError(
                f"super.users: expected a string in format principalType:principalName but got {user}"
            )
    return frozenset(users)


def _new_id() -> AclId:
    return AclId(str(uuid.uuid4()))


class StandardAuthorizer:
    """The authorizer. See the module docstring for the rules; every method is safe under concurrent use."""

    def __init__(
        self,
        super_users: str | Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        *,
        acls: Iterable[StoredAcl] = (),
        ready: bool = True,
        id_factory: Callable[[], AclId] = _new_id,
        memberships: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._snapshot = AuthorizerSnapshot(
            index=AclIndex.build(acls),
            super_users=parse_super_users(super_users),
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            ready=ready,
            memberships=freeze_memberships(memberships or {}),
        )
        self._id_factory = id_factory
        self._write_lock = threading.Lock()

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, str],
        *,
        acls: Iterable[StoredAcl] = (),
        ready: bool = True,
        id_factory: Callable[[], AclId] = _new_id,
        memberships: Mapping[str, Iterable[str]] | None = None,
    ) -> StandardAuthorizer:
        """Build from Kafka's configuration keys ``super.users`` and ``allow.everyone.if.no.acl.found``
        (Java ``Boolean.parseBoolean`` of the trimmed value: only ``true``, in any case, is true); the keywords
        are ``__init__``'s, with its defaults."""
        allow = config.get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true"
        return cls(
            config.get("super.users", ""), allow, acls=acls, ready=ready, id_factory=id_factory, memberships=memberships
        )

    # ------------------------------------------------------------------------------------------ configuration

    @property
    def snapshot(self) -> AuthorizerSnapshot:
        return self._snapshot

    @property
    def super_users(self) -> frozenset[str]:
        return self._snapshot.super_users

    @property
    def allow_everyone_if_no_acl_found(self) -> bool:
        return self._snapshot.allow_everyone_if_no_acl_found

    @property
    def memberships(self) -> Mapping[str, tuple[str, ...]]:
        return self._snapshot.memberships

    def replace_memberships(self, memberships: Mapping[str, Iterable[str]]) -> None:
        """Replace every principal's groups in one swap: the next request of any connection sees them."""
        frozen = freeze_memberships(memberships)
        with self._write_lock:
            self._snapshot = replace(self._snapshot, memberships=frozen)

    @property
    def acl_count(self) -> int:
        return len(self._snapshot.index)

    def complete_initial_load(self) -> None:
        """Start answering everyone, not only super users (Kafka's ``completeInitialLoad``)."""
        with self._write_lock:
            self._snapshot = replace(self._snapshot, ready=True)

    # ------------------------------------------------------------------------------------------------ deciding

    def authorize(self, context: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]:
        """One result per action, in order, all decided against the same snapshot.

        :raises InvalidActionError: an action is not on a LITERAL resource or its operation is ANY/UNKNOWN.
        :raises AuthorizerNotReadyError: the initial load has not completed and the caller is no super user.
        """
        return authorize_in(self._snapshot, context, actions)

    def authorize_one(self, context: RequestContext, action: Action) -> AuthorizationResult:
        return self.authorize(context, (action,))[0]

    def explain(self, context: RequestContext, action: Action) -> Decision:
        """The decision for one action with the rule that made it and every ACL that matched.

        Agrees with ``authorize`` by construction: the same snapshot, the same patterns, the same masks.
        """
        return explain_in(self._snapshot, context, action)

    def authorize_by_resource_type(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> AuthorizationResult:
        """May the caller do ``operation`` on at least one resource of ``resource_type``? (SEMANTICS.md §5)

        :raises InvalidActionError: ANY or UNKNOWN resource type or operation, as Kafka's argument checks.
        """
        return authorize_by_resource_type_in(self._snapshot, context, operation, resource_type)

    # ----------------------------------------------------------------------------------------------- ACL state

    def acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY) -> list[AclBinding]:
        """Every stored binding the filter matches (SEMANTICS.md §6)."""
        return [acl.binding for acl in self._snapshot.index.find(acl_filter)]

    def stored_acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY) -> list[StoredAcl]:
        """As ``acls``, with each binding's id."""
        return list(self._snapshot.index.find(acl_filter))

    def add_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]:
        """Create ACLs without a store; one result per binding, in order (SEMANTICS.md §8). An invalid binding fails
        alone; an existing or repeated binding succeeds and is stored once. The valid ones are applied in one swap.
        Validation and results are ``mutation``'s, shared with the service layer."""
        plan = plan_creation(bindings)
        with self._write_lock:
            stored, added = assign_ids(self._snapshot.index, plan.valid, self._id_factory)
            if added:
                self._snapshot = replace(self._snapshot, index=self._snapshot.index.with_changes(added=added))
        return plan.results(stored)

    def remove_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Delete ACLs without a store; one result per filter, in order, each listing every ACL it matched in the
        state before the call (an ACL matched by several filters is listed under each and removed once,
        SEMANTICS.md §9). Validation and results are ``mutation``'s, shared with the service layer."""
        plan = plan_deletion(filters)
        with self._write_lock:
            matched = match_filters(self._snapshot.index, plan.valid)
            removed = {acl.id for group in matched for acl in group}
            if removed:
                self._snapshot = replace(self._snapshot, index=self._snapshot.index.with_changes(removed=removed))
        return plan.results(matched)

    def apply_changes(self, added: Iterable[StoredAcl] = (), removed: Iterable[AclId] = ()) -> None:
        """Apply changes already made durable elsewhere (the service layer's path): ``removed`` ids first, then
        ``added`` ACLs with the ids they are stored under. Unknown removals and duplicate additions are no-ops."""
        with self._write_lock:
            self._snapshot = replace(self._snapshot, index=self._snapshot.index.with_changes(added, removed))

    def replace_acls(self, acls: Iterable[StoredAcl]) -> None:
        """Replace the whole ACL set in one swap (initial load, full reload)."""
        index = AclIndex.build(acls)
        with self._write_lock:
            self._snapshot = replace(self._snapshot, index=index)


def authorize_in(
    snap: AuthorizerSnapshot, context: RequestContext, actions: Sequence[Action]
) -> list[AuthorizationResult]:
    """``StandardAuthorizer.authorize`` against one given snapshot (also the probe of authorize_by_resource_type,
    and what ``requests.authorize_request`` uses so that a request's decisions and its audit share one snapshot)."""
    principal, host = context.principal, context.host
    memberships = snap.memberships
    member_of = memberships.get(principal, ()) if memberships else ()
    if context.groups:
        member_of = with_login_groups(member_of, context.groups)
    if principal in snap.super_users:
        for action in actions:
            _check_action(action)
        return [ALLOWED] * len(actions)
    if not snap.ready:
        raise AuthorizerNotReadyError(_NOT_READY)
    index = snap.index
    match_mask: Callable[[ResourceType, str, str, str], int]
    if member_of:

        def match_mask(resource_type: ResourceType, name: str, principal: str, host: str) -> int:
            return index.members_match_mask(resource_type, name, principal, host, member_of)

    else:
        match_mask = index.match_mask
    default = ALLOWED if snap.allow_everyone_if_no_acl_found else DENIED
    results: list[AuthorizationResult] = []
    for action in actions:
        # The checks of _check_action, inlined: this loop is the hot path.
        pattern = action.resource_pattern
        bits = _BITS.get(action.operation)
        if bits is None or pattern.pattern_type is not LITERAL or pattern.resource_type not in _KNOWN_TYPES:
            raise _invalid_action(action)
        mask = match_mask(pattern.resource_type, pattern.name, principal, host)
        if mask & bits[1]:
            results.append(DENIED)
        elif mask & bits[0]:
            results.append(ALLOWED)
        elif mask & RELEVANT_BIT:
            results.append(DENIED)
        else:
            results.append(default)
    return results


def explain_in(snap: AuthorizerSnapshot, context: RequestContext, action: Action) -> Decision:
    """``StandardAuthorizer.explain`` against one given snapshot: the same decision ``authorize_in`` makes on it,
    with the deciding rule and every matching ACL (most specific first)."""
    _check_action(action)
    if context.principal in snap.super_users:
        return Decision(context, action, ALLOWED, SuperUserRule(context.principal))
    if not snap.ready:
        raise AuthorizerNotReadyError(_NOT_READY)
    pattern = action.resource_pattern
    groups = snap.index.relevant_groups(pattern.resource_type, pattern.name)
    matching: list[StoredAcl] = []
    relevant = 0
    member_of = snap.groups_for(context)
    for group in groups:
        relevant += len(group.acls)
        for acl in group.acls:
            if _entry_matches(acl, context, action.operation, member_of):
                matching.append(acl)
    denies = [acl for acl in matching if acl.binding.entry.permission_type is AclPermissionType.DENY]
    rule: Rule
    if denies:
        result, rule = DENIED, MatchingAclRule(min(denies, key=_kafka_scan_position))
    elif matching:
        result, rule = ALLOWED, MatchingAclRule(max(matching, key=_kafka_scan_position))
    elif relevant:
        result, rule = DENIED, DefaultRule(DENIED, resource_has_acls=True)
    else:
        result = ALLOWED if snap.allow_everyone_if_no_acl_found else DENIED
        rule = DefaultRule(result, resource_has_acls=False)
    return Decision(context, action, result, rule, tuple(matching), relevant)


def _kafka_scan_position(acl: StoredAcl) -> tuple[int, int, int, int, str, str, int]:
    """Where Kafka's StandardAuthorizerData meets ``acl`` when it scans for a decision, so that the deciding ACL we
    name is the one Kafka's audit log names (kafkaguard's ``audit usage`` credits the same ACL as Kafka's log).

    Kafka walks its ACLs sorted by resource name in REVERSE order (the exact name, then ever shorter prefixes; at
    one name LITERAL before PREFIXED), then by operation, principal, host and permission codes, and afterwards the
    LITERAL ``*`` section in the same order. The first matching DENY decides and stops the walk; otherwise the
    LAST matching ALLOW is the one reported (``checkSection`` overwrites ``allowAcl`` on every match). Every ACL
    here is relevant to one resource name, so "reverse name order" is "longest name first".
    """
    pattern, entry = acl.binding.pattern, acl.binding.entry
    wildcard = pattern.pattern_type is LITERAL and pattern.name == WILDCARD_RESOURCE
    return (
        1 if wildcard else 0,
        -len(pattern.name),
        pattern.pattern_type.code,
        entry.operation.code,
        entry.principal,
        entry.host,
        entry.permission_type.code,
    )


def _check_action(action: Action) -> None:
    pattern = action.resource_pattern
    if (
        action.operation not in _BITS
        or pattern.pattern_type is not LITERAL
        or pattern.resource_type not in _KNOWN_TYPES
    ):
        raise _invalid_action(action)


def _invalid_action(action: Action) -> InvalidActionError:
    """The error for an action authorize() refuses (the caller has seen that one of these holds)."""
    pattern = action.resource_pattern
    if pattern.pattern_type is not LITERAL:
        return InvalidActionError(f"Only literal resources are supported. Got: {pattern.pattern_type}")
    if action.operation not in _BITS:
        return InvalidActionError(f"Cannot authorize operation {action.operation!r}: name a concrete operation")
    return InvalidActionError(f"Cannot authorize resource type {pattern.resource_type!r}")


def _entry_matches(
    acl: StoredAcl, context: RequestContext, operation: AclOperation, member_of: tuple[str, ...]
) -> bool:
    entry = acl.binding.entry
    if not principal_matches(entry.principal, context.principal, member_of):
        return False
    if not host_matches(entry.host, context.host):
        return False
    return operation in covered_operations(entry.operation, entry.permission_type)


def authorize_by_resource_type_in(
    snapshot: AuthorizerSnapshot, context: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> AuthorizationResult:
    """``StandardAuthorizer.authorize_by_resource_type`` against one given snapshot (a request's own).

    :raises InvalidActionError: ANY or UNKNOWN resource type or operation, as Kafka's argument checks.
    """
    if resource_type is ResourceType.ANY:
        raise InvalidActionError("Must specify a non-filter resource type for authorizeByResourceType")
    if resource_type.is_unknown:
        raise InvalidActionError("Unknown resource type")
    if operation is AclOperation.ANY:
        raise InvalidActionError("Must specify a non-filter operation type for authorizeByResourceType")
    if operation.is_unknown:
        raise InvalidActionError("Unknown operation type")

    def probe(name: str) -> AuthorizationResult:
        action = Action(operation, ResourcePattern(resource_type, name, PatternType.LITERAL))
        return authorize_in(snapshot, context, (action,))[0]

    member_of = snapshot.groups_for(context)
    return scan_by_resource_type(snapshot.index, context, operation, resource_type, probe, member_of)

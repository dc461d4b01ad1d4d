"""``authorizer.decision_memo``: the audit writer's remembered ``explain_in``, on real authorizers."""

from __future__ import annotations

import itertools

import pytest

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.authorizer.decision_memo import DecisionMemo
from kafkaguard.authorizer.standard import explain_in
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)

TOPIC = ResourceType.TOPIC


def binding(name: str, op: AclOperation, *, principal: str = "User:alice", deny: bool = False,
            pattern: PatternType = PatternType.LITERAL) -> AclBinding:  # fmt: skip
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(ResourcePattern(TOPIC, name, pattern), AccessControlEntry(principal, "*", op, permission))


def read(name: str) -> Action:
    return Action(AclOperation.READ, ResourcePattern(TOPIC, name, PatternType.LITERAL))


ALICE, BOB = RequestContext("User:alice", "10.0.0.7"), RequestContext("User:bob", "10.0.0.8")


def test_every_answer_equals_explain_in_on_the_same_snapshot():
    authorizer = StandardAuthorizer()
    authorizer.add_acls(
        [
            binding("orders", AclOperation.READ),
            binding("ord", AclOperation.ALL, pattern=PatternType.PREFIXED),
            binding("orders", AclOperation.READ, principal="User:bob", deny=True),
        ]
    )
    memo, snapshot = DecisionMemo(), authorizer.snapshot
    cases = list(itertools.product([ALICE, BOB], [read("orders"), read("order-lines"), read("pii")]))
    for context, action in cases * 3:  # the second and third rounds are answered from the memo
        assert memo.explain(snapshot, context, action) == explain_in(snapshot, context, action)
    assert len(memo) == len(cases)


def test_a_new_snapshot_is_never_answered_from_the_old_ones_decisions():
    authorizer = StandardAuthorizer()
    authorizer.add_acls([binding("orders", AclOperation.READ)])
    memo, before = DecisionMemo(), authorizer.snapshot
    assert memo.explain(before, ALICE, read("orders")).result is AuthorizationResult.ALLOWED
    authorizer.add_acls([binding("orders", AclOperation.READ, deny=True)])
    after = authorizer.snapshot
    denied = memo.explain(after, ALICE, read("orders"))
    assert denied.result is AuthorizationResult.DENIED and "DENY" in str(denied.rule)
    # A request decided with the older snapshot, still queued, is explained with that snapshot.
    assert memo.explain(before, ALICE, read("orders")).result is AuthorizationResult.ALLOWED


def test_the_memo_is_bounded():
    authorizer = StandardAuthorizer()
    authorizer.add_acls([binding("t", AclOperation.READ, pattern=PatternType.PREFIXED)])
    memo, snapshot = DecisionMemo(max_entries=8), authorizer.snapshot
    for host in range(100):  # a client cycling its address: one miss each, never more than 8 remembered
        context = RequestContext("User:alice", f"10.0.0.{host}")
        assert memo.explain(snapshot, context, read("t1")) == explain_in(snapshot, context, read("t1"))
        assert len(memo) <= 8


def test_a_bound_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        DecisionMemo(max_entries=0)

"""The order ``apply`` changes ACLs in (``kafkaguard.cli.plan``): at every intermediate state — after every single
ACL, in any order inside a step — access stays between the old and the new ACL sets, decided by the real
``StandardAuthorizer``:

* allowed in the intermediate state ⇒ allowed by the old or by the new ACLs (never wider than old ∪ new);
* allowed by the old and by the new ACLs ⇒ allowed in the intermediate state (never narrower than old ∩ new),
  under Kafka's default ``allow.everyone.if.no.acl.found=false``.
"""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.authorizer import StandardAuthorizer
from kafkaguard.cli.plan import StepKind, compute_plan
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Action,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
)
from tests.strategies import Query, binding_lists, queries_about, stored


@st.composite
def changes(draw: st.DrawFn) -> tuple[list[AclBinding], list[AclBinding], list[Query], random.Random]:
    """Old and new ACL sets that overlap (new keeps some of old), questions about both, and a shuffler."""
    old = draw(binding_lists)
    kept = [b for b in old if draw(st.booleans())]
    new = list(dict.fromkeys(kept + draw(binding_lists)))
    queries = draw(queries_about(old + new))
    return old, new, queries, draw(st.randoms(use_true_random=False))


def decide(acls: set[AclBinding], queries: list[Query], allow_everyone: bool) -> list[bool]:
    authorizer = StandardAuthorizer((), allow_everyone, acls=stored(sorted(acls, key=str)))
    return [
        authorizer.authorize_one(
            q.context, Action(q.operation, ResourcePattern(q.resource_type, q.name, PatternType.LITERAL))
        ).name
        == "ALLOWED"
        for q in queries
    ]


def intermediate_states(old: list[AclBinding], new: list[AclBinding], prune: bool, shuffle: random.Random):
    """Every state apply passes through, one ACL at a time, each step's ACLs in a random order."""
    state = set(old)
    yield set(state)
    for step in compute_plan(old, new).steps(prune):
        bindings = list(step.bindings)
        shuffle.shuffle(bindings)
        for binding in bindings:
            if step.kind is StepKind.ADD:
                state.add(binding)
            else:
                state.discard(binding)
            yield set(state)


@given(changes(), st.booleans())
def test_access_stays_between_old_and_new_at_every_step(change, allow_everyone) -> None:
    old, new, queries, shuffle = change
    before = decide(set(old), queries, allow_everyone)
    after = decide(set(new), queries, allow_everyone)
    states = list(intermediate_states(old, new, True, shuffle))
    assert states[-1] == set(new)
    for state in states:
        now = decide(state, queries, allow_everyone)
        for query, was, will, is_ in zip(queries, before, after, now, strict=True):
            assert not is_ or was or will, f"wider than old ∪ new for {query} in {state}"
            if not allow_everyone:
                assert is_ or not (was and will), f"narrower than old ∩ new for {query} in {state}"


@given(changes())
def test_without_prune_nothing_is_removed(change) -> None:
    old, new, _, shuffle = change
    plan = compute_plan(old, new)
    assert all(step.kind is StepKind.ADD for step in plan.steps(False))
    assert list(intermediate_states(old, new, False, shuffle))[-1] == set(old) | set(new)
    assert set(plan.to_add) == set(new) - set(old)
    assert set(plan.to_remove) == set(old) - set(new)
    assert set(plan.unchanged) == set(old) & set(new)


def topic_acl(principal: str, permission: AclPermissionType) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, "t"), AccessControlEntry(principal, "*", AclOperation.READ, permission)
    )


def test_steps_come_in_the_safe_order() -> None:
    old = [topic_acl("User:a", AclPermissionType.ALLOW), topic_acl("User:b", AclPermissionType.DENY)]
    new = [topic_acl("User:c", AclPermissionType.ALLOW), topic_acl("User:d", AclPermissionType.DENY)]
    steps = [(s.kind, s.permission) for s in compute_plan(old, new).steps(prune=True)]
    assert steps == [
        (StepKind.ADD, AclPermissionType.DENY),
        (StepKind.ADD, AclPermissionType.ALLOW),
        (StepKind.REMOVE, AclPermissionType.ALLOW),
        (StepKind.REMOVE, AclPermissionType.DENY),
    ]


def test_with_allow_everyone_no_order_keeps_the_floor() -> None:
    """Why the floor is only claimed for Kafka's default: with allow.everyone.if.no.acl.found=true the first ACL
    on a resource revokes everybody else's default access. alice may read t before (no ACLs) and after (her ALLOW);
    once bob's DENY is in and her ALLOW not yet, she may not — and adding her ALLOW first would let bob read."""
    alice = RequestContext("User:alice", "10.0.0.1")
    read_t = Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, "t"))
    deny_bob = topic_acl("User:bob", AclPermissionType.DENY)
    middle = StandardAuthorizer((), True, acls=stored([deny_bob]))
    assert middle.authorize_one(alice, read_t).name != "ALLOWED"

"""authorizer.mutation: the one validation and result-building of ACL changes, shared by the standalone
``StandardAuthorizer.add_acls``/``remove_acls`` and ``AclService`` (store first, then the authorizer)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StandardAuthorizer,
)
from kafkaguard.authorizer import AclCreateResult, AclDeleteResult
from kafkaguard.authorizer.index import AclIndex
from kafkaguard.authorizer.mutation import assign_ids, match_filters, plan_creation, plan_deletion
from kafkaguard.service import AclService
from kafkaguard.store import MemoryAclStore
from tests.actors import ACTOR
from tests.strategies import binding_filters, bindings, stored

READ, ALLOW = AclOperation.READ, AclPermissionType.ALLOW


def topic_acl(name: str, principal: str = "User:alice") -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL), AccessControlEntry(principal, "*", READ, ALLOW)
    )


#: Bindings ``validate_new_binding`` refuses, each for another reason.
INVALID = (
    AclBinding(
        ResourcePattern(ResourceType.CLUSTER, "not-the-cluster", PatternType.LITERAL),
        AccessControlEntry("User:alice", "*", AclOperation.ALTER, ALLOW),
    ),
    topic_acl(""),
    topic_acl("t", principal="alice"),
)
UNKNOWN_PATTERN = AclBindingFilter(
    ResourcePatternFilter(ResourceType.UNKNOWN, None, PatternType.ANY), AccessControlEntryFilter.ANY
)
UNKNOWN_ENTRY = AclBindingFilter(
    ResourcePatternFilter.ANY,
    AccessControlEntryFilter(None, None, AclOperation.from_code(50), AclPermissionType.ANY),
)


def comparable(results: Sequence[AclCreateResult | AclDeleteResult]) -> list[tuple[object, ...]]:
    """Results with their errors as (type, message): exceptions are not equal by value. A deletion's matched ACLs
    are compared in id order: Kafka lists them in no particular order (its maps'), and so do the index and the
    stores, each in its own."""
    out: list[tuple[object, ...]] = []
    for r in results:
        if isinstance(r, AclDeleteResult):
            r = replace(r, removed_acls=tuple(sorted(r.removed_acls, key=lambda acl: acl.id)))
        out.append((replace(r, error=None), None if r.error is None else (type(r.error), str(r.error))))
    return out


def counter() -> Callable[[], AclId]:
    numbers: Iterator[int] = iter(range(10_000))
    return lambda: AclId(f"id-{next(numbers)}")


def test_the_worked_example_of_the_docstring():
    a, bad = topic_acl("a"), INVALID[0]
    plan = plan_creation([a, bad, a])
    assert plan.valid == (a, a)
    stored_acls, new = assign_ids(AclIndex.build(()), plan.valid, counter())
    assert [acl.id for acl in stored_acls] == ["id-0", "id-0"]
    assert [acl.binding for acl in new] == [a]
    results = plan.results(stored_acls)
    assert [(r.binding, r.acl_id, r.succeeded) for r in results] == [(a, "id-0", True), (bad, None, False),
                                                                     (a, "id-0", True)]  # fmt: skip
    assert str(results[1].error) == "The only valid name for the CLUSTER resource is kafka-cluster"


def test_assign_ids_keeps_the_ids_the_index_holds():
    kept = topic_acl("kept")
    index = AclIndex.build(stored([kept], first_id=7))
    stored_acls, new = assign_ids(index, [topic_acl("new"), kept, topic_acl("new")], counter())
    assert [acl.id for acl in stored_acls] == ["id-0", index.id_of(kept), "id-0"]
    assert [acl.binding for acl in new] == [topic_acl("new")]


def test_plan_deletion_refuses_unknown_filters_with_kafkas_messages():
    a = topic_acl("a")
    plan = plan_deletion([UNKNOWN_PATTERN, a.to_filter(), UNKNOWN_ENTRY])
    assert plan.valid == (a.to_filter(),)
    index = AclIndex.build(stored([a]))
    results = plan.results(match_filters(index, plan.valid))
    assert [str(r.error) for r in results] == ["Unknown patternFilter.", "None", "Unknown entryFilter."]
    assert results[1].bindings == (a,)


@given(
    st.lists(bindings, max_size=10),
    st.lists(st.sampled_from(INVALID), max_size=2),
    st.randoms(use_true_random=False),
    st.lists(binding_filters | st.sampled_from((UNKNOWN_PATTERN, UNKNOWN_ENTRY)), max_size=4),
)
def test_the_standalone_authorizer_and_the_service_answer_alike(valid, invalid, random, filters):
    """Same requests, same id factory: the same results, item for item, and the same ACLs afterwards."""
    requested = valid + invalid
    random.shuffle(requested)
    standalone = StandardAuthorizer(id_factory=counter())
    service = AclService(MemoryAclStore(id_factory=counter()), StandardAuthorizer(ready=False))
    assert comparable(standalone.add_acls(requested)) == comparable(service.create_acls(requested, actor=ACTOR))
    assert comparable(standalone.remove_acls(filters)) == comparable(service.delete_acls(filters, actor=ACTOR))
    assert sorted(standalone.stored_acls(), key=repr) == sorted(service.describe_acls(), key=repr)

"""Readers never see a batch half-applied; writers never lose each other's changes (STYLE.md Part 3 item 7).

The switch interval is made tiny while these run so that threads interleave inside the writer's work. Nothing
here measures time: each test runs a fixed amount of work and checks every observation it made.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from kafkaguard import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    DefaultRule,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StandardAuthorizer,
    StoredAcl,
)

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = RequestContext("User:alice", "10.0.0.1"), RequestContext("User:bob", "10.0.0.1")
SWAPS = 1500
READERS = 3


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def binding(name: str, op: AclOperation, perm: AclPermissionType, resource_type: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name), AccessControlEntry("User:alice", "*", op, perm))


def run_concurrently(writer: Callable[[], None], reader: Callable[[], None]) -> int:
    """Run ``writer`` once and ``reader`` in a loop on READERS threads until the writer is done; re-raise the first
    failure of any thread; return the number of reads."""
    done = threading.Event()
    failures: list[BaseException] = []
    reads = [0] * READERS

    def write() -> None:
        try:
            writer()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            failures.append(e)
        finally:
            done.set()

    def read(slot: int) -> None:
        try:
            while not done.is_set() and not failures:
                reader()
                reads[slot] += 1
            reader()  # at least once after the last write
            reads[slot] += 1
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            failures.append(e)

    threads = [threading.Thread(target=read, args=(slot,)) for slot in range(READERS)]
    threads.append(threading.Thread(target=write))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return sum(reads)


def test_a_swap_of_allow_for_deny_is_never_seen_half_applied():
    names = ("t1", "t2", "t3")
    allows = [StoredAcl(AclId(f"allow-{n}"), binding(n, READ, ALLOW)) for n in names]
    denies = [StoredAcl(AclId(f"deny-{n}"), binding(n, READ, DENY)) for n in names]
    # allow.everyone is on: if a reader ever saw the removals without the additions, Bob (who has no ACL) would be
    # ALLOWED by the default on a resource that, before and after every batch, has ACLs.
    authorizer = StandardAuthorizer(allow_everyone_if_no_acl_found=True, acls=allows)
    alice_actions = [Action(op, ResourcePattern(TOPIC, n)) for n in names for op in (READ, DESCRIBE)]
    bob_actions = [Action(READ, ResourcePattern(TOPIC, n)) for n in names]
    consistent = ([ALLOWED] * len(alice_actions), [DENIED] * len(alice_actions))
    final_state = [ALLOWED] * len(alice_actions) if SWAPS % 2 == 0 else [DENIED] * len(alice_actions)

    def writer() -> None:
        for i in range(SWAPS):
            if i % 2 == 0:
                authorizer.apply_changes(added=denies, removed=[a.id for a in allows])
            else:
                authorizer.apply_changes(added=allows, removed=[a.id for a in denies])

    def reader() -> None:
        seen = authorizer.authorize(ALICE, alice_actions)
        assert seen in consistent, seen
        assert authorizer.authorize(BOB, bob_actions) == [DENIED] * len(names)
        decision = authorizer.explain(ALICE, alice_actions[0])
        assert not isinstance(decision.rule, DefaultRule), decision
        assert len(decision.matching_acls) == 1
        assert decision.matching_acls[0].binding.entry.permission_type is (
            ALLOW if decision.result is ALLOWED else DENY
        )

    assert run_concurrently(writer, reader) >= READERS
    assert authorizer.authorize(ALICE, alice_actions) == final_state
    assert authorizer.acl_count == len(names)


def test_add_acls_and_remove_acls_batches_are_atomic():
    groups = [f"g{i}" for i in range(6)]
    batch = [binding(g, WRITE, ALLOW, GROUP) for g in groups]
    remove_all = AclBindingFilter(
        ResourcePatternFilter(GROUP, None, PatternType.LITERAL),
        AccessControlEntryFilter("User:alice", None, WRITE, ALLOW),
    )
    authorizer = StandardAuthorizer()
    actions = [Action(WRITE, ResourcePattern(GROUP, g)) for g in groups]

    def writer() -> None:
        for _ in range(SWAPS // 2):
            results = authorizer.add_acls(batch)
            assert all(r.succeeded for r in results)
            [removed] = authorizer.remove_acls([remove_all])
            assert set(removed.bindings) == set(batch)

    def reader() -> None:
        seen = authorizer.authorize(ALICE, actions)
        assert seen in ([ALLOWED] * len(groups), [DENIED] * len(groups)), seen
        listed = authorizer.acls(remove_all)
        assert len(listed) in (0, len(groups)), listed

    assert run_concurrently(writer, reader) >= READERS
    assert authorizer.acl_count == 0


def test_concurrent_writers_lose_no_change():
    authorizer = StandardAuthorizer()
    per_writer = 150
    writers = 4
    failures: list[BaseException] = []

    def write(w: int) -> None:
        try:
            for i in range(per_writer):
                authorizer.add_acls([binding(f"w{w}-{i}", READ, ALLOW)])
                if i % 3 == 0:
                    authorizer.remove_acls([binding(f"w{w}-{i}", READ, ALLOW).to_filter()])
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            failures.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    expected = {f"w{w}-{i}" for w in range(writers) for i in range(per_writer) if i % 3 != 0}
    assert {b.pattern.name for b in authorizer.acls()} == expected
    assert authorizer.acl_count == len(expected)
    for name in sorted(expected)[:20]:
        assert authorizer.authorize(ALICE, [Action(READ, ResourcePattern(TOPIC, name))]) == [ALLOWED]

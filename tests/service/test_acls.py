"""AclService: Kafka's create/delete semantics, store first then authorizer, following other processes,
export and import."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from kafkaguard import (
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from kafkaguard.model import AclBindingFilter, ResourcePatternFilter
from kafkaguard.model.acl_json import AclJsonError
from kafkaguard.service import AclService
from kafkaguard.store import AclStore, MemoryAclStore, SqliteStore, StoreError
from tests.actors import ACTOR
from tests.service.children import Lines
from tests.service.guarded import GuardedStore
from tests.store.helpers import acl, acl_filter

ROOT = Path(__file__).resolve().parents[2]
ALICE = RequestContext("User:alice", "10.0.0.1")
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def read(service: AclService, topic: str, context: RequestContext = ALICE) -> AuthorizationResult:
    action = Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, topic))
    return service.authorizer.authorize_one(context, action)


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AclStore]:
    store: AclStore = SqliteStore(tmp_path / "kafkaguard.db") if request.param == "sqlite" else MemoryAclStore()
    yield store
    store.close()


@pytest.fixture
def service(store: AclStore) -> AclService:
    return AclService(store, StandardAuthorizer(ready=False))


def test_startup_loads_the_store_and_completes_the_initial_load(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        store.create_acls([acl("orders")])
        authorizer = StandardAuthorizer(ready=False)
        service = AclService(store, authorizer)
        assert authorizer.snapshot.ready
        assert read(service, "orders") is ALLOWED
        assert service.version == 1


def test_create_gives_one_result_per_binding_in_order(service: AclService) -> None:
    good, bad_name, bad_cluster = (
        acl("orders"),
        acl(""),
        acl("other", resource_type=ResourceType.CLUSTER, operation=AclOperation.ALTER),
    )
    results = service.create_acls([good, bad_name, good, bad_cluster, acl("payments")], actor=ACTOR)
    assert [r.succeeded for r in results] == [True, False, True, False, True]
    assert str(results[1].error) == "Invalid empty resource name"
    assert str(results[3].error) == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert results[0].acl_id == results[2].acl_id
    assert [r.binding for r in results] == [good, bad_name, good, bad_cluster, acl("payments")]
    assert read(service, "orders") is ALLOWED
    again = service.create_acls([good], actor=ACTOR)
    assert again[0].succeeded and again[0].acl_id == results[0].acl_id
    assert len(service.describe_acls()) == 2


def test_principal_format_is_validated_on_creation(service: AclService) -> None:
    [result] = service.create_acls([acl("orders", principal="alice")], actor=ACTOR)
    assert not result.succeeded
    assert "alice" in str(result.error)
    assert service.describe_acls() == []


def test_delete_reports_matches_per_filter_and_removes_each_once(service: AclService) -> None:
    service.create_acls([acl("orders"), acl("orders", "User:bob"), acl("payments")], actor=ACTOR)
    unknown = AclBindingFilter(
        ResourcePatternFilter(ResourceType(99), None, PatternType.ANY), acl_filter().entry_filter
    )
    results = service.delete_acls([acl_filter("orders"), unknown, acl_filter(principal="User:alice")], actor=ACTOR)
    assert {a.binding for a in results[0].removed_acls} == {acl("orders"), acl("orders", "User:bob")}
    assert str(results[1].error) == "Unknown patternFilter." and results[1].removed_acls == ()
    assert {a.binding for a in results[2].removed_acls} == {acl("orders"), acl("payments")}
    assert service.describe_acls() == []
    assert read(service, "orders") is DENIED


def test_a_match_filter_deletes_everything_that_applies_to_the_name(service: AclService) -> None:
    service.create_acls(
        [acl("orders"), acl("*"), acl("ord", pattern_type=PatternType.PREFIXED), acl("orders-eu"), acl("x")],
        actor=ACTOR,
    )
    [result] = service.delete_acls(
        [acl_filter("orders", PatternType.MATCH, resource_type=ResourceType.TOPIC)], actor=ACTOR
    )
    assert {a.binding.pattern.name for a in result.removed_acls} == {"orders", "*", "ord"}
    assert {a.binding.pattern.name for a in service.describe_acls()} == {"orders-eu", "x"}


def test_the_store_is_written_before_the_authorizer(tmp_path: Path) -> None:
    class FailingStore(MemoryAclStore):
        def create_acls(self, bindings, *, history=None):
            raise StoreError("disk full")

    service = AclService(FailingStore(), StandardAuthorizer())
    with pytest.raises(StoreError):
        service.create_acls([acl("orders")], actor=ACTOR)
    assert read(service, "orders") is DENIED
    assert service.authorizer.acl_count == 0


def test_describe_acls_reads_the_authorizer_snapshot_not_the_store(store: AclStore) -> None:
    guarded = GuardedStore(store)
    service = AclService(cast(AclStore, guarded), StandardAuthorizer())
    service.create_acls([acl("orders"), acl("payments")], actor=ACTOR)
    guarded.closed = True
    assert {a.binding for a in service.describe_acls()} == {acl("orders"), acl("payments")}
    assert [a.binding for a in service.describe_acls(acl_filter("orders"))] == [acl("orders")]
    assert guarded.refused == []


def test_describe_acls_shows_own_writes_at_once_and_other_connections_after_poll(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as first_store, SqliteStore(path) as second_store:
        first, second = AclService(first_store, StandardAuthorizer()), AclService(second_store, StandardAuthorizer())
        first.create_acls([acl("orders")], actor=ACTOR)
        assert [a.binding for a in first.describe_acls()] == [acl("orders")]
        assert second.describe_acls() == []
        assert second.poll() is True
        assert [a.binding for a in second.describe_acls()] == [acl("orders")]


def test_another_service_on_the_same_file_follows_incrementally(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as first_store, SqliteStore(path) as second_store:
        first, second = AclService(first_store, StandardAuthorizer()), AclService(second_store, StandardAuthorizer())
        assert second.poll() is False
        first.create_acls([acl("orders"), acl("payments")], actor=ACTOR)
        assert second.poll() is True
        assert read(second, "orders") is ALLOWED
        first.delete_acls([acl_filter("orders")], actor=ACTOR)
        result = second.sync()
        assert (result.full_reload, result.added, result.removed) == (False, 0, 1)
        assert read(second, "orders") is DENIED and read(second, "payments") is ALLOWED
        # Interleaved writers: each applies its own write and catches up with the other's.
        second.create_acls([acl("c")], actor=ACTOR)
        first.create_acls([acl("d")], actor=ACTOR)
        assert first.version == second_store.acl_version() == 5
        assert {a.binding for a in first.describe_acls()} == {acl("payments"), acl("c"), acl("d")}
        assert second.poll() is True
        assert {a.binding for a in second.describe_acls()} == {acl("payments"), acl("c"), acl("d")}


def test_a_follower_behind_the_change_log_reloads_in_full(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path, change_log_limit=2) as writer_store, SqliteStore(path) as follower_store:
        writer, follower = (
            AclService(writer_store, StandardAuthorizer()),
            AclService(follower_store, StandardAuthorizer()),
        )
        writer.create_acls([acl("a"), acl("b"), acl("c")], actor=ACTOR)
        writer.delete_acls([acl_filter("a")], actor=ACTOR)
        result = follower.sync()
        assert result.full_reload
        assert {a.binding for a in follower.describe_acls()} == {acl("b"), acl("c")}
        assert follower.version == 4


@pytest.mark.integration
def test_two_processes_see_each_others_changes_within_one_second(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    store = SqliteStore(path)
    service = AclService(store, StandardAuthorizer())
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.service.follower_child", str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        lines = Lines(child)
        lines.wait_for("ready", timeout=20)
        # The child's own write reaches this process.
        deadline = time.monotonic() + 1.0
        while read(service, "from-child") is not ALLOWED:
            assert time.monotonic() < deadline, "this process did not see the other's ACL within 1 s"
            service.poll()
            time.sleep(0.01)
        # This process's writes reach the child: an addition, then removals.
        service.create_acls([acl("orders")], actor=ACTOR)
        assert lines.wait_for("allowed from-child,orders", timeout=1.0) < 1.0
        service.create_acls(
            [acl("orders", operation=AclOperation.READ, permission=AclPermissionType.DENY)], actor=ACTOR
        )
        assert lines.wait_for("allowed from-child", timeout=1.0) < 1.0
        service.delete_acls([acl_filter("from-child"), acl_filter(permission=AclPermissionType.DENY)], actor=ACTOR)
        assert lines.wait_for("acls orders", timeout=1.0) < 1.0
        assert lines.wait_for("allowed orders", timeout=1.0) < 1.0
        service.delete_acls([AclBindingFilter.ANY], actor=ACTOR)
        assert lines.wait_for("acls ", timeout=1.0) < 1.0
    finally:
        child.kill()
        child.wait(timeout=10)
        assert child.stdout is not None
        child.stdout.close()
        store.close()


# --------------------------------------------------------------------------------------------- export/import


def test_export_then_import_round_trips(tmp_path: Path) -> None:
    bindings = [
        acl("orders"),
        acl("ord", "User:*", AclOperation.WRITE, pattern_type=PatternType.PREFIXED, host="10.0.0.1"),
        acl("kafka-cluster", "User:admin", AclOperation.ALTER, resource_type=ResourceType.CLUSTER),
        acl("g", resource_type=ResourceType.GROUP, permission=AclPermissionType.DENY),
    ]
    with SqliteStore(tmp_path / "a.db") as source_store, SqliteStore(tmp_path / "b.db") as target_store:
        source = AclService(source_store, StandardAuthorizer())
        source.create_acls(bindings, actor=ACTOR)
        text = source.export_json()
        assert json.loads(text)["acls"][0] == {
            "principal": "User:admin",
            "host": "*",
            "resource_type": "CLUSTER",
            "resource_name": "kafka-cluster",
            "pattern_type": "LITERAL",
            "operation": "ALTER",
            "permission_type": "ALLOW",
        }
        target = AclService(target_store, StandardAuthorizer())
        result = target.import_json(text, actor=ACTOR)
        assert (result.added, result.removed, result.unchanged) == (4, 0, 0)
        assert {a.binding for a in target.describe_acls()} == set(bindings)
        assert target.export_json() == text  # stable order: exports diff cleanly
        again = target.import_json(text, actor=ACTOR)
        assert (again.added, again.unchanged) == (0, 4)
        with_ids = source.export_document(with_ids=True)
        assert {row["id"] for row in with_ids["acls"]} == {a.id for a in source.describe_acls()}


def test_import_accepts_pascal_case_and_can_replace(service: AclService) -> None:
    service.create_acls([acl("old")], actor=ACTOR)
    document = {
        "acls": [
            {
                "principal": "User:alice",
                "host": "*",
                "resource_type": "Topic",
                "resource_name": "orders",
                "pattern_type": "Literal",
                "operation": "Read",
                "permission_type": "Allow",
            }
        ]
    }
    result = service.import_document(document, replace=True, actor=ACTOR)
    assert (result.added, result.removed) == (1, 1)
    assert [a.binding for a in service.describe_acls()] == [acl("orders")]
    assert read(service, "old") is DENIED and read(service, "orders") is ALLOWED


def test_import_with_bad_entries_reports_each_and_changes_nothing(service: AclService) -> None:
    service.create_acls([acl("kept")], actor=ACTOR)
    version = service.version
    good = {
        "principal": "User:alice",
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": "orders",
        "pattern_type": "LITERAL",
        "operation": "READ",
        "permission_type": "ALLOW",
    }
    document = {
        "acls": [
            good,
            {**good, "operation": "EAT"},
            good,
            {**good, "resource_name": ""},
            {**good, "pattern_type": "MATCH"},
            "not an object",
        ]
    }
    with pytest.raises(AclJsonError) as caught:
        service.import_document(document, replace=True, actor=ACTOR)
    assert [p.position for p in caught.value.problems] == [1, 3, 4, 5]
    assert "EAT" in caught.value.problems[0].reason
    assert caught.value.problems[1].reason == "Invalid empty resource name"
    assert service.version == version
    assert [a.binding for a in service.describe_acls()] == [acl("kept")]
    with pytest.raises(AclJsonError, match="not valid JSON"):
        service.import_json("{oops", actor=ACTOR)
    assert service.version == version


def test_sync_result_and_version_after_own_writes(service: AclService) -> None:
    service.create_acls([acl("a")], actor=ACTOR)
    assert service.poll() is False
    assert service.sync().added == 0

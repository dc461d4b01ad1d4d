"""Moving a store to PostgreSQL (``store.migration`` and ``kafkaguard store migrate``): everything copied with its
ids, counts checked, a non-empty target refused, passwords never shown."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaguard.cli.main import app
from kafkaguard.model import Actor, HistoryQuery
from kafkaguard.scram import ScramCredential, ScramMechanism
from kafkaguard.store import QuotaChange, SqliteStore, StoreError, TopicRecord, UserAlteration
from kafkaguard.store.events import acl_event
from kafkaguard.store.migration import count, migrate_store
from kafkaguard.store.ports import MembershipChange, quota_entity
from kafkaguard.store.postgres import PostgresStore
from kafkaguard.store.sqlite import DATABASE_NAME
from tests.actors import ACTOR
from tests.postgres import PASSWORD
from tests.store.helpers import acl


def _fill(store: SqliteStore) -> None:
    store.create_acls([acl(f"t{n}", f"User:u{n % 3}") for n in range(50)])
    store.alter_credentials(
        [
            UserAlteration(
                "alice",
                upsertions=(
                    ScramCredential(ScramMechanism.SCRAM_SHA_256, b"s" * 16, b"k" * 32, b"v" * 32, 8192),
                    ScramCredential(ScramMechanism.SCRAM_SHA_512, b"S" * 16, b"K" * 64, b"V" * 64, 4096),
                ),
            )
        ]
    )
    store.create_topics(
        [TopicRecord(name="orders", topic_id=uuid.UUID(int=77), num_partitions=3, replication_factor=1,
                     configs={"retention.ms": "1000"})]
    )  # fmt: skip
    store.alter_quotas(
        [
            QuotaChange(quota_entity([("user", "alice")]), "producer_byte_rate", 1024.0),
            QuotaChange(quota_entity([("user", None)]), "request_percentage", math.nan),
        ]
    )
    store.alter_memberships(
        [
            MembershipChange("ops", "User:alice", member=True),
            MembershipChange("ops", "User:bob", member=True),
            MembershipChange("audit", "User:alice", member=True),
        ]
    )


def test_everything_is_copied_with_its_ids(tmp_path: Path, postgres_url: str) -> None:
    with SqliteStore(tmp_path / DATABASE_NAME) as source, PostgresStore(postgres_url, password=PASSWORD) as target:
        _fill(source)
        counts = migrate_store(source, target, actor=ACTOR)
        assert (counts.acls, counts.credentials, counts.topics, counts.quotas, counts.memberships) == (50, 2, 1, 2, 3)
        assert target.load_memberships().groups == source.load_memberships().groups
        assert {(a.id, a.binding) for a in target.load_acls().acls} == {
            (a.id, a.binding) for a in source.load_acls().acls
        }
        assert target.load_topics().topics == source.load_topics().topics
        assert target.get_credential("alice", ScramMechanism.SCRAM_SHA_512) == source.get_credential(
            "alice", ScramMechanism.SCRAM_SHA_512
        )
        with pytest.raises(StoreError, match="already holds 50 ACLs"):
            migrate_store(source, target, actor=ACTOR)
        assert count(target) == counts


def test_the_command_copies_a_data_directory_and_keeps_the_cluster_id(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SqliteStore(tmp_path / DATABASE_NAME) as source:
        _fill(source)
        cluster_id = source.cluster_id()
    monkeypatch.setenv("KAFKAGUARD_STORE_PASSWORD", PASSWORD)
    result = CliRunner().invoke(app, ["store", "migrate", "--from", str(tmp_path), "--to", postgres_url])
    assert result.exit_code == 0, result.output
    assert (
        "copied 50 ACLs, 2 SCRAM credentials, 1 topics, 2 client quota entities, 3 group memberships" in result.output
    )
    assert PASSWORD not in result.output
    with PostgresStore(postgres_url, password=PASSWORD) as target:
        assert target.cluster_id() == cluster_id
    again = CliRunner().invoke(app, ["store", "migrate", "--from", str(tmp_path), "--to", postgres_url])
    assert again.exit_code == 2
    assert "already holds" in again.output


def test_the_command_refuses_a_password_in_a_url_and_a_missing_source(tmp_path: Path, postgres_url: str) -> None:
    with_password = postgres_url.replace("kafkaguard@", "kafkaguard:hunter2@")
    result = CliRunner().invoke(app, ["store", "migrate", "--from", str(tmp_path), "--to", with_password])
    assert result.exit_code == 2
    assert "hunter2" not in result.output
    assert "KAFKAGUARD_STORE_PASSWORD" in result.output
    result = CliRunner().invoke(app, ["store", "migrate", "--from", str(tmp_path / "nothing"), "--to", postgres_url])
    assert result.exit_code == 2
    assert "no kafkaguard database" in result.output


def test_the_history_comes_along_and_the_migration_is_in_it(tmp_path: Path, postgres_url: str) -> None:
    earlier = Actor(principal="User:carol", address="10.0.0.9", interface="rest", request_id="r-1")
    with SqliteStore(tmp_path / DATABASE_NAME) as source, PostgresStore(postgres_url, password=PASSWORD) as target:
        _fill(source)
        source.create_acls(
            [acl("pii-orders", "User:bob")],
            history=lambda creation: [acl_event("acl.created", earlier, a) for a in creation.acls],
        )
        [before] = source.read_history(HistoryQuery())
        migrate_store(source, target, actor=ACTOR)
        events = target.read_history(HistoryQuery(limit=1000))
    oldest = events[-1]
    assert (oldest.actor, oldest.time, oldest.data()) == (earlier, before.time, before.data())
    migrated = events[:-1]
    assert {e.actor for e in migrated} == {ACTOR}
    by_action = {action: sum(e.action == action for e in migrated) for action in {e.action for e in migrated}}
    assert by_action == {"acl.created": 51, "scram.upserted": 2, "topic.created": 1, "quota.altered": 2,
                         "group.member_added": 3}  # fmt: skip
    [nan] = [e for e in migrated if e.action == "quota.altered" and e.details["entity"] == {"user": None}]
    assert nan.details["quota"] == {"request_percentage": "nan"}  # JSON has no NaN: its text

"""The SQLite store: durability under SIGKILL, reopening, schema versions, the change log, pragmas, file modes,
errors."""

from __future__ import annotations

import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkaguard.scram import ScramMechanism, credential_from_salted_password
from kafkaguard.store import SchemaVersionError, SqliteStore, Store, StoreError, UserAlteration
from kafkaguard.store.schema import MIGRATIONS
from kafkaguard.store.sqlite import DATABASE_NAME
from tests.modes import PRIVATE, file_modes, mode, umask
from tests.store.durability import ROOT, check_sigkilled_writers
from tests.store.helpers import acl

SHA256 = ScramMechanism.SCRAM_SHA_256


def test_database_lives_under_the_data_dir_with_wal_and_full_sync(tmp_path: Path) -> None:
    with SqliteStore.in_data_dir(tmp_path / "data") as store:
        assert store.path == tmp_path / "data" / DATABASE_NAME
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store.check_integrity() == ["ok"]


def test_the_database_and_its_wal_and_shm_files_are_created_private(tmp_path: Path) -> None:
    credential = credential_from_salted_password(SHA256, b"salt", b"p" * 32, 4096)
    with umask(0o022), SqliteStore.in_data_dir(tmp_path / "data") as store:
        store.create_acls([acl("a")])
        store.alter_credentials([UserAlteration("alice", upsertions=(credential,))])
        # SQLite gives the -wal and -shm files the database file's mode.
        assert file_modes(tmp_path / "data") == {
            DATABASE_NAME: PRIVATE,
            f"{DATABASE_NAME}-shm": PRIVATE,
            f"{DATABASE_NAME}-wal": PRIVATE,
        }


def test_wider_existing_files_are_tightened_on_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "k.db"
    with umask(0o022):
        SqliteStore(path).close()
        # Another connection keeps the -wal and -shm files in place, as a running process would, and gives the -wal
        # content (SQLite itself sets an empty one to the database's mode when it opens it).
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("PRAGMA user_version = 1")
        names = [path, tmp_path / "k.db-wal", tmp_path / "k.db-shm"]
        for name in names:
            name.chmod(0o644)
        with caplog.at_level(logging.INFO, logger="kafkaguard"), SqliteStore(path) as store:
            store.create_acls([acl("a")])
            assert [mode(name) for name in names] == [PRIVATE] * 3
        holder.close()
    tightened = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "0o600" in r.getMessage()]
    assert len(tightened) == 3
    assert all(any(str(name) in line for line in tightened) for name in names)


def test_everything_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    credential = credential_from_salted_password(SHA256, b"salt", b"p" * 32, 4096)
    with SqliteStore(path) as store:
        created = store.create_acls([acl("a"), acl("b")]).acls
        store.alter_credentials([UserAlteration("alice", upsertions=(credential,))])
    with SqliteStore(path) as store:
        assert set(store.load_acls().acls) == set(created)
        assert store.acl_version() == 2
        assert store.get_credential("alice", SHA256) == credential


def test_schema_version_is_recorded_and_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    SqliteStore(path).close()
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
    raw.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS) + 1,))
    raw.commit()
    raw.close()
    with pytest.raises(SchemaVersionError, match="upgrade kafkaguard"):
        SqliteStore(path)


def test_secrets_are_stored_only_as_salt_and_keys(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        salted = b"\x01salted-password\x02" * 2
        credential = credential_from_salted_password(SHA256, b"the-salt", salted, 4096)
        store.alter_credentials([UserAlteration("alice", upsertions=(credential,))])
        columns = [row[1] for row in store._conn.execute("PRAGMA table_info(scram_credentials)")]
        assert columns == ["user", "mechanism", "salt", "stored_key", "server_key", "iterations"]
        assert (tmp_path / "k.db-wal").exists()
        assert not any(salted in f.read_bytes() for f in tmp_path.iterdir())
        assert any(credential.stored_key in f.read_bytes() for f in tmp_path.iterdir())
    assert not any(salted in f.read_bytes() for f in tmp_path.iterdir())


def test_a_follower_too_far_behind_the_change_log_must_reload(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db", change_log_limit=3) as store:
        for name in "abcde":
            store.create_acls([acl(name)])
        assert store.changes_since(1) is None
        delta = store.changes_since(2)
        assert delta is not None
        assert [a.binding.pattern.name for a in delta.added] == ["c", "d", "e"]
        assert store._conn.execute("SELECT count(*) FROM acl_changes").fetchone()[0] == 3


def test_acl_version_sees_commits_of_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as first, SqliteStore(path) as second:
        assert second.acl_version() == 0
        first.create_acls([acl("a")])
        assert second.acl_version() == 1
        second.create_acls([acl("b")])
        assert second.acl_version() == first.acl_version() == 2


def test_failures_are_store_errors_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "not-a-db").write_bytes(b"this is not a database file, not at all" * 100)
    with pytest.raises(StoreError, match="not-a-db"):
        SqliteStore(tmp_path / "not-a-db")
    store = SqliteStore(tmp_path / "k.db")
    store.close()
    with pytest.raises(StoreError, match=r"k\.db"):
        store.create_acls([acl("a")])


def test_a_failed_batch_changes_nothing(tmp_path: Path) -> None:
    ids = iter(["id-1", "id-1"])  # the second insert collides: the whole request must roll back
    with SqliteStore(tmp_path / "k.db", id_factory=lambda: next(ids)) as store:  # type: ignore[arg-type,return-value]
        with pytest.raises(StoreError):
            store.create_acls([acl("a"), acl("b")])
        assert store.load_acls().acls == ()
        assert store.acl_version() == 0


# ------------------------------------------------------------------------------------------------ durability


def test_every_acknowledged_change_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "k.db"

    def integral(store: Store) -> None:
        assert isinstance(store, SqliteStore)
        assert store.check_integrity() == ["ok"]

    check_sigkilled_writers(
        str(path), lambda: SqliteStore(path), rounds=30, rng=random.Random(20241122), pauses=(0.0, 0.25), check=integral
    )


def test_durability_child_refuses_to_start_on_a_newer_schema(tmp_path: Path) -> None:
    # The child fails loudly instead of writing into a database it does not understand.
    path = tmp_path / "k.db"
    SqliteStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute("UPDATE schema_version SET version = 99")
    raw.commit()
    raw.close()
    done = subprocess.run(
        [sys.executable, "-m", "tests.store.durability_child", str(path), "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert "SchemaVersionError" in done.stderr


def test_a_database_killed_while_being_created_opens_cleanly(tmp_path: Path) -> None:
    rng = random.Random(5)
    for attempt in range(6):
        path = tmp_path / f"fresh{attempt}.db"
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.store.durability_child", str(path), "0"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.05, 0.4))  # during interpreter start, import, migration or the first writes
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        with SqliteStore(path) as store:
            assert store.check_integrity() == ["ok"]
            assert store._conn.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
            log = store.changes_since(0)
            assert log is not None
            assert set(log.added) == set(store.load_acls().acls)


def test_the_change_feed_polls_on_the_interval(tmp_path: Path) -> None:
    # SQLite tells no other process about a commit: a follower waits the whole interval, then polls.
    with SqliteStore(tmp_path / "k.db") as store:
        start = time.monotonic()
        assert store.wait_for_change(0.2) is False
        assert 0.19 <= time.monotonic() - start < 1.0
        assert store.healthy()

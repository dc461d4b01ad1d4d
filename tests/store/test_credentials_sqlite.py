"""SCRAM credentials in the SQLite store: the credential version (schema version 3), kept by triggers so that any
writer of the table moves it, and seen by another connection (another process) with one cheap read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kafkaguard.scram import ScramCredential, ScramMechanism, credential_from_salted_password
from kafkaguard.store import SqliteStore, UserAlteration
from kafkaguard.store.schema import MIGRATIONS, migrate

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def credential(mechanism: ScramMechanism = SHA256, iterations: int = 4096, seed: bytes = b"x") -> ScramCredential:
    return credential_from_salted_password(mechanism, b"salt-of-16-bytes" + seed, seed * 32, iterations)


def test_a_version_2_database_gains_the_credential_version_and_keeps_its_credentials(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    raw = sqlite3.connect(path, isolation_level=None)
    assert migrate(raw, MIGRATIONS[:2]) == 2
    old = credential()
    raw.execute(
        "INSERT INTO scram_credentials VALUES (?, ?, ?, ?, ?, ?)",
        ("alice", 1, old.salt, old.stored_key, old.server_key, old.iterations),
    )
    raw.close()
    with SqliteStore(path) as store:
        assert store._conn.execute("SELECT version FROM schema_version").fetchone()[0] == len(MIGRATIONS) >= 3
        assert store.load_credentials().credentials == (("alice", old),)
        assert store.credential_version() == 0
        write = store.alter_credentials([UserAlteration("bob", upsertions=(credential(SHA512),))])
        assert (write.base_version, write.version, store.credential_version()) == (0, 1, 1)


def test_another_connections_writes_move_the_version_it_reads_even_raw_sql(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as mine, SqliteStore(path) as theirs:
        assert mine.credential_version() == theirs.credential_version() == 0
        write = theirs.alter_credentials(
            [UserAlteration("alice", upsertions=(credential(SHA256), credential(SHA512, 8192)))]
        )
        assert write.version == 2  # one step per row written
        assert mine.credential_version() == 2
        # An operator's sqlite3 shell, or any other writer of the table: the triggers still count it.
        shell = sqlite3.connect(path, isolation_level=None)
        shell.execute("UPDATE scram_credentials SET iterations = 5000 WHERE user = 'alice'")
        shell.execute("DELETE FROM scram_credentials WHERE mechanism = 2")
        shell.close()
        assert mine.credential_version() == theirs.credential_version() == 5
        assert [(user, c.iterations) for user, c in mine.load_credentials().credentials] == [("alice", 5000)]


def test_a_write_that_changes_nothing_keeps_the_version(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "k.db") as store:
        store.alter_credentials([UserAlteration("alice", upsertions=(credential(),))])
        refused = store.alter_credentials([UserAlteration("alice", deletions=(SHA256, SHA512))])
        assert (refused.base_version, refused.version, dict(refused.missing)) == (1, 1, {"alice": SHA512})
        assert store.credential_version() == 1


def test_credentials_of_an_unknown_mechanism_are_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as store:
        store.alter_credentials([UserAlteration("alice", upsertions=(credential(),))])
        store._conn.execute("INSERT INTO scram_credentials VALUES ('bob', 3, x'00', x'00', x'00', 4096)")
        assert [user for user, _ in store.load_credentials().credentials] == ["alice"]

"""CredentialService: KIP-554 alter (SEMANTICS.md §11.3 with §16.5/§16.6), describe (§11.4), the password
convenience, salt bounds, lookups from an in-memory snapshot that never touch the store, following other
processes' changes, the decoy profile, and secrets that never leak."""

from __future__ import annotations

import asyncio
import base64
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from kafkaguard.model import KafkaErrorCode
from kafkaguard.scram import (
    DEFAULT_DECOY_PROFILE,
    DEFAULT_ITERATIONS,
    DecoyProfile,
    ScramMechanism,
    credential_from_password,
    credential_from_salted_password,
)
from kafkaguard.service import (
    CredentialService,
    ScramDeletion,
    ScramUpsertion,
    UserAlterationResult,
)
from kafkaguard.store import CredentialInfo, CredentialStore, MemoryCredentialStore, SqliteStore
from tests.actors import ACTOR
from tests.service.outcomes import code_of, message_of

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
NONE = KafkaErrorCode.NONE
DUPLICATE = KafkaErrorCode.DUPLICATE_RESOURCE
UNACCEPTABLE = KafkaErrorCode.UNACCEPTABLE_CREDENTIAL
NOT_FOUND = KafkaErrorCode.RESOURCE_NOT_FOUND
UNSUPPORTED = KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM
SALT = b"\x9a\x1fsecret-salt-16b\x00"
SALTED = b"\xfe\xedSALTED-PASSWORD-BYTES-0123456789"


def up(
    user: str, mechanism: int = 1, iterations: int = 4096, salt: bytes = SALT, salted: bytes = SALTED
) -> ScramUpsertion:
    return ScramUpsertion(user=user, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def delete(user: str, mechanism: int = 1) -> ScramDeletion:
    return ScramDeletion(user=user, mechanism=mechanism)


def outcome(results: list[UserAlterationResult]) -> dict[str, tuple[KafkaErrorCode, str | None]]:
    assert len({r.user for r in results}) == len(results), "one result per distinct user"
    return {r.user: (code_of(r), message_of(r)) for r in results}


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CredentialStore]:
    store: CredentialStore = (
        SqliteStore(tmp_path / "kafkaguard.db") if request.param == "sqlite" else MemoryCredentialStore()
    )
    yield store
    store.close()


@pytest.fixture
def service(store: CredentialStore) -> CredentialService:
    return CredentialService(store, salt_factory=lambda: SALT)


def mechanisms(service: CredentialService, user: str) -> dict[ScramMechanism, int]:
    [description] = service.describe([user])
    return {info.mechanism: info.iterations for info in description.credentials}


def test_upsertion_stores_the_keys_derived_from_the_salted_password(service: CredentialService) -> None:
    assert outcome(service.alter(upsertions=[up("alice", 1, 8192)], actor=ACTOR)) == {"alice": (NONE, None)}
    assert service.lookup("alice", SHA256) == credential_from_salted_password(SHA256, SALT, SALTED, 8192)
    assert service.lookup("alice", SHA512) is None
    assert service.lookup("bob", SHA256) is None
    assert service.lookup_for(SHA256)("alice") == service.lookup("alice", SHA256)
    assert service.lookup_for(SHA512)("alice") is None


def test_several_mechanisms_for_one_user_in_one_request_are_accepted(service: CredentialService) -> None:
    results = service.alter(upsertions=[up("alice", 1, 4096), up("alice", 2, 8192)], actor=ACTOR)
    assert outcome(results) == {"alice": (NONE, None)}
    assert mechanisms(service, "alice") == {SHA256: 4096, SHA512: 8192}


def test_the_same_mechanism_twice_is_a_duplicate_and_nothing_of_that_user_is_applied(
    service: CredentialService,
) -> None:
    results = service.alter(upsertions=[up("alice", 1), up("alice", 2), up("alice", 1, 5000), up("bob")], actor=ACTOR)
    assert outcome(results) == {
        "alice": (DUPLICATE, "A user credential cannot be altered twice in the same request"),
        "bob": (NONE, None),
    }
    assert code_of(service.describe(["alice"])[0]) is NOT_FOUND
    assert mechanisms(service, "bob") == {SHA256: 4096}


def test_a_user_both_deleted_and_upserted_is_a_duplicate(service: CredentialService) -> None:
    service.alter(upsertions=[up("alice", 1)], actor=ACTOR)
    results = service.alter(deletions=[delete("alice", 1)], upsertions=[up("alice", 2)], actor=ACTOR)
    assert outcome(results) == {"alice": (DUPLICATE, "A user credential cannot be altered twice in the same request")}
    assert mechanisms(service, "alice") == {SHA256: 4096}
    results = service.alter(deletions=[delete("alice", 1), delete("alice", 1)], actor=ACTOR)
    assert outcome(results)["alice"][0] is DUPLICATE
    assert mechanisms(service, "alice") == {SHA256: 4096}


def test_one_bad_alteration_fails_all_of_that_users_and_no_other_users(service: CredentialService) -> None:
    service.alter(upsertions=[up("carol", 1)], actor=ACTOR)
    results = service.alter(
        deletions=[delete("carol", 1)],
        upsertions=[up("alice", 1), up("alice", 2, iterations=100), up("bob", 2)],
        actor=ACTOR,
    )
    assert outcome(results) == {
        "carol": (NONE, None),
        "alice": (UNACCEPTABLE, "Too few iterations"),
        "bob": (NONE, None),
    }
    assert service.lookup("alice", SHA256) is None
    assert mechanisms(service, "bob") == {SHA512: 4096}
    assert code_of(service.describe(["carol"])[0]) is NOT_FOUND  # the last credential gone: no such user


@pytest.mark.parametrize(
    ("iterations", "expected"),
    [
        (4095, (UNACCEPTABLE, "Too few iterations")),
        (4096, (NONE, None)),
        (16384, (NONE, None)),
        (16385, (UNACCEPTABLE, "Too many iterations")),
    ],
)
def test_iteration_bounds_are_inclusive(
    service: CredentialService, iterations: int, expected: tuple[KafkaErrorCode, str | None]
) -> None:
    for mechanism in (1, 2):
        assert (
            outcome(service.alter(upsertions=[up(f"u{mechanism}", mechanism, iterations)], actor=ACTOR))[
                f"u{mechanism}"
            ]
            == expected
        )


def test_validation_errors_carry_kafkas_codes_and_messages(service: CredentialService) -> None:
    results = service.alter(
        deletions=[delete("", 1), delete("", 2), delete("ghost", 1), delete("m", 3)],
        upsertions=[
            up("", 1),
            up("x", 0),
            up("y", 7),
            up("nosalt", salt=b""),
            up("nosalted", salted=b""),
        ],
        actor=ACTOR,
    )
    assert outcome(results) == {
        "": (UNACCEPTABLE, "Username must not be empty"),  # first error sticks; one result for the name
        "ghost": (NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "m": (UNSUPPORTED, "Unknown SCRAM mechanism"),
        "x": (UNSUPPORTED, "Unknown SCRAM mechanism"),
        "y": (UNSUPPORTED, "Unknown SCRAM mechanism"),
        "nosalt": (UNACCEPTABLE, "Salt must not be empty"),
        "nosalted": (UNACCEPTABLE, "Salted password must not be empty"),
    }
    assert service.describe() == []


def test_results_list_users_in_order_of_first_mention(service: CredentialService) -> None:
    service.alter(upsertions=[up("z")], actor=ACTOR)
    results = service.alter(deletions=[delete("z")], upsertions=[up("b"), up("a"), up("b", 2)], actor=ACTOR)
    assert [r.user for r in results] == ["z", "b", "a"]
    assert service.alter(actor=ACTOR) == []


def test_describe_all_for_none_or_empty_and_per_user_errors(service: CredentialService) -> None:
    service.alter(upsertions=[up("alice", 1), up("alice", 2, 5000), up("bob", 2)], actor=ACTOR)
    everyone = service.describe(None)
    assert everyone == service.describe([])
    assert [(d.user, code_of(d), d.credentials) for d in everyone] == [
        ("alice", NONE, (CredentialInfo(SHA256, 4096), CredentialInfo(SHA512, 5000))),
        ("bob", NONE, (CredentialInfo(SHA512, 4096),)),
    ]
    described = {d.user: d for d in service.describe(["bob", "carol", "alice", "alice", ""])}
    assert described["bob"].credentials == (CredentialInfo(SHA512, 4096),)
    assert (code_of(described["carol"]), message_of(described["carol"])) == (
        NOT_FOUND,
        "Attempt to describe a user credential that does not exist: carol",
    )
    assert (code_of(described["alice"]), message_of(described["alice"])) == (
        DUPLICATE,
        "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
    )
    assert described["alice"].credentials == ()
    assert code_of(described[""]) is NOT_FOUND
    assert set(described) == {"bob", "carol", "alice", ""}


def test_upsert_password_derives_with_a_fresh_salt(service: CredentialService) -> None:
    assert service.upsert_password("alice", SHA512, "pa55word", 8192, actor=ACTOR).succeeded
    assert service.lookup("alice", SHA512) == credential_from_password(SHA512, "pa55word", 8192, salt=SALT)
    assert message_of(service.upsert_password("alice", SHA256, "", 4096, actor=ACTOR)) == "Password must not be empty"
    assert message_of(service.upsert_password("alice", SHA256, "pw", 1, actor=ACTOR)) == "Too few iterations"
    assert code_of(service.upsert_password("alice", 9, "pw", actor=ACTOR)) is UNSUPPORTED
    assert code_of(service.upsert_password("", SHA256, "pw", actor=ACTOR)) is UNACCEPTABLE
    random_salts = CredentialService(MemoryCredentialStore())
    random_salts.upsert_password("a", SHA256, "pw", actor=ACTOR)
    random_salts.upsert_password("b", SHA256, "pw", actor=ACTOR)
    first, second = random_salts.lookup("a", SHA256), random_salts.lookup("b", SHA256)
    assert first is not None and second is not None and first.salt != second.salt


def test_credentials_persist_and_are_seen_by_another_process_store_after_a_poll(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as writer_store, SqliteStore(path) as reader_store:
        writer, reader = CredentialService(writer_store), CredentialService(reader_store)
        assert reader.poll() is False  # nothing changed: one cheap version read
        writer.alter(upsertions=[up("alice")], actor=ACTOR)
        assert writer.lookup("alice", SHA256) is not None  # this process's write: at once
        assert reader.lookup("alice", SHA256) is None  # another process's: at the next poll
        assert reader.poll() is True
        assert reader.lookup("alice", SHA256) == writer.lookup("alice", SHA256)
        assert reader.version == writer.version
        writer.alter(deletions=[delete("alice")], actor=ACTOR)
        assert reader.poll() is True
        assert reader.lookup("alice", SHA256) is None
        assert reader.poll() is False


def test_secrets_never_appear_in_reprs_results_logs_or_the_database_dump(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with SqliteStore(tmp_path / "k.db") as store:
        service = CredentialService(store, salt_factory=lambda: SALT)
        upsertion = up("alice")
        results = service.alter(upsertions=[upsertion, up("bob", salt=b"")], deletions=[delete("ghost")], actor=ACTOR)
        service.upsert_password("carol", SHA256, "hunter2-password", actor=ACTOR)
        credential = service.lookup("alice", SHA256)
        assert credential is not None
        texts = [
            repr(upsertion),
            str(upsertion),
            repr(results),
            repr(service.describe()),
            repr(credential),
            repr(store.load_credentials()),
            repr(service._snapshot),
            caplog.text,
            *(str(message_of(r)) for r in results),
        ]
        secrets = [SALT, SALTED, credential.stored_key, credential.server_key, b"hunter2-password"]
        for secret in secrets:
            for form in (secret, base64.b64encode(secret), secret.hex().encode()):
                for text in texts:
                    assert form.decode("latin-1") not in text
        dump = "\n".join(store._conn.iterdump())
        assert "hunter2" not in dump and SALTED.hex().upper() not in dump.upper()


def test_kafka_error_codes_and_the_wire_message_rule() -> None:
    assert [c.code for c in (DUPLICATE, UNACCEPTABLE, NOT_FOUND, UNSUPPORTED)] == [92, 93, 91, 33]
    assert KafkaErrorCode.UNKNOWN_SERVER_ERROR.wire_message("boom") is None
    assert NOT_FOUND.wire_message(NOT_FOUND.default_message) is None
    assert NOT_FOUND.wire_message("Attempt to delete a user credential that does not exist") is not None


# --- salts ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "accepted"), [(1, False), (15, False), (16, True), (128, True), (129, False)])
def test_salts_must_be_16_to_128_bytes_long(service: CredentialService, length: int, accepted: bool) -> None:
    results = outcome(service.alter(upsertions=[up("alice", salt=b"\x01" * length), up("bob")], actor=ACTOR))
    assert results["bob"] == (NONE, None)  # another user's upsertion is unaffected
    if accepted:
        assert results["alice"] == (NONE, None)
    else:
        assert results["alice"] == (UNACCEPTABLE, f"Salt must be 16 to 128 bytes long; got {length} bytes")
        assert service.lookup("alice", SHA256) is None


def test_a_one_mebibyte_salt_is_refused_and_never_stored(service: CredentialService) -> None:
    # Stored, it would be sent (base64: 1.4 MB) to anyone who names the user in a SCRAM client-first.
    [result] = service.alter(upsertions=[up("alice", salt=b"\x01" * (1 << 20))], actor=ACTOR)
    assert (code_of(result), message_of(result)) == (
        UNACCEPTABLE,
        "Salt must be 16 to 128 bytes long; got 1048576 bytes",
    )
    assert code_of(service.describe(["alice"])[0]) is NOT_FOUND
    short_salts = CredentialService(MemoryCredentialStore(), salt_factory=lambda: b"8 bytes!")
    assert code_of(short_salts.upsert_password("carol", SHA256, "pw", actor=ACTOR)) is UNACCEPTABLE


# --- one default -------------------------------------------------------------------------------------------------


def test_upsert_password_uses_the_one_default_iteration_count(service: CredentialService) -> None:
    assert service.upsert_password("dora", SHA512, "pw", actor=ACTOR).succeeded
    assert mechanisms(service, "dora") == {SHA512: DEFAULT_ITERATIONS}
    assert DEFAULT_ITERATIONS == 8192


# --- lookups from the snapshot: never the store ------------------------------------------------------------------


class LoopGuardedStore:
    """Forwards to a credential store, but refuses (and records) any call made from a thread running an asyncio
    event loop: the SASL server runs on one, and must never wait on the store there."""

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self.called_on_loop: list[str] = []
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                self.calls.append(name)
                return attribute(*args, **kwargs)
            self.called_on_loop.append(name)
            raise AssertionError(f"store.{name} was called on an event loop")

        return call


def test_lookups_and_the_decoy_profile_never_touch_the_store_on_an_event_loop(store: CredentialStore) -> None:
    guarded = LoopGuardedStore(store)
    service = CredentialService(cast(CredentialStore, guarded), salt_factory=lambda: SALT)
    service.alter(upsertions=[up("alice", 1, 8192), up("alice", 2, 5000)], actor=ACTOR)

    async def on_the_loop() -> tuple[object, ...]:
        return (
            service.lookup("alice", SHA256),
            service.lookup_for(SHA512)("alice"),
            service.lookup_for(SHA256)("nobody"),
            service.decoy_profile(SHA256),
        )

    found = asyncio.run(on_the_loop())
    assert guarded.called_on_loop == []
    assert found == (
        credential_from_salted_password(SHA256, SALT, SALTED, 8192),
        credential_from_salted_password(SHA512, SALT, SALTED, 5000),
        None,
        DecoyProfile(iterations=8192, salt_bytes=len(SALT)),
    )


def held_by_another_thread(lock: Any) -> bool:
    if lock.acquire(blocking=False):
        lock.release()
        return False
    return True


def test_a_lookup_does_not_wait_for_a_writer_blocked_on_another_processs_database_lock(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path, busy_timeout=10) as store:
        service = CredentialService(store, salt_factory=lambda: SALT)
        service.alter(upsertions=[up("alice")], actor=ACTOR)
        other_process = sqlite3.connect(path, isolation_level=None)
        other_process.execute("BEGIN IMMEDIATE")  # holds the database's write lock
        writer = threading.Thread(target=service.alter, kwargs={"upsertions": [up("bob")], "actor": ACTOR})
        found: list[object] = []
        reader = threading.Thread(target=lambda: found.append(service.lookup("alice", SHA256)), daemon=True)
        try:
            writer.start()
            deadline = time.monotonic() + 5
            while not held_by_another_thread(store._lock) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert held_by_another_thread(store._lock), "the writer never reached the database lock"
            started = time.monotonic()
            reader.start()
            reader.join(2)
            waited = time.monotonic() - started
            assert found == [credential_from_salted_password(SHA256, SALT, SALTED, 4096)]
            assert waited < 0.5
        finally:
            other_process.execute("ROLLBACK")
            other_process.close()
            writer.join(15)
            reader.join(15)
        assert service.lookup("bob", SHA256) is not None  # the blocked write went through, then reached the snapshot


def counting(store: CredentialStore) -> tuple[CredentialStore, list[str]]:
    guarded = LoopGuardedStore(store)
    return cast(CredentialStore, guarded), guarded.calls


def test_own_writes_update_the_snapshot_without_a_reload_and_foreign_ones_force_one(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as mine, SqliteStore(path) as theirs:
        store, calls = counting(mine)
        service, other = CredentialService(store, salt_factory=lambda: SALT), CredentialService(theirs)
        service.alter(upsertions=[up("alice")], actor=ACTOR)
        service.alter(deletions=[delete("alice")], upsertions=[up("bob", 2)], actor=ACTOR)
        assert calls.count("load_credentials") == 1  # the initial load only
        assert service.poll() is False and service.version == mine.credential_version()
        other.alter(upsertions=[up("carol")], actor=ACTOR)  # another process writes in between ...
        service.alter(upsertions=[up("dave")], actor=ACTOR)  # ... so this process's write cannot be applied as a delta
        assert calls.count("load_credentials") == 2
        users = ("alice", "bob", "carol", "dave")
        assert {u for u in users if service.lookup(u, SHA256) or service.lookup(u, SHA512)} == {"bob", "carol", "dave"}
        failed = service.alter(deletions=[delete("ghost")], actor=ACTOR)  # refused before the store: nothing to apply
        assert outcome(failed) == {"ghost": (NOT_FOUND, "Attempt to delete a user credential that does not exist")}
        assert service.poll() is False and calls.count("load_credentials") == 2


# --- the decoy profile -------------------------------------------------------------------------------------------


def test_the_decoy_profile_follows_the_most_common_stored_shape_per_mechanism(service: CredentialService) -> None:
    assert service.decoy_profile(SHA256) == service.decoy_profile(SHA512) == DEFAULT_DECOY_PROFILE
    confluent_salt = bytes(range(64))  # librdkafka salts with 64 bytes
    service.alter(upsertions=[up(f"c{i}", 1, 4096, salt=confluent_salt) for i in range(3)], actor=ACTOR)
    service.alter(upsertions=[up("k0", 1, 8192), up("k1", 2, 8192)], actor=ACTOR)
    assert service.decoy_profile(SHA256) == DecoyProfile(iterations=4096, salt_bytes=64)
    assert service.decoy_profile(SHA512) == DecoyProfile(iterations=8192, salt_bytes=len(SALT))
    service.alter(deletions=[delete(f"c{i}") for i in range(3)], actor=ACTOR)
    assert service.decoy_profile(SHA256) == DecoyProfile(iterations=8192, salt_bytes=len(SALT))


def test_the_decoy_profile_follows_another_processs_writes_after_a_poll(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as mine, SqliteStore(path) as theirs:
        service, other = CredentialService(mine), CredentialService(theirs, salt_factory=lambda: b"\x02" * 64)
        for user in ("a", "b"):
            assert other.upsert_password(user, SHA512, "pw", 12000, actor=ACTOR).succeeded
        assert service.decoy_profile(SHA512) == DEFAULT_DECOY_PROFILE
        assert service.poll() is True
        assert service.decoy_profile(SHA512) == DecoyProfile(iterations=12000, salt_bytes=64)


def test_polling_is_one_cheap_read_when_nothing_changed(store: CredentialStore) -> None:
    wrapped, calls = counting(store)
    service = CredentialService(wrapped)
    calls.clear()
    for _ in range(3):
        assert service.poll() is False
    assert calls == ["credential_version"] * 3


# --- following changes: who changed, and whether a proved credential is still the stored one ----------------------


def test_listeners_are_told_the_users_each_change_touched_and_is_current_follows_the_snapshot(
    service: CredentialService,
) -> None:
    """What ``server.sessions`` relies on to end sessions (issue 24, finding 5): a new password or a deletion makes
    the credential a session proved stale; adding another mechanism does not."""
    told: list[frozenset[str]] = []
    remove = service.on_change(told.append)
    service.alter(upsertions=[up("alice"), up("bob")], actor=ACTOR)
    alice = service.lookup("alice", SHA256)
    assert alice is not None and told == [frozenset({"alice", "bob"})]
    service.alter(upsertions=[up("alice", 2)], actor=ACTOR)  # a second mechanism for alice
    assert told[-1] == frozenset({"alice"}) and service.is_current("alice", SHA256, alice)
    service.alter(upsertions=[up("alice", salt=b"another-salt-of-16")], actor=ACTOR)  # a new SCRAM-SHA-256 password
    assert told[-1] == frozenset({"alice"}) and not service.is_current("alice", SHA256, alice)
    current = service.lookup("alice", SHA256)
    assert current is not None and service.is_current("alice", SHA256, current)
    service.alter(deletions=[delete("alice")], actor=ACTOR)
    assert told[-1] == frozenset({"alice"}) and not service.is_current("alice", SHA256, current)
    service.alter(deletions=[delete("ghost")], actor=ACTOR)  # refused: nothing changed, nobody told
    assert len(told) == 4
    remove()
    service.alter(deletions=[delete("bob")], actor=ACTOR)
    assert len(told) == 4


def test_a_poll_tells_exactly_the_users_another_process_changed(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as mine, SqliteStore(path) as theirs:
        service, other = CredentialService(mine), CredentialService(theirs)
        other.alter(upsertions=[up("alice"), up("bob"), up("carol", 2)], actor=ACTOR)
        told: list[frozenset[str]] = []
        service.on_change(told.append)
        assert service.poll() is True and told == [frozenset({"alice", "bob", "carol"})]
        other.alter(deletions=[delete("bob")], upsertions=[up("carol", 1)], actor=ACTOR)
        assert service.poll() is True and told[-1] == frozenset({"bob", "carol"})
        assert service.poll() is False and len(told) == 2


def test_a_failing_listener_is_logged_and_neither_the_write_nor_other_listeners_suffer(
    service: CredentialService, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_users: frozenset[str]) -> None:
        raise RuntimeError("listener bug")

    told: list[frozenset[str]] = []
    service.on_change(broken)
    service.on_change(told.append)
    assert service.alter(upsertions=[up("alice")], actor=ACTOR)[0].succeeded
    assert told == [frozenset({"alice"})] and service.lookup("alice", SHA256) is not None
    assert "a listener of SCRAM credential changes failed" in caplog.text

"""CredentialService: KIP-554 alter (SEMANTICS.md §11.3 with §16.5/§16.6), describe (§11.4), the password
convenience, lookup, and secrets that never leak."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaguard.scram import ScramMechanism, credential_from_password, credential_from_salted_password
from kafkaguard.service import (
    CredentialService,
    KafkaErrorCode,
    ScramDeletion,
    ScramUpsertion,
    UserAlterationResult,
)
from kafkaguard.store import CredentialInfo, CredentialStore, MemoryCredentialStore, SqliteStore

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
NONE = KafkaErrorCode.NONE
DUPLICATE = KafkaErrorCode.DUPLICATE_RESOURCE
UNACCEPTABLE = KafkaErrorCode.UNACCEPTABLE_CREDENTIAL
NOT_FOUND = KafkaErrorCode.RESOURCE_NOT_FOUND
UNSUPPORTED = KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM
SALT = b"\x9a\x1fsecret-salt\x00"
SALTED = b"\xfe\xedSALTED-PASSWORD-BYTES-0123456789"


def up(
    user: str, mechanism: int = 1, iterations: int = 4096, salt: bytes = SALT, salted: bytes = SALTED
) -> ScramUpsertion:
    return ScramUpsertion(user=user, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def delete(user: str, mechanism: int = 1) -> ScramDeletion:
    return ScramDeletion(user=user, mechanism=mechanism)


def outcome(results: list[UserAlterationResult]) -> dict[str, tuple[KafkaErrorCode, str | None]]:
    assert len({r.user for r in results}) == len(results), "one result per distinct user"
    return {r.user: (r.error_code, r.error_message) for r in results}


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
    assert outcome(service.alter(upsertions=[up("alice", 1, 8192)])) == {"alice": (NONE, None)}
    assert service.lookup("alice", SHA256) == credential_from_salted_password(SHA256, SALT, SALTED, 8192)
    assert service.lookup("alice", SHA512) is None
    assert service.lookup("bob", SHA256) is None
    assert service.lookup_for(SHA256)("alice") == service.lookup("alice", SHA256)
    assert service.lookup_for(SHA512)("alice") is None


def test_several_mechanisms_for_one_user_in_one_request_are_accepted(service: CredentialService) -> None:
    results = service.alter(upsertions=[up("alice", 1, 4096), up("alice", 2, 8192)])
    assert outcome(results) == {"alice": (NONE, None)}
    assert mechanisms(service, "alice") == {SHA256: 4096, SHA512: 8192}


def test_the_same_mechanism_twice_is_a_duplicate_and_nothing_of_that_user_is_applied(
    service: CredentialService,
) -> None:
    results = service.alter(upsertions=[up("alice", 1), up("alice", 2), up("alice", 1, 5000), up("bob")])
    assert outcome(results) == {
        "alice": (DUPLICATE, "A user credential cannot be altered twice in the same request"),
        "bob": (NONE, None),
    }
    assert service.describe(["alice"])[0].error_code is NOT_FOUND
    assert mechanisms(service, "bob") == {SHA256: 4096}


def test_a_user_both_deleted_and_upserted_is_a_duplicate(service: CredentialService) -> None:
    service.alter(upsertions=[up("alice", 1)])
    results = service.alter(deletions=[delete("alice", 1)], upsertions=[up("alice", 2)])
    assert outcome(results) == {"alice": (DUPLICATE, "A user credential cannot be altered twice in the same request")}
    assert mechanisms(service, "alice") == {SHA256: 4096}
    results = service.alter(deletions=[delete("alice", 1), delete("alice", 1)])
    assert outcome(results)["alice"][0] is DUPLICATE
    assert mechanisms(service, "alice") == {SHA256: 4096}


def test_one_bad_alteration_fails_all_of_that_users_and_no_other_users(service: CredentialService) -> None:
    service.alter(upsertions=[up("carol", 1)])
    results = service.alter(
        deletions=[delete("carol", 1)],
        upsertions=[up("alice", 1), up("alice", 2, iterations=100), up("bob", 2)],
    )
    assert outcome(results) == {
        "carol": (NONE, None),
        "alice": (UNACCEPTABLE, "Too few iterations"),
        "bob": (NONE, None),
    }
    assert service.lookup("alice", SHA256) is None
    assert mechanisms(service, "bob") == {SHA512: 4096}
    assert service.describe(["carol"])[0].error_code is NOT_FOUND  # the last credential gone: no such user


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
            outcome(service.alter(upsertions=[up(f"u{mechanism}", mechanism, iterations)]))[f"u{mechanism}"] == expected
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
    service.alter(upsertions=[up("z")])
    results = service.alter(deletions=[delete("z")], upsertions=[up("b"), up("a"), up("b", 2)])
    assert [r.user for r in results] == ["z", "b", "a"]
    assert service.alter() == []


def test_describe_all_for_none_or_empty_and_per_user_errors(service: CredentialService) -> None:
    service.alter(upsertions=[up("alice", 1), up("alice", 2, 5000), up("bob", 2)])
    everyone = service.describe(None)
    assert everyone == service.describe([])
    assert [(d.user, d.error_code, d.credentials) for d in everyone] == [
        ("alice", NONE, (CredentialInfo(SHA256, 4096), CredentialInfo(SHA512, 5000))),
        ("bob", NONE, (CredentialInfo(SHA512, 4096),)),
    ]
    described = {d.user: d for d in service.describe(["bob", "carol", "alice", "alice", ""])}
    assert described["bob"].credentials == (CredentialInfo(SHA512, 4096),)
    assert (described["carol"].error_code, described["carol"].error_message) == (
        NOT_FOUND,
        "Attempt to describe a user credential that does not exist: carol",
    )
    assert (described["alice"].error_code, described["alice"].error_message) == (
        DUPLICATE,
        "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
    )
    assert described["alice"].credentials == ()
    assert described[""].error_code is NOT_FOUND
    assert set(described) == {"bob", "carol", "alice", ""}


def test_upsert_password_derives_with_a_fresh_salt(service: CredentialService) -> None:
    assert service.upsert_password("alice", SHA512, "pa55word", 8192).succeeded
    assert service.lookup("alice", SHA512) == credential_from_password(SHA512, "pa55word", 8192, salt=SALT)
    assert service.upsert_password("alice", SHA256, "", 4096).error_message == "Password must not be empty"
    assert service.upsert_password("alice", SHA256, "pw", 1).error_message == "Too few iterations"
    assert service.upsert_password("alice", 9, "pw").error_code is UNSUPPORTED
    assert service.upsert_password("", SHA256, "pw").error_code is UNACCEPTABLE
    random_salts = CredentialService(MemoryCredentialStore())
    random_salts.upsert_password("a", SHA256, "pw")
    random_salts.upsert_password("b", SHA256, "pw")
    first, second = random_salts.lookup("a", SHA256), random_salts.lookup("b", SHA256)
    assert first is not None and second is not None and first.salt != second.salt


def test_credentials_persist_and_are_seen_by_another_process_store(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with SqliteStore(path) as writer_store, SqliteStore(path) as reader_store:
        writer, reader = CredentialService(writer_store), CredentialService(reader_store)
        writer.alter(upsertions=[up("alice")])
        assert reader.lookup("alice", SHA256) == writer.lookup("alice", SHA256) is not None
        writer.alter(deletions=[delete("alice")])
        assert reader.lookup("alice", SHA256) is None


def test_secrets_never_appear_in_reprs_results_logs_or_the_database_dump(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with SqliteStore(tmp_path / "k.db") as store:
        service = CredentialService(store, salt_factory=lambda: SALT)
        upsertion = up("alice")
        results = service.alter(upsertions=[upsertion, up("bob", salt=b"")], deletions=[delete("ghost")])
        service.upsert_password("carol", SHA256, "hunter2-password")
        credential = service.lookup("alice", SHA256)
        assert credential is not None
        texts = [
            repr(upsertion),
            str(upsertion),
            repr(results),
            repr(service.describe()),
            repr(credential),
            caplog.text,
            *(str(r.error_message) for r in results),
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

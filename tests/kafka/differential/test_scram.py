"""AlterUserScramCredentials and DescribeUserScramCredentials (v0) as the super user, against Kafka 3.9 and
kafkaguard (SEMANTICS.md §11.3, §11.4; deliberate differences §16.5, §16.6 and semantics.md's salt-length bound)."""

from __future__ import annotations

from typing import Any

from tests.kafka.differential.runner import (
    DUPLICATE_USER_IN_ONE_REQUEST,
    SHA256,
    SHA512,
    Documented,
    Pair,
    alter_scram,
    describe_scram,
    new_user,
    upsertion,
)


def _salt_refused(kafka: Any, guard: Any) -> None:
    assert [r["error_code"] for r in kafka["results"]] == [0], kafka
    assert [r["error_code"] for r in guard["results"]] == [93], guard
    assert "Salt must be 16 to 128 bytes long" in guard["results"][0]["error_message"], guard


def _only_kafka_has_it(kafka: Any, guard: Any) -> None:
    assert [r["error_code"] for r in kafka["results"]] == [0], kafka
    assert [r["error_code"] for r in guard["results"]] == [91], guard


SALT_BOUND = Documented(
    "semantics.md: salt length", "SCRAM salts must be 16 to 128 bytes (Kafka accepts any salt)", _salt_refused
)
SALT_BOUND_STATE = Documented(
    "semantics.md: salt length", "the short-salt credential exists on Kafka only", _only_kafka_has_it
)


def test_alter_and_describe(admin: Pair):
    t = admin.token
    u1, u2, u3 = f"{t}-u1", f"{t}-u2", f"{t}-u3"
    admin.step("upsert SHA-256 at 4096 (the minimum)", alter_scram(upsertions=(upsertion(u1, "p1"),)), settle=True)
    admin.step("describe it", describe_scram(u1))
    admin.step("upsert SHA-512 at 16384 (the maximum)", alter_scram(upsertions=(upsertion(u1, "p1", SHA512, 16384),)),
               settle=True)  # fmt: skip
    admin.step("describe both mechanisms", describe_scram(u1))
    admin.step("iterations 4095", alter_scram(upsertions=(upsertion(u2, "p", SHA256, 4095),)))
    admin.step("iterations 16385", alter_scram(upsertions=(upsertion(u2, "p", SHA512, 16385),)))
    admin.step("iterations 0", alter_scram(upsertions=(upsertion(u2, "p", SHA256, 0),)))
    admin.step("unknown mechanism 3 (upsert)", alter_scram(upsertions=(upsertion(u2, "p", 3),)))
    admin.step("mechanism 0 (upsert)", alter_scram(upsertions=(upsertion(u2, "p", 0),)))
    admin.step("unknown mechanism 3 (delete)", alter_scram(deletions=((u1, 3),)))
    admin.step("empty user name (upsert)", alter_scram(upsertions=(upsertion("", "p"),)))
    admin.step("empty user name (delete)", alter_scram(deletions=(("", SHA256),)))
    admin.step("delete what is missing", alter_scram(deletions=((u2, SHA256),)))
    admin.step("delete a mechanism the user lacks", alter_scram(deletions=((u3, SHA512),)))
    admin.step("the same user and mechanism upserted twice",
               alter_scram(upsertions=(upsertion(u2, "a"), upsertion(u2, "b"))))  # fmt: skip
    admin.step("the same user upserted and deleted", alter_scram(
        deletions=((u1, SHA256),), upsertions=(upsertion(u1, "x", SHA256),)
    ))  # fmt: skip
    admin.step("the same user deleted twice", alter_scram(deletions=((u1, SHA256), (u1, SHA256))))
    admin.step("nothing changed for u1", describe_scram(u1))
    admin.step("two mechanisms for one user in one request", alter_scram(
        upsertions=(upsertion(u3, "p3", SHA256), upsertion(u3, "p3", SHA512))
    ), DUPLICATE_USER_IN_ONE_REQUEST, settle=True)  # fmt: skip
    admin.step("u3 after it (§16.6: only kafkaguard stored both)", describe_scram(u3), Documented(
        "§16.6", "kafkaguard stored both mechanisms of the previous request, Kafka none",
        _only_guard_has_it,
    ))  # fmt: skip
    only_guard = Documented("§16.6", "the credential only kafkaguard stored", _only_guard_has_it)
    admin.step("drop u3's SHA-256 (kafkaguard only)", alter_scram(deletions=((u3, SHA256),)), only_guard)
    admin.step("drop u3's SHA-512 (kafkaguard only)", alter_scram(deletions=((u3, SHA512),)), only_guard, settle=True)
    admin.step("one good and one bad user in one request", alter_scram(
        upsertions=(upsertion(u2, "p2"), upsertion(u3, "p", SHA256, 100))
    ), settle=True)  # fmt: skip
    admin.step("describe all users (null)", describe_scram(all_users=True), mine=True)
    admin.step("describe all users (empty list)", describe_scram(), mine=True)
    admin.step("describe a user twice", describe_scram(u1, u1))
    admin.step("describe unknown and known users", describe_scram(u2, f"{t}-nobody", u1))
    admin.step("describe the empty name", describe_scram(""))
    admin.step("delete u1's SHA-256", alter_scram(deletions=((u1, SHA256),)), settle=True)
    admin.step("delete u1's SHA-512 and u2's SHA-256", alter_scram(deletions=((u1, SHA512), (u2, SHA256))),
               settle=True)  # fmt: skip
    admin.step("describe them after deletion", describe_scram(u1, u2))
    short = f"{t}-short"
    admin.step("a 8-byte salt", alter_scram(upsertions=(upsertion(short, "p", salt=b"12345678"),)), SALT_BOUND)
    admin.step("remove the short-salt user", alter_scram(deletions=((short, SHA256),)), SALT_BOUND_STATE, settle=True)
    new_user(admin, f"{t}-both", "secret")
    admin.step("the new user", describe_scram(f"{t}-both"))
    for mechanism in (SHA256, SHA512):
        admin.step(
            f"remove the new user ({mechanism})", alter_scram(deletions=((f"{t}-both", mechanism),)), settle=True
        )


def _assert_codes(answer: Any, codes: list[int]) -> None:
    assert [r["error_code"] for r in answer["results"]] == codes, answer


def _only_guard_has_it(kafka: Any, guard: Any) -> None:
    _assert_codes(kafka, [91])
    _assert_codes(guard, [0])

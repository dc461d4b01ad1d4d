"""The documented contracts of ``AclStore``, ``CredentialStore`` and ``QuotaStore``, checked on both implementations."""

from __future__ import annotations

import random

from kafkaguard import AclOperation, AclPermissionType, PatternType, ResourceType, StoredAcl
from kafkaguard.model import AclBindingFilter
from kafkaguard.scram import ScramCredential, ScramMechanism, credential_from_salted_password
from kafkaguard.store import (
    AclStore,
    CredentialInfo,
    CredentialSnapshot,
    CredentialStore,
    QuotaChange,
    QuotaRecord,
    QuotaSnapshot,
    QuotaStore,
    UserAlteration,
)
from kafkaguard.store.ports import GroupStore, MembershipChange, MembershipSnapshot
from tests.store.helpers import acl, acl_filter

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def _state(acls: tuple[StoredAcl, ...] | list[StoredAcl]) -> dict[str, object]:
    return {a.id: a.binding for a in acls}


def test_both_implementations_satisfy_the_protocols(acl_store: AclStore, credential_store: CredentialStore) -> None:
    assert isinstance(acl_store, AclStore)
    assert isinstance(credential_store, CredentialStore)


def test_identical_acl_is_stored_once_under_one_stable_id(acl_store: AclStore) -> None:
    a, b = acl("orders"), acl("payments")
    first = acl_store.create_acls([a, b, a])
    assert first.acls[0].id == first.acls[2].id != first.acls[1].id
    assert len(first.delta.added) == 2
    again = acl_store.create_acls([a])
    assert again.acls[0].id == first.acls[0].id
    assert again.delta.is_empty
    assert again.delta.version == first.delta.version
    snapshot = acl_store.load_acls()
    assert _state(snapshot.acls) == {first.acls[0].id: a, first.acls[1].id: b}
    assert snapshot.version == acl_store.acl_version() == 2


def test_delete_lists_each_match_under_every_filter_and_removes_it_once(acl_store: AclStore) -> None:
    created = acl_store.create_acls([acl("orders"), acl("orders", "User:bob"), acl("payments")]).acls
    deletion = acl_store.delete_acls(
        [acl_filter("orders", PatternType.LITERAL), acl_filter(principal="User:alice"), acl_filter("nothing")]
    )
    assert {a.id for a in deletion.matched[0]} == {created[0].id, created[1].id}
    assert {a.id for a in deletion.matched[1]} == {created[0].id, created[2].id}
    assert deletion.matched[2] == ()
    assert sorted(deletion.delta.removed) == sorted(a.id for a in created)
    assert deletion.delta.version == 6  # 3 additions, 3 removals: each ACL removed once
    assert acl_store.load_acls().acls == ()


def test_find_acls_agrees_with_the_models_filter_semantics(acl_store: AclStore) -> None:
    rng = random.Random(7)
    names = ["*", "o", "or", "orders", "orders-eu", "pay", "payments", "kafka-cluster"]
    principals = ["User:alice", "User:bob", "User:*"]
    bindings = {
        acl(
            rng.choice(names),
            rng.choice(principals),
            rng.choice([AclOperation.READ, AclOperation.WRITE, AclOperation.ALL]),
            resource_type=rng.choice([ResourceType.TOPIC, ResourceType.GROUP]),
            pattern_type=rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
            host=rng.choice(["*", "10.0.0.1"]),
            permission=rng.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
        )
        for _ in range(150)
    }
    acl_store.create_acls(list(bindings))
    stored = acl_store.load_acls().acls
    filters = [AclBindingFilter.ANY] + [
        acl_filter(
            rng.choice([None, *names, "orders-eu-1", "p"]),
            rng.choice(list(PatternType)[1:]),
            resource_type=rng.choice([ResourceType.ANY, ResourceType.TOPIC, ResourceType.GROUP]),
            principal=rng.choice([None, *principals]),
            host=rng.choice([None, "*", "10.0.0.1"]),
            operation=rng.choice([AclOperation.ANY, AclOperation.READ, AclOperation.ALL]),
            permission=rng.choice(list(AclPermissionType)[1:]),
        )
        for _ in range(300)
    ]
    for f in filters:
        expected = {a.id for a in stored if f.matches(a.binding)}
        assert {a.id for a in acl_store.find_acls(f)} == expected, f


def test_match_filter_finds_literal_wildcard_and_every_applicable_prefix(acl_store: AclStore) -> None:
    applicable = [
        acl("orders"),
        acl("*"),
        acl("o", pattern_type=PatternType.PREFIXED),
        acl("orders", pattern_type=PatternType.PREFIXED),
    ]
    other = [
        acl("orders-eu"),
        acl("ordersx", pattern_type=PatternType.PREFIXED),
        acl("*", pattern_type=PatternType.PREFIXED),
    ]
    acl_store.create_acls(applicable + other)
    found = acl_store.find_acls(acl_filter("orders", PatternType.MATCH, resource_type=ResourceType.TOPIC))
    assert {a.binding for a in found} == set(applicable)


def test_changes_since_is_the_net_delta(acl_store: AclStore) -> None:
    start = acl_store.create_acls([acl("a"), acl("b")])
    v1 = start.delta.version
    acl_store.create_acls([acl("c")])
    acl_store.delete_acls([acl_filter("c"), acl_filter("a")])  # c added and removed inside the window
    acl_store.create_acls([acl("d")])
    delta = acl_store.changes_since(v1)
    assert delta is not None
    assert delta.base_version == v1 and delta.version == acl_store.acl_version() == 6
    assert [a.binding for a in delta.added] == [acl("d")]
    assert list(delta.removed) == [start.acls[0].id]
    full = acl_store.changes_since(0)
    assert full is not None
    assert _state(full.added) == _state(acl_store.load_acls().acls)
    assert full.removed == ()
    assert acl_store.changes_since(acl_store.acl_version()) == type(delta)(6, 6)
    assert acl_store.changes_since(7) is None  # from the future: reload


def test_import_merges_or_replaces_in_one_delta(acl_store: AclStore) -> None:
    kept = acl_store.create_acls([acl("a"), acl("b")]).acls
    merged = acl_store.import_acls([acl("b"), acl("c")], replace=False)
    assert [a.binding for a in merged.added] == [acl("c")] and merged.removed == ()
    replaced = acl_store.import_acls([acl("b"), acl("d"), acl("d")], replace=True)
    assert [a.binding for a in replaced.added] == [acl("d")]
    assert sorted(replaced.removed) == sorted([kept[0].id, merged.added[0].id])
    assert {a.binding for a in acl_store.load_acls().acls} == {acl("b"), acl("d")}
    assert next(a.id for a in acl_store.load_acls().acls if a.binding == acl("b")) == kept[1].id


def test_a_merging_import_of_many_names_keeps_what_is_stored_under_each(acl_store: AclStore) -> None:
    # More names than SQLite binds in one statement; stored ACLs that share a name with an imported one but differ
    # in another field are neither kept for it nor removed.
    stored = acl_store.create_acls([acl("t0007"), acl("t1500", "User:bob")]).acls
    wanted = [acl(f"t{i:04}") for i in range(2000)]
    merged = acl_store.import_acls(wanted, replace=False)
    assert len(merged.added) == 1999 and merged.removed == ()
    assert acl("t0007") not in {a.binding for a in merged.added}
    assert {a.id for a in stored} <= {a.id for a in acl_store.load_acls().acls}
    assert len(acl_store.load_acls().acls) == 2001


def test_a_match_filter_on_a_name_longer_than_a_statement_binds(acl_store: AclStore) -> None:
    name = "n" * 2000
    applicable = [acl(name), acl("n" * 1500, pattern_type=PatternType.PREFIXED)]
    acl_store.create_acls([*applicable, acl("n" * 2001), acl("m", pattern_type=PatternType.PREFIXED)])
    found = acl_store.find_acls(acl_filter(name, PatternType.MATCH))
    assert {a.binding for a in found} == set(applicable)


def test_credential_infos_for_more_users_than_a_statement_binds(credential_store: CredentialStore) -> None:
    users = [f"u{i:04}" for i in range(2000)]
    credential_store.alter_credentials([UserAlteration(u, upsertions=(_credential(),)) for u in users])
    infos = credential_store.credential_infos([*reversed(users), "nobody"])
    assert infos == dict.fromkeys(users, (CredentialInfo(SHA256, 4096),))


def _credential(mechanism: ScramMechanism = SHA256, iterations: int = 4096, seed: bytes = b"x") -> ScramCredential:
    return credential_from_salted_password(mechanism, b"salt" + seed, seed * mechanism.digest_size, iterations)


def test_credentials_upsert_replace_delete_and_describe(credential_store: CredentialStore) -> None:
    assert credential_store.get_credential("alice", SHA256) is None
    first = _credential(SHA256, 4096, b"1")
    write = credential_store.alter_credentials(
        [
            UserAlteration("alice", upsertions=(first, _credential(SHA512, 8192))),
            UserAlteration("bob", upsertions=(_credential(),)),
        ]
    )
    assert dict(write.missing) == {}
    assert credential_store.get_credential("alice", SHA256) == first
    replacement = _credential(SHA256, 5000, b"2")
    credential_store.alter_credentials([UserAlteration("alice", upsertions=(replacement,))])
    assert credential_store.get_credential("alice", SHA256) == replacement
    assert credential_store.credential_infos() == {
        "alice": (CredentialInfo(SHA256, 5000), CredentialInfo(SHA512, 8192)),
        "bob": (CredentialInfo(SHA256, 4096),),
    }
    assert credential_store.credential_infos(["bob", "carol"]) == {"bob": (CredentialInfo(SHA256, 4096),)}
    credential_store.alter_credentials([UserAlteration("bob", deletions=(SHA256,))])
    assert credential_store.credential_infos(["bob"]) == {}


def test_a_missing_deletion_leaves_that_user_unchanged_and_others_applied(credential_store: CredentialStore) -> None:
    credential_store.alter_credentials([UserAlteration("alice", upsertions=(_credential(SHA256),))])
    write = credential_store.alter_credentials(
        [
            UserAlteration("alice", deletions=(SHA256, SHA512)),
            UserAlteration("bob", upsertions=(_credential(SHA512),)),
        ]
    )
    assert dict(write.missing) == {"alice": SHA512}
    assert credential_store.get_credential("alice", SHA256) is not None
    assert credential_store.get_credential("bob", SHA512) is not None


def test_every_credential_write_moves_the_credential_version_and_load_reads_them_all(
    credential_store: CredentialStore,
) -> None:
    assert (
        credential_store.load_credentials() == CredentialSnapshot((), 0) and credential_store.credential_version() == 0
    )
    alice, bob = _credential(SHA256, 4096, b"1"), _credential(SHA512, 8192, b"2")
    first = credential_store.alter_credentials(
        [UserAlteration("alice", upsertions=(alice,)), UserAlteration("bob", upsertions=(bob,))]
    )
    assert first.base_version == 0 < first.version == credential_store.credential_version()
    loaded = credential_store.load_credentials()
    assert (sorted(loaded.credentials, key=lambda pair: pair[0]), loaded.version) == (
        [("alice", alice), ("bob", bob)],
        first.version,
    )
    refused = credential_store.alter_credentials([UserAlteration("carol", deletions=(SHA256,))])
    assert (refused.base_version, refused.version, dict(refused.missing)) == (
        first.version,
        first.version,
        {"carol": SHA256},
    )
    deleted = credential_store.alter_credentials([UserAlteration("bob", deletions=(SHA512,))])
    assert deleted.base_version == first.version < deleted.version == credential_store.credential_version()
    assert credential_store.load_credentials().credentials == (("alice", alice),)
    text = repr(credential_store.load_credentials())
    assert all(secret.hex() not in text and repr(secret) not in text for secret in (alice.salt, alice.stored_key))


ALICE = (("user", "alice"),)
DEFAULT_USER = (("user", None),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))


def test_quota_store_satisfies_its_protocol(quota_store: QuotaStore) -> None:
    assert isinstance(quota_store, QuotaStore)
    assert quota_store.load_quotas() == QuotaSnapshot((), 0) and quota_store.quota_version() == 0


def test_quotas_set_replace_remove_and_load_sorted_with_the_default_first(quota_store: QuotaStore) -> None:
    first = quota_store.alter_quotas(
        [
            QuotaChange(ALICE, "producer_byte_rate", 1024.0),
            QuotaChange(ALICE, "consumer_byte_rate", 2048.0),
            QuotaChange(ALICE_APP, "request_percentage", 12.5),
            QuotaChange(DEFAULT_USER, "controller_mutation_rate", 0.5),
        ]
    )
    assert (first.base_version, first.version) == (0, 4) and quota_store.quota_version() == 4
    assert quota_store.load_quotas() == QuotaSnapshot(
        (
            QuotaRecord(ALICE_APP, {"request_percentage": 12.5}),
            QuotaRecord(DEFAULT_USER, {"controller_mutation_rate": 0.5}),
            QuotaRecord(ALICE, {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0}),
        ),
        4,
    )
    second = quota_store.alter_quotas(
        [
            QuotaChange(ALICE, "producer_byte_rate", 10.0),
            QuotaChange(ALICE, "consumer_byte_rate", None),
            QuotaChange(ALICE_APP, "request_percentage", None),
            QuotaChange(ALICE_APP, "never_stored", None),  # no change, no version step
        ]
    )
    assert (second.base_version, second.version) == (4, 7)
    assert quota_store.load_quotas().quotas == (
        QuotaRecord(DEFAULT_USER, {"controller_mutation_rate": 0.5}),
        QuotaRecord(ALICE, {"producer_byte_rate": 10.0}),
    )


def test_quota_values_keep_every_double_including_nan_and_infinity(quota_store: QuotaStore) -> None:
    values = {"a": float("nan"), "b": float("inf"), "c": 0.1 + 0.2, "d": 9.223372036854776e18}
    quota_store.alter_quotas([QuotaChange(ALICE, key, value) for key, value in values.items()])
    (record,) = quota_store.load_quotas().quotas
    assert [repr(v) for v in record.values.values()] == [repr(v) for v in values.values()]


# ------------------------------------------------------------------------------------------- principal groups


def test_group_store_satisfies_its_protocol(group_store: GroupStore) -> None:
    assert isinstance(group_store, GroupStore)
    assert group_store.load_memberships() == MembershipSnapshot({}, 0) and group_store.membership_version() == 0


def test_memberships_added_removed_and_loaded_sorted_each_moving_the_version(group_store: GroupStore) -> None:
    first = group_store.alter_memberships(
        [
            MembershipChange("ops", "User:bob", member=True),
            MembershipChange("ops", "User:alice", member=True),
            MembershipChange("audit", "User:alice", member=True),
            MembershipChange("ops", "User:alice", member=True),  # already a member: no change
            MembershipChange("audit", "User:carol", member=False),  # not a member: no change
        ]
    )
    assert (first.base_version, first.version) == (0, 3) and group_store.membership_version() == 3
    snapshot = group_store.load_memberships()
    assert snapshot == MembershipSnapshot({"audit": ("User:alice",), "ops": ("User:alice", "User:bob")}, 3)
    assert list(snapshot.groups) == ["audit", "ops"]
    assert snapshot.groups_by_principal() == {"User:alice": ("Group:audit", "Group:ops"), "User:bob": ("Group:ops",)}
    second = group_store.alter_memberships(
        [MembershipChange("audit", "User:alice", member=False), MembershipChange("ops", "User:bob", member=False)]
    )
    assert (second.base_version, second.version) == (3, 5)
    # A group without members is gone.
    assert group_store.load_memberships() == MembershipSnapshot({"ops": ("User:alice",)}, 5)


def test_group_and_principal_names_are_kept_exactly(group_store: GroupStore) -> None:
    names = [("ops", "User:Alice"), ("ops", "User:alice"), ("Ops", "User:al:ice"), ("δ-team", "User:ünï")]
    group_store.alter_memberships([MembershipChange(g, p, member=True) for g, p in names])
    loaded = group_store.load_memberships().groups
    assert sorted((g, p) for g, members in loaded.items() for p in members) == sorted(names)

"""ACL bindings, binding filters and creation-time validation (SEMANTICS.md §2, §6, §8.2, §16.2, §16.3)."""

from __future__ import annotations

import pytest

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
    StoredAcl,
    validate_new_binding,
)

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
READ = AclOperation.READ
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def binding(
    resource_type: ResourceType = TOPIC,
    name: str = "orders",
    pattern_type: PatternType = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    op: AclOperation = READ,
    perm: AclPermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type), AccessControlEntry(principal, host, op, perm))


def test_binding_identity_is_all_seven_fields():
    base = binding()
    assert base == binding()
    variants = [
        binding(resource_type=ResourceType.GROUP),
        binding(name="Orders"),
        binding(pattern_type=PREFIXED),
        binding(principal="User:bob"),
        binding(host="10.0.0.1"),
        binding(op=AclOperation.WRITE),
        binding(perm=DENY),
    ]
    assert all(v != base for v in variants)
    assert len({base, *variants, binding()}) == 8


def test_binding_str():
    assert str(binding()) == (
        "(pattern=Topic:LITERAL:orders, entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))"
    )


def test_binding_to_filter_matches_exactly_itself():
    f = binding().to_filter()
    assert f.matches(binding())
    assert not f.matches(binding(perm=DENY))
    assert not f.matches(binding(name="*"))
    assert f.find_indefinite_field() is None
    assert f.matches_at_most_one()


@pytest.mark.parametrize(
    "made",
    [
        binding(resource_type=ResourceType.from_code(99)),
        binding(pattern_type=PatternType.UNKNOWN),
        binding(op=AclOperation.from_code(77)),
        binding(perm=AclPermissionType.UNKNOWN),
    ],
)
def test_binding_is_unknown_when_any_code_is_unknown(made):
    assert made.is_unknown
    assert not binding().is_unknown


def test_binding_filter_needs_both_parts_to_match():
    pattern_part = ResourcePatternFilter(TOPIC, "orders", LITERAL)
    entry_part = AccessControlEntryFilter("User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
    f = AclBindingFilter(pattern_part, entry_part)
    assert f.matches(binding())
    assert not f.matches(binding(principal="User:bob"))
    assert not f.matches(binding(name="payments"))


def test_any_binding_filter_matches_everything():
    assert AclBindingFilter(ResourcePatternFilter.ANY, AccessControlEntryFilter.ANY) == AclBindingFilter.ANY
    for b in (binding(), binding(name="*", principal="User:*", perm=DENY), binding(CLUSTER, "kafka-cluster")):
        assert AclBindingFilter.ANY.matches(b)


def test_binding_filter_indefinite_field_reports_pattern_part_first():
    f = AclBindingFilter(
        ResourcePatternFilter(TOPIC, None, LITERAL),
        AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
    )
    assert f.find_indefinite_field() == "Resource name is NULL."
    f2 = AclBindingFilter(
        ResourcePatternFilter(TOPIC, "x", LITERAL),
        AccessControlEntryFilter("User:a", None, READ, ALLOW),
    )
    assert f2.find_indefinite_field() == "Host is NULL"
    assert not f2.matches_at_most_one()


def test_binding_filter_is_unknown_from_either_part():
    unknown_pattern = AclBindingFilter(
        ResourcePatternFilter(ResourceType.UNKNOWN, None, LITERAL), AccessControlEntryFilter.ANY
    )
    unknown_entry = AclBindingFilter(
        ResourcePatternFilter.ANY,
        AccessControlEntryFilter(None, None, AclOperation.UNKNOWN, AclPermissionType.ANY),
    )
    assert unknown_pattern.is_unknown
    assert unknown_entry.is_unknown
    assert not AclBindingFilter.ANY.is_unknown


def test_stored_acl_keeps_identity_beside_the_binding():
    a = StoredAcl(AclId("id-1"), binding())
    b = StoredAcl(AclId("id-2"), binding())
    assert a.binding == b.binding
    assert a != b


# ---- validate_new_binding (§8.2 order, §16.2, §16.3)


def test_valid_binding_has_no_reason():
    assert validate_new_binding(binding()) is None
    assert validate_new_binding(binding(CLUSTER, "kafka-cluster")) is None
    # CLUSTER + PREFIXED kafka-cluster is accepted (§8.4); PREFIXED "*" is an ordinary prefix and accepted.
    assert validate_new_binding(binding(CLUSTER, "kafka-cluster", PREFIXED)) is None
    assert validate_new_binding(binding(name="*", pattern_type=PREFIXED)) is None
    # Host syntax is not validated (§8.4).
    assert validate_new_binding(binding(host="")) is None
    assert validate_new_binding(binding(host="not-an-ip")) is None


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        (binding(resource_type=ResourceType.UNKNOWN), "Unknown resource type code 0"),
        (binding(pattern_type=PatternType.UNKNOWN), "Unknown pattern type code 0"),
        (binding(op=AclOperation.UNKNOWN), "Unknown operation code 0"),
        (binding(perm=AclPermissionType.UNKNOWN), "Unknown permission type code 0"),
    ],
)
def test_the_code_0_is_named_with_its_field_and_code(made, reason):
    # §16.3: a per-binding error naming the field and the code, where Kafka closes the connection.
    message = validate_new_binding(made)
    assert message is not None
    assert message.startswith(reason)


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        (binding(resource_type=ResourceType.from_code(99)), "Invalid resourceType UNKNOWN"),
        (binding(pattern_type=PatternType.from_code(5)), "Invalid patternType UNKNOWN"),
        (binding(op=AclOperation.from_code(16)), "Invalid operation UNKNOWN"),
        (binding(perm=AclPermissionType.from_code(4)), "Invalid permissionType UNKNOWN"),
        # the first, in Kafka's controller's order
        (binding(pattern_type=PatternType.from_code(5), op=AclOperation.from_code(16)), "Invalid patternType UNKNOWN"),
    ],
)
def test_unrecognised_codes_are_refused_in_kafkas_words(made, reason):
    # Kafka 3.9's answer to a newer client's code (measured, tests/kafka/differential): the code itself is not named.
    assert validate_new_binding(made) == reason


def test_unrecognised_codes_come_after_the_name_checks_and_before_the_principal():
    unrecognised = AclOperation.from_code(16)
    assert validate_new_binding(binding(CLUSTER, "other", op=unrecognised)) == (
        "The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert validate_new_binding(binding(name="", op=unrecognised)) == "Invalid empty resource name"
    assert validate_new_binding(binding(op=unrecognised, principal="bad")) == "Invalid operation UNKNOWN"


def test_the_code_0_comes_before_an_unrecognised_code():
    made = binding(resource_type=ResourceType.from_code(99), op=AclOperation.UNKNOWN)
    assert validate_new_binding(made) == "Unknown operation code 0: this server does not support it"


def test_cluster_name_must_be_kafka_cluster():
    assert validate_new_binding(binding(CLUSTER, "other")) == (
        "The only valid name for the CLUSTER resource is kafka-cluster"
    )
    # The CLUSTER check comes before the empty-name check.
    assert validate_new_binding(binding(CLUSTER, "")) == "The only valid name for the CLUSTER resource is kafka-cluster"


def test_empty_resource_name_is_invalid():
    assert validate_new_binding(binding(name="")) == "Invalid empty resource name"
    assert validate_new_binding(binding(name="", pattern_type=PREFIXED)) == "Invalid empty resource name"


@pytest.mark.parametrize("principal", ["alice", "", ":alice", ":"])
def test_principal_must_be_type_colon_name(principal):
    # §16.2: as Kafka after KAFKA-18051, a principal without a colon or with an empty type is refused by name.
    reason = validate_new_binding(binding(principal=principal))
    assert reason is not None
    assert repr(principal) in reason


@pytest.mark.parametrize("principal", ["User:alice", "User:*", "Group:*", "User:", "User:a:b", "Custom:x"])
def test_principal_forms_that_are_accepted(principal):
    assert validate_new_binding(binding(principal=principal)) is None


def test_unknown_code_reported_before_other_problems():
    made = binding(resource_type=ResourceType.UNKNOWN, name="", principal="bad")
    reason = validate_new_binding(made)
    assert reason is not None
    assert reason.startswith("Unknown resource type code 0")


def test_empty_name_reported_before_bad_principal():
    assert validate_new_binding(binding(name="", principal="bad")) == "Invalid empty resource name"

"""Kafka's four ACL enumerations and their wire codes (SEMANTICS.md §1, Kafka's AclOperationTest and friends)."""

from __future__ import annotations

import pytest

from kafkaguard import (
    AclOperation,
    AclPermissionType,
    InvalidCodeError,
    InvalidNameError,
    KafkaguardError,
    PatternType,
    ResourceType,
)
from kafkaguard.model import KafkaEnum

RESOURCE_TYPE_CODES = {
    "UNKNOWN": 0,
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "DELEGATION_TOKEN": 6,
    "USER": 7,
}
PATTERN_TYPE_CODES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATION_CODES = {
    "UNKNOWN": 0,
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
    "AUTO_CREATE": 15,
}
PERMISSION_CODES = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}

ENUMS: list[tuple[type[KafkaEnum], dict[str, int]]] = [
    (ResourceType, RESOURCE_TYPE_CODES),
    (PatternType, PATTERN_TYPE_CODES),
    (AclOperation, OPERATION_CODES),
    (AclPermissionType, PERMISSION_CODES),
]


@pytest.mark.parametrize(("cls", "codes"), ENUMS, ids=lambda v: getattr(v, "__name__", ""))
def test_code_table_is_kafkas(cls, codes):
    assert {m.name: m.code for m in cls} == codes


@pytest.mark.parametrize(("cls", "codes"), ENUMS, ids=lambda v: getattr(v, "__name__", ""))
def test_from_code_roundtrips_every_known_code(cls, codes):
    for name, code in codes.items():
        member = cls.from_code(code)
        assert member.name == name
        assert member.code == code
        assert member is cls[name]


def test_code_13_is_create_tokens_not_auto_create():
    # KIP-755's AUTO_CREATE=13 was never merged; 13 became CREATE_TOKENS (KIP-373), §1.3 and §15.10.
    assert AclOperation.from_code(13) is AclOperation.CREATE_TOKENS
    assert AclOperation.from_code(14) is AclOperation.DESCRIBE_TOKENS
    # kafkaguard's AUTO_CREATE takes the next free code (§16.1).
    assert AclOperation.AUTO_CREATE.code == 15
    assert AclOperation.from_code(15) is AclOperation.AUTO_CREATE


def test_at_most_30_operations_fit_the_authorized_operations_bitfield():
    assert max(op.code for op in AclOperation) < 31


@pytest.mark.parametrize("cls", [ResourceType, PatternType, AclOperation, AclPermissionType])
@pytest.mark.parametrize("code", [42, 127, -1, -128, 99])
def test_unknown_code_becomes_unknown_member_keeping_its_code(cls, code):
    member = cls.from_code(code)
    assert member.is_unknown
    assert member.name == "UNKNOWN"
    assert member.code == code
    assert str(member) == "UNKNOWN"
    assert repr(member) == f"{cls.__name__}.UNKNOWN({code})"
    assert member is not cls.UNKNOWN
    assert member != cls.UNKNOWN
    # Cached: decoding the same code twice gives the same member.
    assert cls.from_code(code) is member


def test_unknown_pseudo_members_are_not_listed():
    AclOperation.from_code(77)
    assert len(AclOperation) == len(OPERATION_CODES)
    assert all(m.code != 77 for m in AclOperation)


def test_code_zero_is_the_canonical_unknown():
    assert ResourceType.from_code(0) is ResourceType.UNKNOWN
    assert ResourceType.UNKNOWN.is_unknown
    assert not ResourceType.TOPIC.is_unknown


@pytest.mark.parametrize("code", [128, -129, 1000])
def test_code_outside_int8_is_an_error(code):
    with pytest.raises(InvalidCodeError, match=r"not an int8") as info:
        AclOperation.from_code(code)
    assert isinstance(info.value, KafkaguardError)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("cls", "text", "expected"),
    [
        (ResourceType, "TOPIC", ResourceType.TOPIC),
        (ResourceType, "topic", ResourceType.TOPIC),
        (ResourceType, "Topic", ResourceType.TOPIC),
        (ResourceType, "TRANSACTIONAL_ID", ResourceType.TRANSACTIONAL_ID),
        (ResourceType, "TransactionalId", ResourceType.TRANSACTIONAL_ID),
        (ResourceType, "transactional-id", ResourceType.TRANSACTIONAL_ID),
        (ResourceType, "DelegationToken", ResourceType.DELEGATION_TOKEN),
        (AclOperation, "DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
        (AclOperation, "describe_configs", AclOperation.DESCRIBE_CONFIGS),
        (AclOperation, "IdempotentWrite", AclOperation.IDEMPOTENT_WRITE),
        (AclOperation, "CreateTokens", AclOperation.CREATE_TOKENS),
        (AclOperation, "AUTO_CREATE", AclOperation.AUTO_CREATE),
        (AclOperation, "All", AclOperation.ALL),
        (AclPermissionType, "Allow", AclPermissionType.ALLOW),
        (AclPermissionType, "deny", AclPermissionType.DENY),
        (PatternType, "PREFIXED", PatternType.PREFIXED),
        (PatternType, "Literal", PatternType.LITERAL),
        (PatternType, "MATCH", PatternType.MATCH),
        (AclOperation, "UNKNOWN", AclOperation.UNKNOWN),
    ],
)
def test_from_string_accepts_kafka_and_pascal_case_names(cls, text, expected):
    assert cls.from_string(text) is expected


@pytest.mark.parametrize(("cls", "text"), [(AclOperation, "AUTOCREATES"), (ResourceType, "topics"), (PatternType, "")])
def test_from_string_rejects_unknown_names_listing_the_valid_ones(cls, text):
    with pytest.raises(InvalidNameError) as info:
        cls.from_string(text)
    message = str(info.value)
    assert repr(text) in message
    # Every real member is offered, UNKNOWN is not.
    for member in cls:
        if member.name != "UNKNOWN":
            assert member.name in message
    assert "UNKNOWN" not in message.split("expected one of", 1)[1]


def test_pascal_name_is_kafkas_printed_form():
    assert ResourceType.TRANSACTIONAL_ID.pascal_name == "TransactionalId"
    assert ResourceType.TOPIC.pascal_name == "Topic"
    assert AclOperation.DESCRIBE_CONFIGS.pascal_name == "DescribeConfigs"
    assert AclPermissionType.ALLOW.pascal_name == "Allow"


def test_str_and_repr():
    assert str(AclOperation.READ) == "READ"
    assert repr(AclOperation.READ) == "AclOperation.READ"
    assert f"{PatternType.PREFIXED}" == "PREFIXED"


def test_is_specific_only_for_literal_and_prefixed():
    assert {p for p in PatternType if p.is_specific} == {PatternType.LITERAL, PatternType.PREFIXED}
    assert not PatternType.from_code(9).is_specific


def test_resource_type_filter_only_is_any():
    assert [t for t in ResourceType if t.is_filter_only] == [ResourceType.ANY]


def test_from_code_refuses_booleans_and_non_integers():
    for bad in (True, False, 1.0, "3"):
        with pytest.raises(InvalidCodeError):
            AclOperation.from_code(bad)  # type: ignore[arg-type]

"""The ACL JSON document format (model/acl_json.py)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclId,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)
from kafkaguard.model.acl_json import (
    FIELDS,
    AclJsonError,
    AclJsonProblem,
    acls_from_document,
    acls_to_document,
    binding_from_dict,
    binding_to_dict,
)
from tests.strategies import bindings

BINDING = AclBinding(
    ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED),
    AccessControlEntry("User:alice", "10.0.0.1", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY),
)
ROW = {
    "principal": "User:alice",
    "host": "10.0.0.1",
    "resource_type": "TRANSACTIONAL_ID",
    "resource_name": "tx-",
    "pattern_type": "PREFIXED",
    "operation": "DESCRIBE_CONFIGS",
    "permission_type": "DENY",
}


def test_binding_to_dict_uses_kafka_upper_case_names():
    assert binding_to_dict(BINDING) == ROW
    assert binding_to_dict(BINDING, "id-7") == {"id": "id-7", **ROW}
    assert next(iter(binding_to_dict(BINDING, "id-7"))) == "id"


def test_document_of_bindings_and_stored_acls():
    doc = acls_to_document([BINDING, StoredAcl(AclId("x"), BINDING)])
    assert doc == {"acls": [ROW, {"id": "x", **ROW}]}
    assert json.loads(json.dumps(doc)) == doc


def test_binding_from_dict_roundtrip():
    assert binding_from_dict(ROW) == BINDING


def test_binding_from_dict_accepts_pascal_case_and_ignores_id():
    row = {
        **ROW,
        "resource_type": "TransactionalId",
        "operation": "DescribeConfigs",
        "permission_type": "Deny",
        "pattern_type": "Prefixed",
        "id": "ignored",
    }
    assert binding_from_dict(row) == BINDING


@given(bindings)
@settings(max_examples=100)
def test_roundtrip_through_json_text(binding):
    text = json.dumps(acls_to_document([binding]))
    assert acls_from_document(json.loads(text)) == [binding]


def test_missing_fields_are_all_listed():
    with pytest.raises(InvalidAclError, match="missing field\\(s\\): host, operation"):
        binding_from_dict({k: v for k, v in ROW.items() if k not in ("host", "operation")})


def test_unknown_fields_are_refused():
    with pytest.raises(InvalidAclError, match="unknown field\\(s\\): colour"):
        binding_from_dict({**ROW, "colour": "red"})


def test_non_string_field_is_refused():
    with pytest.raises(InvalidAclError, match="host must be a string, got int"):
        binding_from_dict({**ROW, "host": 1})


def test_non_object_row_is_refused():
    with pytest.raises(InvalidAclError, match="expected an object"):
        binding_from_dict(["not", "an", "object"])


def test_bad_enum_name_names_the_field():
    with pytest.raises(InvalidAclError, match="operation: 'FLY' is not a valid AclOperation name"):
        binding_from_dict({**ROW, "operation": "FLY"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("resource_type", "ANY"),
        ("resource_type", "UNKNOWN"),
        ("pattern_type", "ANY"),
        ("pattern_type", "MATCH"),
        ("operation", "ANY"),
        ("permission_type", "ANY"),
        ("permission_type", "UNKNOWN"),
    ],
)
def test_filter_only_and_unknown_values_cannot_be_stored(field, value):
    with pytest.raises(InvalidAclError, match=f"{field} '{value}' cannot be stored in an ACL; expected one of") as info:
        binding_from_dict({**ROW, field: value})
    assert "ANY" not in str(info.value).split("expected one of", 1)[1]


def test_creation_rules_apply():
    with pytest.raises(InvalidAclError, match="Invalid empty resource name"):
        binding_from_dict({**ROW, "resource_name": ""})
    with pytest.raises(InvalidAclError, match="CLUSTER resource is kafka-cluster"):
        binding_from_dict({**ROW, "resource_type": "CLUSTER", "resource_name": "c"})
    with pytest.raises(InvalidAclError, match="expected Type:Name"):
        binding_from_dict({**ROW, "principal": "alice"})


def test_document_reports_every_bad_entry_with_its_position():
    doc = {"acls": [ROW, {**ROW, "host": 3}, ROW, {**ROW, "principal": "nobody"}, "junk"]}
    with pytest.raises(AclJsonError) as info:
        acls_from_document(doc)
    problems = info.value.problems
    assert [p.position for p in problems] == [1, 3, 4]
    assert str(problems[0]) == "acls[1]: host must be a string, got int"
    assert str(info.value).startswith("3 invalid ACL(s): acls[1]: ")
    assert isinstance(info.value, InvalidAclError)


def test_error_message_shows_at_most_20_problems():
    err = AclJsonError(AclJsonProblem(i, "bad") for i in range(25))
    assert len(err.problems) == 25
    assert str(err).endswith("(and 5 more)")
    assert "acls[19]" in str(err)
    assert "acls[20]" not in str(err)


@pytest.mark.parametrize("doc", [[], {"acl": []}, {"acls": {}}, "acls", None])
def test_document_shape_is_checked(doc):
    with pytest.raises(AclJsonError, match=re.escape('expected a JSON object {"acls": [ ... ]}')):
        acls_from_document(doc)


def test_empty_document():
    assert acls_from_document({"acls": []}) == []
    assert acls_to_document([]) == {"acls": []}


def test_fields_constant():
    assert tuple(ROW) == FIELDS


@given(st.lists(bindings, max_size=5))
@settings(max_examples=50)
def test_document_preserves_order(many):
    assert acls_from_document(acls_to_document(many)) == many

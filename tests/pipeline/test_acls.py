from __future__ import annotations

import json

import pytest

from kafkaguard.pipeline.acls import AclSet, acl_set_from_text
from kafkaguard.pipeline.errors import PipelineError

ROW = {
    "principal": "User:alice",
    "host": "*",
    "resource_type": "TOPIC",
    "resource_name": "orders",
    "pattern_type": "PREFIXED",
    "operation": "READ",
    "permission_type": "ALLOW",
}


def test_ids_are_kept_or_derived_stably() -> None:
    text = json.dumps({"acls": [{"id": "acl-7", **ROW}, {**ROW, "operation": "WRITE"}]})
    first = acl_set_from_text(text, "f.json", "current")
    again = acl_set_from_text(text, "f.json", "current")
    assert first.acls[0].id == "acl-7"
    assert first.acls[1].id.startswith("h-")
    assert first.acls[1].id == again.acls[1].id


def test_payload_roundtrip() -> None:
    acls = acl_set_from_text(json.dumps({"acls": [ROW]}), "f", "x", "User:admin", True)
    assert AclSet.from_payload(acls.to_payload()) == acls


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "f.json: not valid JSON"),
        ("[]", "not a valid kafkaguard ACL document"),
        (json.dumps({"acls": [{**ROW, "operation": "FLY"}]}), "acls[0]: operation"),
        (json.dumps({"acls": [{**ROW, "principal": "alice"}]}), "Invalid principal"),
    ],
)
def test_bad_documents_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PipelineError, match=message.replace("[", r"\[").replace("]", r"\]")):
        acl_set_from_text(text, "f.json", "current")


def test_bad_super_users() -> None:
    with pytest.raises(PipelineError, match="principalType:principalName"):
        acl_set_from_text(json.dumps({"acls": []}), "f", "x", super_users="admin")

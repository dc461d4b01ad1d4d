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


GROUP_DOC = {
    "acls": [
        {"principal": "Group:ops", "host": "*", "resource_type": "TOPIC", "resource_name": "orders",
         "pattern_type": "LITERAL", "operation": "READ", "permission_type": "ALLOW"},
    ],
    "groups": {"Group:ops": ["User:alice", "User:bob"], "audit": ["User:alice"]},
}  # fmt: skip


def test_groups_in_the_document_make_group_acls_apply_to_members_and_survive_the_payload() -> None:
    from kafkaguard import AclOperation, Action, AuthorizationResult, RequestContext, ResourcePattern, ResourceType

    acls = acl_set_from_text(json.dumps(GROUP_DOC), "acls.json", "current")
    assert dict(acls.memberships) == {"User:alice": ("Group:audit", "Group:ops"), "User:bob": ("Group:ops",)}
    assert AclSet.from_payload(acls.to_payload()) == acls
    read = Action(AclOperation.READ, ResourcePattern(ResourceType.TOPIC, "orders"))
    authorizer = acls.authorizer()
    assert authorizer.authorize_one(RequestContext("User:bob", "10.0.0.1"), read) is AuthorizationResult.ALLOWED
    assert authorizer.authorize_one(RequestContext("User:carol", "10.0.0.1"), read) is AuthorizationResult.DENIED
    # kafkaguard groups list --json prints exactly this shape.
    assert acls.groups() == {"Group:audit": ["User:alice"], "Group:ops": ["User:alice", "User:bob"]}


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([], '"groups" must be an object'),
        ({"Group:ops": "User:alice"}, "Group:ops: expected a list of principals"),
        ({"*": ["User:alice"]}, "*: '*' is not a group"),
        ({"ops": ["Group:admins", "alice"]}, "add its members instead; ops: 'alice': Invalid principal 'alice'"),
    ],
)
def test_bad_groups_are_refused_with_every_problem(groups: object, message: str) -> None:
    with pytest.raises(PipelineError, match=r'^acls\.json: (invalid groups|"groups" must)') as excinfo:
        acl_set_from_text(json.dumps({"acls": [], "groups": groups}), "acls.json", "current")
    assert message in str(excinfo.value)

"""The documentation's examples that need no running server, run or read as they stand: the authorizer's Python
example, the ACL file and ACL set examples, the audit event and record examples (against the published schema and
the pipeline's reader), and every configuration example (loaded as a config file)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import jsonschema_rs
import pytest

from kafkaguard.audit.records.record import AuditRecord, from_json_line
from kafkaguard.cli.aclfile import load_acl_file
from kafkaguard.config import load_settings
from kafkaguard.model import AclOperation, AuthorizationResult, ResourceType
from kafkaguard.model.acl_json import acls_from_document
from tests.docs.blocks import ROOT, marked_block


def test_the_library_example_runs() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(marked_block("library-python").text, "library.md", "exec"), {})  # noqa: S102 - our own page
    assert out.getvalue().startswith("DENIED: User:alice from 10.0.0.66 READ on Topic:LITERAL:orders")


def test_the_acl_file_example_reads(tmp_path: Path) -> None:
    path = tmp_path / "acls.yaml"
    path.write_text(marked_block("acls-yaml-example").text)
    bindings = load_acl_file(path)
    principals = {binding.entry.principal for binding in bindings}
    assert principals == {"User:alice", "User:bob"}
    assert any(b.entry.operation is AclOperation.DELETE and b.pattern.name == "*" for b in bindings)


def test_the_acl_set_example_reads() -> None:
    (binding,) = acls_from_document(json.loads(marked_block("acl-json-example").text))
    assert (binding.entry.principal, binding.pattern.name, binding.entry.operation) == (
        "User:alice",
        "orders",
        AclOperation.READ,
    )


def test_the_audit_envelope_example_is_valid_under_the_schema() -> None:
    schema = json.loads((ROOT / "docs" / "audit-event.schema.json").read_text("utf-8"))
    event = json.loads(marked_block("audit-envelope-example").text)
    errors = [str(error) for error in jsonschema_rs.Draft202012Validator(schema).iter_errors(event)]
    assert errors == []
    assert event["type"] == "io.kafkaguard.authentication.v1"


def test_the_audit_record_example_reads_as_a_record() -> None:
    record = from_json_line(marked_block("audit-record-example").text.replace("\n", ""))
    assert isinstance(record, AuditRecord), record
    assert (record.resource_type, record.decision, record.count) == (
        ResourceType.TOPIC,
        AuthorizationResult.ALLOWED,
        1204,
    )


@pytest.mark.parametrize(
    ("name", "environment"),
    [
        ("audit-sink-yaml", {"KAFKAGUARD_AUDIT_KAFKA_PASSWORD": "x"}),  # the comment says where the password goes
        ("mtls-yaml", {}),
        ("oauthbearer-yaml", {}),
        ("kerberos-yaml", {}),
        ("proxy-protocol-yaml", {}),
        ("passthrough-oauthbearer-yaml", {}),
        ("passthrough-scram-yaml", {}),
    ],
)
def test_the_configuration_examples_load(
    name: str, environment: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = marked_block(name).text
    path = tmp_path / "kafkaguard.yaml"
    path.write_text(text)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    settings = load_settings(path)
    first_key = text.split(":", 1)[0]
    assert first_key in settings.model_fields_set, (name, first_key)

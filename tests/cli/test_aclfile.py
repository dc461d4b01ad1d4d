"""The ACL YAML format: round trip through ``dump_yaml``, shorthands, and errors that name the line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given

from kafkaguard.cli.aclfile import AclFileError, dump_yaml, load_acl_file, parse_yaml
from kafkaguard.model import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkaguard.model.acl_json import acls_to_document
from tests.strategies import binding_lists

EXAMPLE = """\
principals:
  User:alice:
    acls:
      - topic: orders
        operations: [Read, Describe]
      - group: "billing-"
        pattern: prefixed
        operation: Read
        hosts: ["10.0.0.1", "10.0.0.2"]
      - topic: "*"
        operations: [Delete]
        permission: deny
    consumer:
      topics: [events]
      groups: readers
  User:bob:
    producer:
      - topics: [payments-]
        pattern: prefixed
        transactional_ids: payments-tx
        idempotent: true
"""


def test_example_expands_like_kafka_acls() -> None:
    found = {
        (
            b.entry.principal,
            b.pattern.resource_type,
            b.pattern.name,
            b.pattern.pattern_type,
            b.entry.host,
            b.entry.operation,
            b.entry.permission_type,
        )
        for b in parse_yaml(EXAMPLE)
    }
    T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
    L, P = PatternType.LITERAL, PatternType.PREFIXED
    Op, A, D = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY
    assert found == {
        ("User:alice", T, "orders", L, "*", Op.READ, A),
        ("User:alice", T, "orders", L, "*", Op.DESCRIBE, A),
        ("User:alice", G, "billing-", P, "10.0.0.1", Op.READ, A),
        ("User:alice", G, "billing-", P, "10.0.0.2", Op.READ, A),
        ("User:alice", T, "*", L, "*", Op.DELETE, D),
        ("User:alice", T, "events", L, "*", Op.READ, A),
        ("User:alice", T, "events", L, "*", Op.DESCRIBE, A),
        ("User:alice", G, "readers", L, "*", Op.READ, A),
        ("User:bob", T, "payments-", P, "*", Op.WRITE, A),
        ("User:bob", T, "payments-", P, "*", Op.DESCRIBE, A),
        ("User:bob", T, "payments-", P, "*", Op.CREATE, A),
        ("User:bob", X, "payments-tx", P, "*", Op.WRITE, A),
        ("User:bob", X, "payments-tx", P, "*", Op.DESCRIBE, A),
        ("User:bob", C, "kafka-cluster", L, "*", Op.IDEMPOTENT_WRITE, A),
    }


@given(binding_lists)
def test_dump_then_parse_gives_the_same_acls(bindings) -> None:
    assert set(parse_yaml(dump_yaml(bindings))) == set(bindings)


def test_json_files_are_read_too(tmp_path: Path) -> None:
    bindings = parse_yaml(EXAMPLE)
    path = tmp_path / "acls.json"
    path.write_text(json.dumps(acls_to_document(bindings)), "utf-8")
    assert set(load_acl_file(path)) == set(bindings)


BAD = """\
principals:
  User:bob:
    acls:
      - topic: x
        operations: [Reed, Alter]
        permission: maybe
      - cluster: other
        operations: [Read]
      - topic: a
        group: b
        operations: [Read]
      - topic: y
        colour: blue
        operations: [Read]
  bob:
    acls: []
"""


def test_every_problem_is_reported_with_its_line_and_field() -> None:
    with pytest.raises(AclFileError) as excinfo:
        parse_yaml(BAD, "acls.yaml")
    lines = str(excinfo.value).splitlines()
    assert lines[0].startswith("acls.yaml:5: principals.User:bob.acls[0].operations[0]: 'Reed' is not a valid")
    assert lines[1] == "acls.yaml:6: principals.User:bob.acls[0].permission: 'maybe' is not one of allow, deny"
    assert lines[2] == (
        "acls.yaml:7: principals.User:bob.acls[1]: The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert lines[3].startswith("acls.yaml:9: principals.User:bob.acls[2]: name exactly one resource")
    assert lines[4].startswith("acls.yaml:13: principals.User:bob.acls[3].colour: unknown key")
    assert (
        lines[5] == "acls.yaml:16: principals.bob: Invalid principal 'bob': expected Type:Name, for example User:alice"
    )
    assert len(lines) == 6


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("principals:\n  User:a:\n    acls:\n      - topic: *\n", "<acls>:4: YAML syntax error"),
        ("principals:\n  User:a:\n    acls:\n      - topic: *\n", "quote '*' as \"*\""),
        ("acls: []\n", "<acls>:1: acls: unknown key; expected principals, version"),
        (
            "principals:\n  User:a:\n    acls:\n      - topic: t\n",
            "<acls>:4: principals.User:a.acls[0]: missing key: operations",
        ),
        ("principals:\n  User:a:\n    consumer:\n      groups: []\n", "must not be an empty list"),
        (
            "principals:\n  User:a:\n    producer:\n      topics: t\n      idempotent: maybe\n",
            "idempotent: expected true or false",
        ),
        (
            "principals:\n  User:a:\n    acls:\n      - cluster: other\n        operations: [Alter]\n",
            "only valid name for the CLUSTER",
        ),
    ],
)
def test_yaml_errors(text: str, expected: str) -> None:
    with pytest.raises(AclFileError, match=None) as excinfo:
        parse_yaml(text)
    assert expected in str(excinfo.value)


def test_cidr_hosts_load_and_an_invalid_block_is_a_problem_with_its_line() -> None:
    good = (
        "principals:\n  User:a:\n    acls:\n      - topic: t\n        operations: [Read]\n"
        '        hosts: ["10.0.0.0/8", "2001:db8::/32"]\n'
    )
    assert sorted(b.entry.host for b in parse_yaml(good, "acls.yaml")) == ["10.0.0.0/8", "2001:db8::/32"]
    bad = good.replace("10.0.0.0/8", "10.0.0.0/33")
    with pytest.raises(AclFileError) as excinfo:
        parse_yaml(bad, "acls.yaml")
    assert str(excinfo.value) == (
        "acls.yaml:4: principals.User:a.acls[0]: Invalid CIDR notation '10.0.0.0/33': prefix length 33 is out of "
        "range; an IPv4 block allows 0 to 32"
    )

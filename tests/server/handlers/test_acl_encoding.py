"""The hand-written DescribeAcls encoder decodes, with kio, to exactly what a kio-built response holds."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kafkaguard.apis.acl_encoding import encode_describe_acls
from kafkaguard.authorizer.requests import ApiKey
from kafkaguard.model import (
    AccessControlEntry,
    AclBinding,
    AclId,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredAcl,
)
from kafkaguard.protocol.build import build, nested
from kafkaguard.protocol.codec import response_schema

names = st.text(min_size=1, max_size=300)  # long names need multi-byte varints
ops = st.sampled_from([op for op in AclOperation if op.code >= 2])
resources = st.lists(
    st.tuples(
        st.sampled_from([t for t in ResourceType if t.code >= 2]),
        names,
        st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
        st.lists(st.tuples(names, st.sampled_from(["*", "10.0.0.1", "0:0:0:0:0:0:0:1"]), ops), max_size=4),
    ),
    max_size=5,
)


def kio_bytes(version: int, groups) -> bytes:
    cls = load_response_schema(29, version)
    resource_cls, acl_cls = nested(cls, "DescribeAclsResource"), nested(cls, "AclDescription")
    body = build(
        cls,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        error_message="",  # Kafka sends "" on success (tests/kafka/differential)
        resources=tuple(
            build(
                resource_cls,
                resource_type=pattern.resource_type.code,
                resource_name=pattern.name,
                pattern_type=pattern.pattern_type.code,
                acls=tuple(
                    build(
                        acl_cls,
                        principal=a.binding.entry.principal,
                        host=a.binding.entry.host,
                        operation=a.binding.entry.operation.code,
                        permission_type=a.binding.entry.permission_type.code,
                    )
                    for a in acls
                ),
            )
            for pattern, acls in groups
        ),
    )
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    return out.getvalue()


@pytest.mark.parametrize("version", [1, 2, 3])
@given(raw=resources)
def test_hand_encoding_equals_kio(version: int, raw):
    groups = []
    for rtype, name, ptype, entries in raw:
        pattern = ResourcePattern(rtype, name, ptype)
        acls = [
            StoredAcl(
                AclId(f"id-{i}"),
                AclBinding(pattern, AccessControlEntry(f"User:{p}", host, op, AclPermissionType.ALLOW)),
            )
            for i, (p, host, op) in enumerate(entries)
        ]
        groups.append((pattern, acls))
    ours = encode_describe_acls(version, groups)
    assert ours == kio_bytes(version, groups)
    decoded, size = entity_reader(response_schema(ApiKey.DESCRIBE_ACLS, version))(ours, 0)
    assert size == len(ours)
    assert [r.resource_name for r in decoded.resources] == [p.name for p, _ in groups]

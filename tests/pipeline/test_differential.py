"""Differential test: the pipeline's decisions equal the core authorizer's, request by request.

Random ACL sets and random logs (hypothesis) go through the real path: JSON lines → JVM parsing → JVM
aggregation → ``mapInArrow`` with the core authorizer; every logged request is then looked up in the result and
compared with ``StandardAuthorizer.authorize`` and ``explain`` called directly.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaguard import AclOperation, Action, RequestContext, ResourcePattern, ResourceType
from kafkaguard.audit.records import AuditRecord, to_json_line
from kafkaguard.model import AuthorizationResult
from kafkaguard.pipeline import transforms
from kafkaguard.pipeline.acls import acl_set_from_text
from kafkaguard.pipeline.readers import parse_json_lines
from tests.audit.records.test_record import T

pytestmark = pytest.mark.spark

PRINCIPALS = ["User:alice", "User:bob", "Group:ops", "User:CN=x, O=y"]
HOSTS = ["10.0.0.1", "10.0.0.2"]
#: CIDR blocks (KIP-1276) an ACL may name: holding both hosts, one of them, or neither.
CIDR_HOSTS = ["10.0.0.0/8", "10.0.0.2/32", "10.0.0.0/31", "192.168.0.0/16"]
NAMES = ["a", "ab", "abc", "b", "a:b", "*x"]
TYPES = ["TOPIC", "GROUP"]
OPS = ["READ", "WRITE", "DESCRIBE", "CREATE", "AUTO_CREATE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"]

acl_rows = st.fixed_dictionaries(
    {
        "principal": st.sampled_from([*PRINCIPALS, "User:*"]),
        "host": st.sampled_from([*HOSTS, "*", *CIDR_HOSTS]),
        "resource_type": st.sampled_from(TYPES),
        "resource_name": st.sampled_from([*NAMES, "*"]),
        "pattern_type": st.sampled_from(["LITERAL", "PREFIXED"]),
        "operation": st.sampled_from([*OPS, "ALL"]),
        "permission_type": st.sampled_from(["ALLOW", "ALLOW", "DENY"]),
    }
)
log_records = st.builds(
    lambda p, h, op, t, n, d, s: AuditRecord(
        time=T.replace(second=s),
        principal=p,
        host=h,
        api="Fetch",
        operation=AclOperation[op],
        resource_type=ResourceType[t],
        resource_name=n,
        decision=AuthorizationResult.ALLOWED if d else AuthorizationResult.DENIED,
        rule=None,
    ),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(OPS),
    st.sampled_from(TYPES),
    st.sampled_from(NAMES),
    st.booleans(),
    st.integers(0, 59),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    acls=st.lists(acl_rows, max_size=12),
    log=st.lists(log_records, min_size=1, max_size=30),
    super_user=st.sampled_from(["", "User:bob"]),
    allow_everyone=st.booleans(),
)
def test_pipeline_decides_like_the_core(spark, acls, log, super_user, allow_everyone) -> None:
    acl_set = acl_set_from_text(json.dumps({"acls": acls}), "random", "current", super_user, allow_everyone)
    authorizer = acl_set.authorizer()
    text = spark.createDataFrame([(to_json_line(r),) for r in log], "value string")
    good = transforms.good_rows(transforms.aggregate_raw(parse_json_lines(text)))
    access = transforms.collapse(good, keys=["logged_decision"])
    rows = transforms.decide(spark, access, {"": acl_set}, explain=True).collect()
    decided = {
        (r["principal"], r["host"], r["operation"], r["resource_type"], r["resource_name"], r["logged_decision"]): r
        for r in rows
    }
    assert sum(r["requests"] for r in rows) == len(log)
    for record in log:
        key = (
            record.principal,
            record.host,
            record.operation.name,
            record.resource_type.name,
            record.resource_name,
            record.decision.value,
        )
        row = decided[key]
        context = RequestContext(record.principal, record.host)
        action = Action(record.operation, ResourcePattern(record.resource_type, record.resource_name))
        assert row["decision"] == authorizer.authorize_one(context, action).value
        explained = authorizer.explain(context, action)
        assert row["rule"] == str(explained.rule)
        assert row["matching_ids"] == [acl.id for acl in explained.matching_acls]

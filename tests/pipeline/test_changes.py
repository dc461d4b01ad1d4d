"""``simulate`` decides only what the change can flip (``kafkaguard.pipeline.changes``); proven exact here.

* The theory, without Spark, on many random cases: every access whose decision differs between two random ACL sets
  (random super users and allow.everyone on each side) is a candidate.
* The pipeline, end to end (``simulate.run`` on a JSON-lines log): its flips equal, request by request, the core
  authorizer's decisions under both sets — including super-user and allow.everyone changes — and it decided no
  more than the candidates.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkaguard import AclOperation, Action, RequestContext, ResourcePattern, ResourceType
from kafkaguard.audit.records import AuditRecord, to_json_line
from kafkaguard.model import AuthorizationResult
from kafkaguard.pipeline.acls import AclSet, acl_set_from_text
from kafkaguard.pipeline.changes import AclChange
from kafkaguard.pipeline.errors import PipelineError
from kafkaguard.pipeline.jobs import simulate
from kafkaguard.pipeline.jobs.common import JobRun
from tests.audit.records.test_record import T
from tests.pipeline.test_differential import HOSTS, NAMES, OPS, PRINCIPALS, TYPES, acl_rows, log_records
from tests.pipeline.test_jobs_cli import acl

SUPER_USERS = st.sampled_from(["", "User:bob", "User:alice;User:bob"])


def acl_sets(
    draw_current, draw_added, keep, su_current, su_proposed, ae_current, ae_proposed, groups=({}, {})
) -> tuple[AclSet, AclSet]:
    proposed = [row for row, kept in zip(draw_current, keep, strict=False) if kept] + draw_added
    current_doc = json.dumps({"acls": draw_current, "groups": groups[0]})
    proposed_doc = json.dumps({"acls": proposed, "groups": groups[1]})
    current = acl_set_from_text(current_doc, "c", "current", su_current, ae_current)
    return current, acl_set_from_text(proposed_doc, "p", "proposed", su_proposed, ae_proposed)


#: Principal groups on either side: Group:ops (an ACL principal of the universe) with some of the users as members.
GROUPS = st.fixed_dictionaries(
    {}, optional={"Group:ops": st.lists(st.sampled_from(["User:alice", "User:bob"]), min_size=1, unique=True)}
)


def candidate(change: AclChange, principal: str, host: str, resource_type: str, name: str) -> bool:
    """``transforms.may_flip`` for one access, in Python."""
    if change.everything or principal in change.whole_principals:
        return True
    return any(
        (p is None or p == principal) and (h is None or h == host)
        for _, _, p, h in change.reach([(resource_type, name)])
    )


CHANGES = {
    "current": st.lists(acl_rows, max_size=10),
    "added": st.lists(acl_rows, max_size=4),
    "keep": st.lists(st.booleans(), min_size=10, max_size=10),
    "su": st.tuples(SUPER_USERS, SUPER_USERS),
    "ae": st.tuples(st.booleans(), st.booleans()),
    "groups": st.tuples(GROUPS, GROUPS),
}


@settings(max_examples=400, deadline=None)
@given(**CHANGES)
def test_every_access_that_flips_is_a_candidate(current, added, keep, su, ae, groups) -> None:
    c, p = acl_sets(current, added, keep, su[0], su[1], ae[0], ae[1], groups)
    change = AclChange.between(c, p)
    before, after = c.authorizer(), p.authorizer()
    for principal in PRINCIPALS:
        for host in HOSTS:
            context = RequestContext(principal, host)
            for resource_type in TYPES:
                for name in NAMES:
                    pattern = ResourcePattern(ResourceType[resource_type], name)
                    actions = [Action(AclOperation[op], pattern) for op in OPS]
                    flips = before.authorize(context, actions) != after.authorize(context, actions)
                    if flips:
                        assert candidate(change, principal, host, resource_type, name)


def test_the_worked_example() -> None:
    """The example of ``changes``' docstring."""
    alice, bob = (
        acl("a", "User:alice", "orders", "PREFIXED", "READ"),
        acl("b", "User:bob", "payments", "LITERAL", "READ"),
    )
    c = acl_set_from_text(json.dumps({"acls": [alice, bob]}), "c", "current")
    logs = acl("l", "User:*", "logs", "LITERAL", "DESCRIBE")
    p = acl_set_from_text(json.dumps({"acls": [alice, logs]}), "p", "proposed")
    change = AclChange.between(c, p)
    assert len(change.changed) == 2 and not change.nothing
    resources = [("TOPIC", "orders-eu"), ("TOPIC", "payments"), ("TOPIC", "logs")]
    assert sorted(change.reach(resources), key=str) == sorted(
        [("TOPIC", "payments", "User:bob", None), ("TOPIC", "logs", None, None)], key=str
    )
    same = AclChange.between(c, acl_set_from_text(json.dumps({"acls": [bob, alice]}), "x", "reordered"))
    assert same.nothing and list(same.reach(resources)) == []


@pytest.mark.spark
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@example(
    current=[],
    added=[],
    keep=[True] * 10,
    su=("", "User:bob"),
    ae=(False, False),
    log=[],
    in_driver=True,
    groups=({}, {}),
)
@example(
    current=[],
    added=[],
    keep=[True] * 10,
    su=("", "User:bob"),
    ae=(False, False),
    log=[],
    in_driver=False,
    groups=({}, {}),
)
@example(current=[], added=[], keep=[True] * 10, su=("", ""), ae=(False, True), log=[], in_driver=True, groups=({}, {}))
@example(
    current=[acl("g1", "Group:ops", "a", "LITERAL", "READ")],
    added=[],
    keep=[True] * 10,
    su=("", ""),
    ae=(False, False),
    log=[],
    in_driver=False,
    groups=({}, {"Group:ops": ["User:alice"]}),
)
@given(**CHANGES, log=st.lists(log_records, max_size=30), in_driver=st.booleans())
def test_simulate_flips_exactly_what_the_core_flips(
    spark, tmp_path: Path, current, added, keep, su, ae, log, in_driver, groups
) -> None:
    c, p = acl_sets(current, added, keep, su[0], su[1], ae[0], ae[1], groups)
    # The random log plus every (principal, host, resource) of the small universe, so every possible flip occurs.
    records = list(log)
    for principal in PRINCIPALS:
        for host in HOSTS:
            for resource_type in TYPES:
                for name in NAMES:
                    for op in ("READ", "CREATE"):
                        records.append(
                            AuditRecord(
                                time=T,
                                principal=principal,
                                host=host,
                                api="Fetch",
                                operation=AclOperation[op],
                                resource_type=ResourceType[resource_type],
                                resource_name=name,
                                decision=AuthorizationResult.ALLOWED,
                                rule=None,
                            )
                        )
    logged = tmp_path / f"log-{uuid.uuid4().hex}.jsonl"  # hypothesis reuses tmp_path across examples
    logged.write_text("\n".join(to_json_line(r) for r in records) + "\n")
    out = tmp_path / f"out-{uuid.uuid4().hex}"
    # Both ways of deciding: few candidates in the driver, many in the Python workers.
    limit = simulate.DRIVER_DECISIONS
    simulate.DRIVER_DECISIONS = limit if in_driver else 0
    try:
        result = simulate.run(spark, [str(logged)], c, p, str(out), run_=JobRun("simulate", str(out)))
    finally:
        simulate.DRIVER_DECISIONS = limit
    before, after = c.authorizer(), p.authorizer()
    expected: dict[tuple[str, ...], tuple[str, str, int]] = {}
    for r in records:
        context = RequestContext(r.principal, r.host)
        action = Action(r.operation, ResourcePattern(r.resource_type, r.resource_name))
        now, then = before.authorize_one(context, action).value, after.authorize_one(context, action).value
        if now != then:
            key = (r.principal, r.host, r.operation.name, r.resource_type.name, r.resource_name)
            n = expected[key][2] if key in expected else 0
            expected[key] = (now, then, n + 1)
    got = {
        (row.principal, row.host, row.operation, row.resource_type, row.resource_name): (
            row.current_decision,
            row.proposed_decision,
            row.requests,
        )
        for row in spark.read.parquet(str(out / "flips")).collect()
    }
    assert got == expected
    summary = result.summary
    assert int(summary["newly_denied"]) + int(summary["newly_allowed"]) == len(expected)
    change = AclChange.between(c, p)
    candidates = {
        (r.principal, r.host, r.operation.name, r.resource_type.name, r.resource_name)
        for r in records
        if candidate(change, r.principal, r.host, r.resource_type.name, r.resource_name)
    }
    assert summary["decided_accesses"] == len(candidates)
    assert summary["distinct_accesses"] == len(
        {(r.principal, r.host, r.operation.name, r.resource_type.name, r.resource_name) for r in records}
    )


@pytest.mark.spark
def test_simulate_on_an_empty_log_and_no_change(spark, tmp_path: Path) -> None:
    """Adaptive execution skips an empty plan's rest; the counts are still right (zeros), never a Spark error. A log
    without allowed decisions (an empty one here) is refused with a clear message (``require_allowed``)."""
    acls = acl_set_from_text(json.dumps({"acls": []}), "c", "current")
    record = AuditRecord(
        time=T,
        principal="User:a",
        host="h",
        api="Fetch",
        operation=AclOperation.READ,
        resource_type=ResourceType.TOPIC,
        resource_name="t",
        decision=AuthorizationResult.ALLOWED,
        rule=None,
    )
    for lines, expected in (("", 0), (to_json_line(record) + "\n", 1)):
        log = tmp_path / f"log-{expected}.jsonl"
        log.write_text(lines)
        out = tmp_path / f"out-{expected}"
        if not expected:
            with pytest.raises(PipelineError, match="the log holds no allowed decisions"):
                simulate.run(spark, [str(log)], acls, acls, str(out), run_=JobRun("simulate", str(out)))
            continue
        result = simulate.run(spark, [str(log)], acls, acls, str(out), run_=JobRun("simulate", str(out)))
        assert (result.summary["records"], result.summary["distinct_accesses"]) == (expected, expected)
        assert (result.summary["decided_accesses"], result.summary["newly_denied"]) == (0, 0)
        assert spark.read.parquet(str(out / "flips")).count() == 0

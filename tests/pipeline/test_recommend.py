"""The recommendation algorithm in plain Python (no Spark)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaguard import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkaguard.pipeline.recommend import NameUniverse, Observed, merge_names, recommend

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC = ResourceType.TOPIC


def test_merge_into_prefix_only_when_no_other_logged_name_is_widened() -> None:
    universe = sorted(["orders-eu", "orders-us", "orders-internal", "payments-a", "payments-b", "logs"])
    merged = merge_names(["orders-eu", "orders-us", "payments-a", "payments-b"], [], universe)
    # orders-internal was seen in the log but not allowed: no "orders-" prefix; payments-* all allowed.
    assert merged == [
        (PatternType.LITERAL, "orders-eu", 1),
        (PatternType.LITERAL, "orders-us", 1),
        (PatternType.PREFIXED, "payments-", 2),
    ]


def test_merge_uses_longest_common_prefix_of_the_group() -> None:
    assert merge_names(["orders-eu", "orders-us"], [], ["logs", "orders-eu", "orders-us"]) == [
        (PatternType.PREFIXED, "orders-", 2)
    ]


def test_single_names_stay_literal() -> None:
    assert merge_names(["a"], [], ["a", "b"]) == [(PatternType.LITERAL, "a", 1)]


def test_names_allowed_anyway_do_not_block_a_merge() -> None:
    assert merge_names(["t1", "t2"], ["t3"], ["t1", "t2", "t3", "x"]) == [(PatternType.PREFIXED, "t", 2)]


def test_implied_describe_needs_no_acl_and_partial_hosts_stay_host_specific() -> None:
    observed = [
        Observed("10.0.0.1", READ, TOPIC, "orders", True),
        Observed("10.0.0.1", DESCRIBE, TOPIC, "orders", True),
        Observed("10.0.0.1", WRITE, TOPIC, "audit", True),
        Observed("10.0.0.2", WRITE, TOPIC, "audit", False),
    ]
    result = recommend("User:svc", observed, NameUniverse({TOPIC: ["orders", "audit"]}))
    assert result.exact
    acls = {(b.entry.host, b.entry.operation, b.pattern.name, b.entry.permission_type) for b in result.bindings}
    assert acls == {
        ("*", READ, "orders", AclPermissionType.ALLOW),
        ("10.0.0.1", WRITE, "audit", AclPermissionType.ALLOW),
    }


def test_implication_that_would_allow_a_denied_access_gets_an_exact_deny() -> None:
    observed = [Observed("h", READ, TOPIC, "t", True), Observed("h", DESCRIBE, TOPIC, "t", False)]
    result = recommend("User:svc", observed, NameUniverse({TOPIC: ["t"]}))
    assert result.exact
    denies = [b for b in result.bindings if b.entry.permission_type is AclPermissionType.DENY]
    assert [(d.entry.host, d.entry.operation, d.pattern.name) for d in denies] == [("h", DESCRIBE, "t")]


_names = st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "c:1", "c:2"])
_observed = st.builds(
    Observed,
    host=st.sampled_from(["h1", "h2"]),
    operation=st.sampled_from([READ, WRITE, DESCRIBE, AclOperation.CREATE, AclOperation.AUTO_CREATE]),
    resource_type=st.sampled_from([TOPIC, ResourceType.GROUP]),
    name=_names,
    allowed=st.booleans(),
)


@settings(max_examples=300)
@given(st.lists(_observed, max_size=25), st.lists(_names, max_size=4))
def test_recommendation_is_exact_on_the_log(observed: list[Observed], others: list[str]) -> None:
    """Whatever was logged, the recommended ACLs allow exactly the logged-allowed accesses of the log."""
    # One tuple logged both ways counts as allowed (ACLs changed within the window).
    allowed = {(o.host, o.operation, o.resource_type, o.name) for o in observed if o.allowed}
    consistent = [
        Observed(
            o.host, o.operation, o.resource_type, o.name, (o.host, o.operation, o.resource_type, o.name) in allowed
        )
        for o in observed
    ]
    names = {o.name for o in observed} | set(others)
    result = recommend("User:p", consistent, NameUniverse({TOPIC: names, ResourceType.GROUP: names}))
    assert result.exact
    assert len(result.bindings) <= len(allowed) + len(consistent)

"""Properties of the authorizer against a plain linear-scan oracle (STYLE.md Part 3 item 14).

The oracle below is written from the prose of SEMANTICS.md §3 (authorize), §5 (authorizeByResourceType), §6
(filters) and §16.1 (AUTO_CREATE), and shares no code with the implementation: it scans every ACL for every
question, compares principals after splitting them at the first colon, and spells the implication tables out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kafkaguard import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from tests.strategies import (
    CONCRETE_OPERATIONS,
    Query,
    binding_filters,
    binding_lists,
    bindings,
    dense_binding_lists,
    hosts,
    membership_maps,
    principals,
    queries,
    query_lists,
    scenarios,
    stored,
    super_user_sets,
)

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
Op = AclOperation
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

# ================================================================================================== the oracle

#: §3 step 5, ALLOW: the ACL operations that grant an asked operation (besides ALL and the operation itself).
#: AUTO_CREATE is granted by CREATE (§16.1).
ALLOW_GRANTED_BY = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
    Op.AUTO_CREATE: {Op.CREATE},
}
#: DENY: only the operation itself and ALL, except that DENY CREATE also denies AUTO_CREATE (§16.1).
DENY_DENIED_BY = {Op.AUTO_CREATE: {Op.CREATE}}


def split_principal(text: str) -> tuple[str, str]:
    kind, _, name = text.partition(":")
    return kind, name


def oracle_resource_relevant(pattern: ResourcePattern, resource_type: ResourceType, name: str) -> bool:
    if pattern.resource_type != resource_type:
        return False
    if pattern.pattern_type == LITERAL:
        return pattern.name == name or pattern.name == "*"
    return name.startswith(pattern.name)


def oracle_principal_matches(acl_principal: str, principal: str) -> bool:
    return split_principal(acl_principal) == split_principal(principal) or split_principal(acl_principal) == (
        "User",
        "*",
    )


def oracle_host_matches(acl_host: str, host: str) -> bool:
    """§2, and KIP-1276 for a host containing ``/``: the block, read by ``ipaddress`` (host bits ignored), holds
    the address; an address of the other family, or a host that is no address, is not held."""
    if "/" not in acl_host:
        return acl_host in ("*", host)
    try:
        network = ipaddress.ip_network(acl_host, strict=False)
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return network.version == address.version and address in network


def oracle_entry_matches(
    entry: AccessControlEntry, principal: str, host: str, op: AclOperation, groups: Iterable[str] = ()
) -> bool:
    if not oracle_principal_matches(entry.principal, principal) and entry.principal not in set(groups):
        return False
    if not oracle_host_matches(entry.host, host):
        return False
    if entry.operation == Op.ALL or entry.operation == op:
        return True
    table = ALLOW_GRANTED_BY if entry.permission_type == ALLOW else DENY_DENIED_BY
    return entry.operation in table.get(op, set())


def oracle_authorize(
    acls: Iterable[AclBinding],
    super_users: frozenset[str],
    allow_everyone: bool,
    principal: str,
    host: str,
    op: AclOperation,
    resource_type: ResourceType,
    name: str,
    memberships: Mapping[str, Iterable[str]] | None = None,
) -> AuthorizationResult:
    if principal in super_users:
        return ALLOWED
    groups = (memberships or {}).get(principal, ())
    relevant = [b for b in acls if oracle_resource_relevant(b.pattern, resource_type, name)]
    matching = [b for b in relevant if oracle_entry_matches(b.entry, principal, host, op, groups)]
    if any(b.entry.permission_type == DENY for b in matching):
        return DENIED
    if any(b.entry.permission_type == ALLOW for b in matching):
        return ALLOWED
    if not relevant:
        return ALLOWED if allow_everyone else DENIED
    return DENIED


def oracle_by_resource_type(
    acls: list[AclBinding],
    super_users: frozenset[str],
    allow_everyone: bool,
    principal: str,
    host: str,
    op: AclOperation,
    resource_type: ResourceType,
    memberships: Mapping[str, Iterable[str]] | None = None,
) -> AuthorizationResult:
    # §5 step 1: the probe.
    probe = oracle_authorize(
        acls, super_users, allow_everyone, principal, host, op, resource_type, "hardcode", memberships
    )
    if probe == ALLOWED:
        return ALLOWED
    groups = set((memberships or {}).get(principal, ()))
    # Step 2: the scan, no implication (CREATE standing for AUTO_CREATE, §16.1).
    literal_deny: set[str] = set()
    prefix_deny: set[str] = set()
    literal_allow: set[str] = set()
    prefix_allow: set[str] = set()
    wildcard_allow = False
    for b in acls:
        if b.pattern.resource_type != resource_type:
            continue
        if not oracle_host_matches(b.entry.host, host):
            continue
        if (
            split_principal(b.entry.principal) != split_principal(principal)
            and b.entry.principal != "User:*"
            and b.entry.principal not in groups
        ):
            continue
        acl_op = b.entry.operation
        if not (acl_op == op or acl_op == Op.ALL or (op == Op.AUTO_CREATE and acl_op == Op.CREATE)):
            continue
        is_wildcard = b.pattern.pattern_type == LITERAL and b.pattern.name == "*"
        if b.entry.permission_type == DENY:
            if is_wildcard:
                return DENIED
            (literal_deny if b.pattern.pattern_type == LITERAL else prefix_deny).add(b.pattern.name)
        elif is_wildcard:
            wildcard_allow = True
        else:
            (literal_allow if b.pattern.pattern_type == LITERAL else prefix_allow).add(b.pattern.name)
    # Step 3.
    if wildcard_allow:
        return ALLOWED

    # Step 4.
    def prefix_denied(name: str) -> bool:
        return any(name[:k] in prefix_deny for k in range(1, len(name) + 1))

    if any(n not in literal_deny and not prefix_denied(n) for n in literal_allow):
        return ALLOWED
    if any(not prefix_denied(n) for n in prefix_allow):
        return ALLOWED
    return DENIED


def oracle_filter_matches(acl_filter: AclBindingFilter, binding: AclBinding) -> bool:
    pf, ef = acl_filter.pattern_filter, acl_filter.entry_filter
    pattern, entry = binding.pattern, binding.entry
    # §6.1
    if pf.resource_type != ResourceType.ANY and pf.resource_type != pattern.resource_type:
        return False
    if pf.pattern_type not in (PatternType.ANY, PatternType.MATCH) and pf.pattern_type != pattern.pattern_type:
        return False
    if pf.name is not None:
        if pf.pattern_type in (PatternType.ANY, pattern.pattern_type):
            if pf.name != pattern.name:
                return False
        elif pattern.pattern_type == LITERAL:
            if not (pf.name == pattern.name or pattern.name == "*"):
                return False
        elif not pf.name.startswith(pattern.name):
            return False
    # §6.2
    if ef.principal is not None and ef.principal != entry.principal:
        return False
    if ef.host is not None and ef.host != entry.host:
        return False
    if ef.operation != Op.ANY and ef.operation != entry.operation:
        return False
    return ef.permission_type == AclPermissionType.ANY or ef.permission_type == entry.permission_type


# ================================================================================================== helpers


def ask(authorizer: StandardAuthorizer, q: Query) -> AuthorizationResult:
    [result] = authorizer.authorize(q.context, [Action(q.operation, ResourcePattern(q.resource_type, q.name))])
    return result


def expect(
    acls: list[AclBinding],
    super_users: frozenset[str],
    allow_everyone: bool,
    q: Query,
    memberships: Mapping[str, Iterable[str]] | None = None,
) -> AuthorizationResult:
    context = q.context
    return oracle_authorize(
        acls, super_users, allow_everyone, context.principal, context.host, q.operation, q.resource_type, q.name,
        memberships,
    )  # fmt: skip


def built_incrementally(
    acls: list[AclBinding], super_users: frozenset[str] = frozenset(), allow_everyone: bool = False
) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users, allow_everyone)
    half = len(acls) // 2
    for chunk in (acls[:half], acls[half:]):
        results = authorizer.add_acls(chunk)
        assert all(r.succeeded for r in results)
    return authorizer


def matching_deny_for(q: Query, data: st.DataObject) -> AclBinding:
    """A DENY that matches q: principal exact or User:*, host exact or *, operation exact or ALL, and a pattern
    relevant to the name (the literal name, the wildcard, or a non-empty prefix of it)."""
    patterns = [ResourcePattern(q.resource_type, "*", LITERAL)]
    if q.name:
        patterns.append(ResourcePattern(q.resource_type, q.name, LITERAL))
        patterns += [ResourcePattern(q.resource_type, q.name[:k], PREFIXED) for k in range(1, len(q.name) + 1)]
    pattern = data.draw(st.sampled_from(patterns))
    principal = data.draw(st.sampled_from((q.context.principal, "User:*")))
    host = data.draw(st.sampled_from((q.context.host, "*")))
    deny_ops = [q.operation, Op.ALL] + ([Op.CREATE] if q.operation == Op.AUTO_CREATE else [])
    op = data.draw(st.sampled_from(deny_ops))
    return AclBinding(pattern, AccessControlEntry(principal, host, op, DENY))


# ================================================================================================== properties


@given(scenarios(), super_user_sets, st.booleans(), membership_maps)
def test_indexed_authorize_equals_the_oracle(scenario, super_users, allow_everyone, memberships):
    acls, asked = scenario
    from_scratch = StandardAuthorizer(super_users, allow_everyone, acls=stored(acls), memberships=memberships)
    incremental = built_incrementally(acls, super_users, allow_everyone)
    incremental.replace_memberships(memberships)
    for q in asked:
        expected = expect(acls, super_users, allow_everyone, q, memberships)
        assert ask(from_scratch, q) is expected, q
        assert ask(incremental, q) is expected, q


@given(binding_lists, super_user_sets, st.booleans(), query_lists)
def test_batch_authorize_equals_one_by_one(acls, super_users, allow_everyone, asked):
    authorizer = StandardAuthorizer(super_users, allow_everyone, acls=stored(acls))
    for principal_query in asked:
        same_context = [Query(principal_query.context, q.operation, q.resource_type, q.name) for q in asked]
        batch = authorizer.authorize(
            principal_query.context,
            [Action(q.operation, ResourcePattern(q.resource_type, q.name)) for q in same_context],
        )
        assert batch == [ask(authorizer, q) for q in same_context]


@given(scenarios(), binding_lists, st.lists(binding_filters, max_size=3), st.booleans())
def test_authorize_after_add_and_remove_equals_the_oracle(scenario, added, filters, allow_everyone):
    initial, asked = scenario
    authorizer = built_incrementally(initial, allow_everyone=allow_everyone)
    assert all(r.succeeded for r in authorizer.add_acls(added))
    expected_set = list(dict.fromkeys([*initial, *added]))
    results = authorizer.remove_acls(filters)
    for acl_filter, result in zip(filters, results, strict=True):
        if acl_filter.is_unknown:
            assert result.error is not None
            continue
        expected_removed = {b for b in expected_set if oracle_filter_matches(acl_filter, b)}
        assert set(result.bindings) == expected_removed
        assert len(result.bindings) == len(expected_removed)
    removed = {b for r in results for b in r.bindings}
    remaining = [b for b in expected_set if b not in removed]
    assert sorted(map(str, authorizer.acls())) == sorted(map(str, remaining))
    assert authorizer.acl_count == len(remaining)
    for q in asked:
        assert ask(authorizer, q) is expect(remaining, frozenset(), allow_everyone, q), q


@given(scenarios(), super_user_sets, st.booleans(), membership_maps)
def test_authorize_by_resource_type_equals_the_oracle(scenario, super_users, allow_everyone, memberships):
    acls, asked = scenario
    authorizer = built_incrementally(acls, super_users, allow_everyone)
    authorizer.replace_memberships(memberships)
    for q in asked:
        op = q.operation
        expected = oracle_by_resource_type(
            acls, super_users, allow_everyone, q.context.principal, q.context.host, op, q.resource_type, memberships
        )
        assert authorizer.authorize_by_resource_type(q.context, op, q.resource_type) is expected, q


@given(dense_binding_lists, st.booleans(), st.sampled_from([Op.READ, Op.DESCRIBE, Op.WRITE]))
def test_authorize_by_resource_type_on_dense_acl_sets_equals_the_oracle(acls, allow_everyone, op):
    authorizer = built_incrementally(acls, allow_everyone=allow_everyone)
    context = RequestContext("User:alice", "10.0.0.1")
    expected = oracle_by_resource_type(
        acls, frozenset(), allow_everyone, "User:alice", "10.0.0.1", op, ResourceType.TOPIC
    )
    assert authorizer.authorize_by_resource_type(context, op, ResourceType.TOPIC) is expected


@given(binding_lists, st.lists(binding_filters, min_size=1, max_size=4))
def test_filter_matching_equals_the_oracle(acls, filters):
    authorizer = StandardAuthorizer(acls=stored(acls))
    for acl_filter in filters:
        expected = [b for b in acls if oracle_filter_matches(acl_filter, b)]
        listed = authorizer.acls(acl_filter)
        assert sorted(map(str, listed)) == sorted(map(str, expected)), acl_filter
        assert len(set(listed)) == len(listed)
        for binding in acls:
            assert acl_filter.matches(binding) is oracle_filter_matches(acl_filter, binding)


@given(scenarios(), super_user_sets, st.booleans(), membership_maps)
def test_explain_agrees_with_authorize(scenario, super_users, allow_everyone, memberships):
    acls, asked = scenario
    authorizer = StandardAuthorizer(super_users, allow_everyone, acls=stored(acls), memberships=memberships)

    def groups(principal: str) -> list[str]:
        return list(memberships.get(principal, ()))

    for q in asked:
        decision = authorizer.explain(q.context, Action(q.operation, ResourcePattern(q.resource_type, q.name)))
        assert decision.result is ask(authorizer, q)
        # Every ACL explain lists really matches, and it lists every one that does.
        if q.context.principal not in super_users:
            expected = {
                b
                for b in acls
                if oracle_resource_relevant(b.pattern, q.resource_type, q.name)
                and oracle_entry_matches(
                    b.entry, q.context.principal, q.context.host, q.operation, groups(q.context.principal)
                )
            }
            assert {a.binding for a in decision.matching_acls} == expected
            assert decision.relevant_acl_count == sum(
                oracle_resource_relevant(b.pattern, q.resource_type, q.name) for b in acls
            )


@given(binding_lists, st.booleans(), queries, st.data())
def test_a_matching_deny_always_wins(acls, allow_everyone, q, data):
    deny = matching_deny_for(q, data)
    authorizer = built_incrementally(acls, allow_everyone=allow_everyone)
    authorizer.add_acls([deny])
    assert ask(authorizer, q) is DENIED
    authorizer.add_acls([AclBinding(deny.pattern, AccessControlEntry(q.context.principal, "*", Op.ALL, ALLOW))])
    assert ask(authorizer, q) is DENIED


@given(binding_lists, st.booleans(), queries)
def test_super_users_are_always_allowed(acls, allow_everyone, q):
    deny_all = [
        AclBinding(ResourcePattern(q.resource_type, "*", LITERAL), AccessControlEntry("User:*", "*", Op.ALL, DENY)),
        AclBinding(
            ResourcePattern(q.resource_type, q.name or "x", PREFIXED),
            AccessControlEntry(q.context.principal, "*", Op.ALL, DENY),
        ),
    ]
    authorizer = built_incrementally([*acls, *deny_all], frozenset({q.context.principal}), allow_everyone)
    assert ask(authorizer, q) is ALLOWED
    assert authorizer.authorize_by_resource_type(q.context, q.operation, q.resource_type) is ALLOWED


@given(scenarios(), st.booleans(), bindings)
def test_adding_an_acl_that_does_not_apply_never_changes_a_decision(scenario, allow_everyone, extra):
    acls, asked = scenario
    authorizer = built_incrementally(acls, allow_everyone=allow_everyone)
    before = [ask(authorizer, q) for q in asked]
    authorizer.add_acls([extra])
    for q, was in zip(asked, before, strict=True):
        relevant = oracle_resource_relevant(extra.pattern, q.resource_type, q.name)
        matches = relevant and oracle_entry_matches(extra.entry, q.context.principal, q.context.host, q.operation)
        if not relevant:
            # An ACL on another resource never changes anything, whatever the default.
            assert ask(authorizer, q) is was, q
        elif not matches and not allow_everyone:
            # An ACL on the resource that does not match can only turn DefaultAllow into DENY.
            assert ask(authorizer, q) is was, q


@given(scenarios(), st.booleans(), bindings)
def test_add_then_remove_restores_decisions(scenario, allow_everyone, extra):
    acls, asked = scenario
    assume(extra not in acls)
    authorizer = built_incrementally(acls, allow_everyone=allow_everyone)
    before = [ask(authorizer, q) for q in asked]
    before_acls = sorted((a.id, str(a.binding)) for a in authorizer.stored_acls())
    [created] = authorizer.add_acls([extra])
    assert created.succeeded
    [removed] = authorizer.remove_acls([extra.to_filter()])
    assert removed.bindings == (extra,)
    assert sorted((a.id, str(a.binding)) for a in authorizer.stored_acls()) == before_acls
    assert [ask(authorizer, q) for q in asked] == before
    # The index took the same shape back: the same prefix lengths are probed per type.
    fresh = StandardAuthorizer(acls=authorizer.stored_acls())
    for rtype in (ResourceType.TOPIC, ResourceType.GROUP):
        table, fresh_table = authorizer.snapshot.index._tables[rtype], fresh.snapshot.index._tables[rtype]
        assert table.census == fresh_table.census
        assert table.lengths_by_head == fresh_table.lengths_by_head
        assert table.short_lengths == fresh_table.short_lengths
        assert set(table.literal) == set(fresh_table.literal)
        assert set(table.prefixed) == set(fresh_table.prefixed)


@given(
    binding_lists,
    queries,
    st.sampled_from([Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS]),
    principals,
    hosts,
)
def test_allow_implication_never_applies_to_deny(acls, q, implying_op, principal, host):
    implied = Op.DESCRIBE_CONFIGS if implying_op == Op.ALTER_CONFIGS else Op.DESCRIBE
    q = Query(q.context, implied, q.resource_type, q.name)
    authorizer = built_incrementally(acls)
    before = ask(authorizer, q)
    pattern = ResourcePattern(q.resource_type, "*", LITERAL)
    # A DENY of an implying operation, relevant to every name, for whoever: the implied operation is unaffected.
    deny = AclBinding(pattern, AccessControlEntry(principal, host, implying_op, DENY))
    authorizer.add_acls([deny])
    assert ask(authorizer, q) is before
    # ... while the same operation as ALLOW does grant it, unless a DENY of the implied operation matches.
    allow = AclBinding(pattern, AccessControlEntry(q.context.principal, "*", implying_op, ALLOW))
    authorizer.add_acls([allow])
    after = ask(authorizer, q)
    assert after is expect([*acls, deny, allow], frozenset(), False, q)
    assert after is ALLOWED or any(
        b.entry.permission_type == DENY
        and oracle_resource_relevant(b.pattern, q.resource_type, q.name)
        and oracle_entry_matches(b.entry, q.context.principal, q.context.host, implied)
        for b in acls
    )


@settings(max_examples=50)
@given(binding_lists, queries)
def test_every_concrete_operation_is_answered_like_the_oracle(acls, q):
    authorizer = StandardAuthorizer(acls=stored(acls))
    actions = [Action(op, ResourcePattern(q.resource_type, q.name)) for op in CONCRETE_OPERATIONS]
    results = authorizer.authorize(q.context, actions)
    for op, result in zip(CONCRETE_OPERATIONS, results, strict=True):
        assert result is expect(acls, frozenset(), False, Query(q.context, op, q.resource_type, q.name)), op

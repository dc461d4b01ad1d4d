"""StandardAuthorizer against Kafka's behaviour, rule by rule (SEMANTICS.md §3-§6, §8-§9, §15, §16.1).

Test names follow the rule they prove; where a Kafka test asserts the rule, its name is in the docstring or comment.
"""

from __future__ import annotations

import pytest

from kafkaguard import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclId,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizationResult,
    AuthorizerNotReadyError,
    DefaultRule,
    InvalidActionError,
    InvalidConfigError,
    MatchingAclRule,
    PatternType,
    RequestContext,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    StandardAuthorizer,
    StoredAcl,
    SuperUserRule,
)
from kafkaguard.authorizer import parse_super_users

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
USER, TXN, TOKEN = ResourceType.USER, ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN
LITERAL, PREFIXED, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
Op = AclOperation
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    Op.ALL,
    Op.READ,
    Op.WRITE,
    Op.CREATE,
    Op.DELETE,
    Op.ALTER,
    Op.DESCRIBE,
)
DESCRIBE_CONFIGS, ALTER_CONFIGS, AUTO_CREATE = Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.AUTO_CREATE
CONCRETE = [op for op in Op if op not in (Op.ANY, Op.UNKNOWN)]
HOST = "192.168.0.1"


def acl(
    resource_type: ResourceType,
    name: str,
    pattern_type: PatternType,
    principal: str,
    op: AclOperation,
    perm: AclPermissionType,
    host: str = "*",
) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type), AccessControlEntry(principal, host, op, perm))


def make(
    *bindings: AclBinding, super_users: str = "", allow_everyone: bool = False, ready: bool = True
) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users, allow_everyone, ready=ready)
    results = authorizer.add_acls(bindings)
    assert all(r.succeeded for r in results), [r.error for r in results]
    return authorizer


def action(op: AclOperation, resource_type: ResourceType, name: str, pattern_type: PatternType = LITERAL) -> Action:
    return Action(op, ResourcePattern(resource_type, name, pattern_type))


def ctx(principal: str = "User:alice", host: str = HOST) -> RequestContext:
    return RequestContext(principal, host)


def decide(
    authorizer: StandardAuthorizer,
    op: AclOperation,
    resource_type: ResourceType,
    name: str,
    principal: str = "User:alice",
    host: str = HOST,
) -> AuthorizationResult:
    [result] = authorizer.authorize(ctx(principal, host), [action(op, resource_type, name)])
    assert authorizer.explain(ctx(principal, host), action(op, resource_type, name)).result is result
    return result


def by_type(
    authorizer: StandardAuthorizer, op: AclOperation, resource_type: ResourceType, principal: str = "User:alice"
) -> AuthorizationResult:
    return authorizer.authorize_by_resource_type(ctx(principal), op, resource_type)


# =============================================================================================== super users (§3.2)


def test_super_user_is_allowed_despite_deny_all_acls():
    authorizer = make(
        acl(TOPIC, "*", LITERAL, "User:*", ALL, DENY),
        acl(TOPIC, "orders", LITERAL, "User:root", ALL, DENY),
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:root", ALL, DENY),
        super_users="User:root",
    )
    for op in CONCRETE:
        assert decide(authorizer, op, TOPIC, "orders", "User:root") is ALLOWED
        assert decide(authorizer, op, CLUSTER, "kafka-cluster", "User:root") is ALLOWED
        assert decide(authorizer, op, TOPIC, "orders", "User:alice") is DENIED


def test_super_user_is_allowed_before_the_initial_load_completes():
    # StandardAuthorizerTest.testAuthorizationPriorToCompleteInitialLoad: super users are answered at once.
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:*", ALL, DENY), super_users="User:root", ready=False)
    assert authorizer.authorize(
        ctx("User:root"), [action(READ, TOPIC, "t"), action(ALTER, CLUSTER, "kafka-cluster")]
    ) == [
        ALLOWED,
        ALLOWED,
    ]
    decision = authorizer.explain(ctx("User:root"), action(READ, TOPIC, "t"))
    assert decision.allowed
    assert decision.rule == SuperUserRule("User:root")
    assert authorizer.authorize_by_resource_type(ctx("User:root"), WRITE, TOPIC) is ALLOWED


def test_others_get_not_ready_error_before_the_initial_load_completes():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW), super_users="User:root", ready=False)
    with pytest.raises(AuthorizerNotReadyError):
        authorizer.authorize(ctx("User:alice"), [action(READ, TOPIC, "t")])
    with pytest.raises(AuthorizerNotReadyError):
        authorizer.explain(ctx("User:alice"), action(READ, TOPIC, "t"))
    with pytest.raises(AuthorizerNotReadyError):
        authorizer.authorize_by_resource_type(ctx("User:alice"), READ, TOPIC)
    # The whole call fails, with no per-action results, even for an empty batch.
    with pytest.raises(AuthorizerNotReadyError):
        authorizer.authorize(ctx("User:alice"), [])
    authorizer.complete_initial_load()
    assert authorizer.snapshot.ready
    assert decide(authorizer, READ, TOPIC, "t") is ALLOWED
    assert by_type(authorizer, READ, TOPIC) is ALLOWED


def test_super_user_comparison_is_on_the_exact_type_name_string():
    authorizer = make(super_users=" User:alice ;Group:ops")
    assert authorizer.super_users == frozenset({"User:alice", "Group:ops"})
    assert decide(authorizer, ALTER, CLUSTER, "kafka-cluster", "User:alice") is ALLOWED
    assert decide(authorizer, ALTER, CLUSTER, "kafka-cluster", "Group:ops") is ALLOWED
    for other in ("User:Alice", "Group:alice", "User:ops", "ServiceAccount:alice", "User:alice "):
        assert decide(authorizer, ALTER, CLUSTER, "kafka-cluster", other) is DENIED


def test_user_wildcard_in_super_users_is_not_a_wildcard():
    # super.users is compared as exact strings; "User:*" only makes the principal literally named * super.
    authorizer = make(super_users="User:*")
    assert decide(authorizer, READ, TOPIC, "t", "User:alice") is DENIED
    assert decide(authorizer, READ, TOPIC, "t", "User:*") is ALLOWED


def test_super_user_actions_are_still_checked():
    authorizer = make(super_users="User:root")
    with pytest.raises(InvalidActionError, match=r"Only literal resources are supported\. Got: PREFIXED"):
        authorizer.authorize(ctx("User:root"), [action(READ, TOPIC, "t", PREFIXED)])
    with pytest.raises(InvalidActionError):
        authorizer.authorize(ctx("User:root"), [action(Op.ANY, TOPIC, "t")])


# ========================================================================== argument errors (§3.1, §5 checks)


def test_non_literal_action_raises():
    authorizer = make(acl(TOPIC, "t", PREFIXED, "User:alice", READ, ALLOW))
    with pytest.raises(InvalidActionError, match=r"Only literal resources are supported\. Got: PREFIXED"):
        authorizer.authorize(ctx(), [action(READ, TOPIC, "t", PREFIXED)])
    with pytest.raises(InvalidActionError, match="Only literal resources are supported"):
        authorizer.explain(ctx(), action(READ, TOPIC, "t", PREFIXED))


@pytest.mark.parametrize("op", [Op.ANY, Op.UNKNOWN, Op.from_code(99)])
def test_non_concrete_operation_raises(op):
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:alice", ALL, ALLOW))
    with pytest.raises(InvalidActionError, match="concrete operation"):
        authorizer.authorize(ctx(), [action(op, TOPIC, "t")])
    with pytest.raises(InvalidActionError, match="concrete operation"):
        authorizer.explain(ctx(), action(op, TOPIC, "t"))


def test_an_invalid_action_fails_the_whole_batch():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:alice", ALL, ALLOW))
    with pytest.raises(InvalidActionError):
        authorizer.authorize(ctx(), [action(READ, TOPIC, "t"), action(Op.ANY, TOPIC, "t")])


# ============================================================================================ deny wins (§3.6)


def test_deny_wins_over_allow_on_the_same_pattern():
    authorizer = make(
        acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", READ, DENY),
    )
    assert decide(authorizer, READ, TOPIC, "t") is DENIED


def test_wildcard_deny_beats_exact_literal_allow():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "*", LITERAL, "User:alice", READ, DENY),
    )
    assert decide(authorizer, READ, TOPIC, "orders") is DENIED


def test_one_character_prefix_deny_beats_exact_literal_allow():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "o", PREFIXED, "User:alice", READ, DENY),
    )
    assert decide(authorizer, READ, TOPIC, "orders") is DENIED


def test_user_wildcard_deny_beats_specific_principal_allow():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW, host=HOST),
        acl(TOPIC, "orders", PREFIXED, "User:*", READ, DENY),
    )
    assert decide(authorizer, READ, TOPIC, "orders") is DENIED


def test_deny_for_another_operation_does_not_block():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "*", LITERAL, "User:alice", WRITE, DENY),
    )
    assert decide(authorizer, READ, TOPIC, "orders") is ALLOWED
    assert decide(authorizer, WRITE, TOPIC, "orders") is DENIED


def test_many_acls():
    # StandardAuthorizerTest.testAuthorizationWithManyAcls.
    authorizer = make(
        acl(TOPIC, "green2", LITERAL, "User:*", READ, ALLOW),
        acl(TOPIC, "green", PREFIXED, "User:bob", READ, ALLOW),
        acl(TOPIC, "betamax4", LITERAL, "User:bob", READ, ALLOW),
        acl(TOPIC, "betamax", LITERAL, "User:bob", READ, ALLOW),
        acl(TOPIC, "beta", PREFIXED, "User:*", READ, ALLOW),
        acl(TOPIC, "alpha", PREFIXED, "User:*", READ, ALLOW),
        acl(TOPIC, "alp", PREFIXED, "User:bob", READ, DENY),
        acl(GROUP, "*", LITERAL, "User:bob", WRITE, ALLOW),
        acl(GROUP, "wheel", LITERAL, "User:*", WRITE, DENY),
    )
    bob = ctx("User:bob")
    assert authorizer.authorize(bob, [action(READ, TOPIC, "green1"), action(WRITE, GROUP, "wheel")]) == [
        ALLOWED,
        DENIED,
    ]
    assert authorizer.authorize(
        bob, [action(READ, TOPIC, "alpha"), action(WRITE, GROUP, "arbitrary"), action(READ, TOPIC, "ala")]
    ) == [DENIED, ALLOWED, DENIED]


def test_topic_acl_with_operation_all():
    # StandardAuthorizerTest.testTopicAclWithOperationAll.
    authorizer = make(
        acl(TOPIC, "foo", LITERAL, "User:*", ALL, ALLOW),
        acl(TOPIC, "bar", PREFIXED, "User:alice", ALL, ALLOW),
        acl(TOPIC, "baz", LITERAL, "User:bob", ALL, ALLOW),
    )
    assert authorizer.authorize(
        ctx("User:alice"),
        [action(WRITE, TOPIC, "foo"), action(DESCRIBE_CONFIGS, TOPIC, "bar"), action(DESCRIBE, TOPIC, "baz")],
    ) == [ALLOWED, ALLOWED, DENIED]
    assert authorizer.authorize(
        ctx("User:bob"), [action(WRITE, TOPIC, "foo"), action(READ, TOPIC, "bar"), action(DESCRIBE, TOPIC, "baz")]
    ) == [ALLOWED, DENIED, ALLOWED]
    assert authorizer.authorize(
        ctx("User:malory"), [action(DESCRIBE, TOPIC, "foo"), action(WRITE, TOPIC, "bar"), action(READ, TOPIC, "baz")]
    ) == [ALLOWED, DENIED, DENIED]


# ============================================================================ operation implication (§3.5, §4)


@pytest.mark.parametrize("op", [DESCRIBE, READ, WRITE, DELETE, ALTER])
def test_allow_implies_describe(op):
    # StandardAuthorizerTest.testFindResultImplication.
    authorizer = make(acl(TOPIC, "foo_", PREFIXED, "User:bob", op, ALLOW))
    assert decide(authorizer, DESCRIBE, TOPIC, "foo_bar", "User:bob") is ALLOWED


def test_create_does_not_imply_describe():
    authorizer = make(acl(TOPIC, "foo_", PREFIXED, "User:bob", CREATE, ALLOW))
    assert decide(authorizer, DESCRIBE, TOPIC, "foo_bar", "User:bob") is DENIED


@pytest.mark.parametrize("op", [DESCRIBE_CONFIGS, ALTER_CONFIGS])
def test_allow_implies_describe_configs(op):
    authorizer = make(acl(TOPIC, "foo_", PREFIXED, "User:bob", op, ALLOW))
    assert decide(authorizer, DESCRIBE_CONFIGS, TOPIC, "foo_bar", "User:bob") is ALLOWED


@pytest.mark.parametrize(
    ("deny_op", "asked"),
    [(READ, DESCRIBE), (WRITE, DESCRIBE), (DELETE, DESCRIBE), (ALTER, DESCRIBE), (ALTER_CONFIGS, DESCRIBE_CONFIGS)],
)
def test_implication_never_applies_to_deny(deny_op, asked):
    # With an ALLOW ALL next to it, a DENY READ must leave DESCRIBE allowed (and deny READ itself).
    authorizer = make(
        acl(TOPIC, "foo_", PREFIXED, "User:bob", ALL, ALLOW),
        acl(TOPIC, "foo_", PREFIXED, "User:bob", deny_op, DENY),
    )
    assert decide(authorizer, asked, TOPIC, "foo_bar", "User:bob") is ALLOWED
    assert decide(authorizer, deny_op, TOPIC, "foo_bar", "User:bob") is DENIED


def test_exact_deny_matches():
    authorizer = make(
        acl(TOPIC, "foo_", PREFIXED, "User:bob", ALL, ALLOW),
        acl(TOPIC, "foo_", PREFIXED, "User:bob", DESCRIBE, DENY),
        acl(TOPIC, "foo_", PREFIXED, "User:bob", ALTER_CONFIGS, DENY),
    )
    assert decide(authorizer, DESCRIBE, TOPIC, "foo_bar", "User:bob") is DENIED
    assert decide(authorizer, ALTER_CONFIGS, TOPIC, "foo_bar", "User:bob") is DENIED
    assert decide(authorizer, DESCRIBE_CONFIGS, TOPIC, "foo_bar", "User:bob") is ALLOWED


IMPLIED_BY_ALLOW = {
    READ: {DESCRIBE},
    WRITE: {DESCRIBE},
    DELETE: {DESCRIBE},
    ALTER: {DESCRIBE},
    ALTER_CONFIGS: {DESCRIBE_CONFIGS},
    CREATE: {AUTO_CREATE},
}


@pytest.mark.parametrize("granted", [op for op in CONCRETE if op is not ALL])
def test_allow_grants_exactly_itself_and_its_implications(granted):
    authorizer = make(acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", granted, ALLOW))
    expected = {granted} | IMPLIED_BY_ALLOW.get(granted, set())
    allowed = {op for op in CONCRETE if decide(authorizer, op, CLUSTER, "kafka-cluster") is ALLOWED}
    assert allowed == expected


@pytest.mark.parametrize("denied", [op for op in CONCRETE if op is not ALL])
def test_deny_denies_exactly_itself(denied):
    authorizer = make(
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", ALL, ALLOW),
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", denied, DENY),
    )
    # The one deliberate widening: DENY CREATE also denies AUTO_CREATE (§16.1).
    expected = {denied, AUTO_CREATE} if denied is CREATE else {denied}
    refused = {op for op in CONCRETE if decide(authorizer, op, CLUSTER, "kafka-cluster") is DENIED}
    assert refused == expected


def test_allow_all_allows_every_operation():
    authorizer = make(acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", ALL, ALLOW))
    for op in CONCRETE:
        assert decide(authorizer, op, CLUSTER, "kafka-cluster") is ALLOWED


def test_deny_all_denies_every_operation():
    # AuthorizerTest.testAclInheritance: DENY ALL on the cluster denies every concrete operation.
    authorizer = make(
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", ALL, DENY),
        acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", ALL, ALLOW),
        *(acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", op, ALLOW) for op in CONCRETE if op is not ALL),
    )
    for op in CONCRETE:
        assert decide(authorizer, op, CLUSTER, "kafka-cluster") is DENIED


# ======================================================================================== AUTO_CREATE (§16.1)


@pytest.mark.parametrize(("resource_type", "name"), [(CLUSTER, "kafka-cluster"), (TOPIC, "orders")])
@pytest.mark.parametrize("granted", [CREATE, ALL])
def test_allow_create_and_allow_all_imply_auto_create(resource_type, name, granted):
    authorizer = make(acl(resource_type, name, LITERAL, "User:alice", granted, ALLOW))
    assert decide(authorizer, AUTO_CREATE, resource_type, name) is ALLOWED


@pytest.mark.parametrize(("resource_type", "name"), [(CLUSTER, "kafka-cluster"), (TOPIC, "orders")])
@pytest.mark.parametrize("refused", [CREATE, ALL])
def test_deny_create_and_deny_all_deny_auto_create(resource_type, name, refused):
    authorizer = make(
        acl(resource_type, name, LITERAL, "User:alice", AUTO_CREATE, ALLOW),
        acl(resource_type, name, LITERAL, "User:alice", refused, DENY),
    )
    assert decide(authorizer, AUTO_CREATE, resource_type, name) is DENIED


def test_deny_auto_create_does_not_deny_create():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", CREATE, ALLOW),
        acl(TOPIC, "orders", LITERAL, "User:alice", AUTO_CREATE, DENY),
    )
    assert decide(authorizer, CREATE, TOPIC, "orders") is ALLOWED
    assert decide(authorizer, AUTO_CREATE, TOPIC, "orders") is DENIED


def test_allow_auto_create_does_not_allow_create():
    authorizer = make(acl(TOPIC, "orders", LITERAL, "User:alice", AUTO_CREATE, ALLOW))
    assert decide(authorizer, AUTO_CREATE, TOPIC, "orders") is ALLOWED
    assert decide(authorizer, CREATE, TOPIC, "orders") is DENIED


def test_code_13_is_create_tokens_in_decisions():
    # §15.10: code 13 decodes to CREATE_TOKENS; ALLOW CREATE gives AUTO_CREATE (15), never code 13.
    thirteen = Op.from_code(13)
    assert thirteen is Op.CREATE_TOKENS
    authorizer = make(
        acl(USER, "User:bob", LITERAL, "User:alice", CREATE, ALLOW),
        acl(USER, "User:carol", LITERAL, "User:alice", thirteen, ALLOW),
    )
    assert decide(authorizer, Op.from_code(13), USER, "User:bob") is DENIED
    assert decide(authorizer, Op.from_code(15), USER, "User:bob") is ALLOWED
    assert decide(authorizer, Op.CREATE_TOKENS, USER, "User:carol") is ALLOWED
    assert decide(authorizer, AUTO_CREATE, USER, "User:carol") is DENIED
    assert decide(authorizer, Op.DESCRIBE_TOKENS, USER, "User:carol") is DENIED


# ============================================================================ principal matching (§3.5, §15.4)


@pytest.mark.parametrize("principal", ["User:alice", "Group:admins", "ServiceAccount:svc", "User:a:b", "Custom:*"])
def test_user_wildcard_matches_principals_of_every_type(principal):
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:*", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "t", principal) is ALLOWED


def test_group_wildcard_is_a_literal_principal():
    authorizer = make(acl(TOPIC, "t", LITERAL, "Group:*", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "t", "Group:admins") is DENIED
    assert decide(authorizer, READ, TOPIC, "t", "User:alice") is DENIED
    assert decide(authorizer, READ, TOPIC, "t", "Group:*") is ALLOWED


def test_principal_type_and_name_are_compared_exactly():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "t", "User:alice") is ALLOWED
    for other in ("Group:alice", "User:Alice", "user:alice", "User:alice2", "User:alic"):
        assert decide(authorizer, READ, TOPIC, "t", other) is DENIED


def test_principal_name_with_colons():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:CN=a:b", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "t", "User:CN=a:b") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "t", "User:CN=a") is DENIED


# ==================================================================================== host matching (§2, §3.5)


def test_host_star_is_the_only_wildcard_and_a_cidr_block_a_network():
    authorizer = make(
        acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW, host="192.168.0.*"),
        acl(TOPIC, "u", LITERAL, "User:alice", READ, ALLOW, host="192.168.0.0/24"),
        acl(TOPIC, "v", LITERAL, "User:alice", READ, ALLOW, host="*"),
    )
    assert decide(authorizer, READ, TOPIC, "t") is DENIED
    # Kafka 3.9 compares "192.168.0.0/24" as text (never matching); kafkaguard reads it as KIP-1276's block
    # (docs/semantics.md, deliberate differences; tests/authorizer/test_cidr.py).
    assert decide(authorizer, READ, TOPIC, "u") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "u", host="192.168.1.1") is DENIED
    assert decide(authorizer, READ, TOPIC, "v") is ALLOWED


def test_host_is_compared_as_an_exact_string():
    authorizer = make(
        acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW, host="10.0.0.1"),
        acl(TOPIC, "t", LITERAL, "User:alice", WRITE, DENY, host="10.0.0.2"),
    )
    assert decide(authorizer, READ, TOPIC, "t", host="10.0.0.1") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "t", host="10.0.0.2") is DENIED
    assert decide(authorizer, READ, TOPIC, "t", host="010.0.0.1") is DENIED
    # The DENY for another host does not apply here.
    authorizer.add_acls([acl(TOPIC, "t", LITERAL, "User:alice", WRITE, ALLOW)])
    assert decide(authorizer, WRITE, TOPIC, "t", host="10.0.0.1") is ALLOWED
    assert decide(authorizer, WRITE, TOPIC, "t", host="10.0.0.2") is DENIED


def test_ipv6_host_text_is_compared_exactly():
    # Java prints IPv6 uncompressed (0:0:0:0:0:0:0:1); a compressed "::1" ACL is a different string.
    authorizer = make(
        acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW, host="0:0:0:0:0:0:0:1"),
        acl(TOPIC, "u", LITERAL, "User:alice", READ, ALLOW, host="::1"),
    )
    assert decide(authorizer, READ, TOPIC, "t", host="0:0:0:0:0:0:0:1") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "t", host="::1") is DENIED
    assert decide(authorizer, READ, TOPIC, "u", host="0:0:0:0:0:0:0:1") is DENIED
    assert decide(authorizer, READ, TOPIC, "u", host="::1") is ALLOWED


# ==================================================================================== resource matching (§3.4)


def test_literal_star_is_the_wildcard():
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:alice", READ, ALLOW))
    for name in ("orders", "*", "x", "a*b"):
        assert decide(authorizer, READ, TOPIC, name) is ALLOWED
    assert decide(authorizer, READ, GROUP, "orders") is DENIED


def test_prefixed_star_is_an_ordinary_prefix():
    authorizer = make(acl(TOPIC, "*", PREFIXED, "User:alice", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "orders") is DENIED
    assert decide(authorizer, READ, TOPIC, "*orders") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "*") is ALLOWED


def test_literal_that_is_a_prefix_of_the_name_does_not_match():
    authorizer = make(acl(TOPIC, "ord", LITERAL, "User:alice", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "orders") is DENIED
    assert decide(authorizer, READ, TOPIC, "ord") is ALLOWED


def test_prefixed_matches_names_that_start_with_it():
    authorizer = make(acl(TOPIC, "ord", PREFIXED, "User:alice", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "ord") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "orders") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "or") is DENIED
    assert decide(authorizer, READ, TOPIC, "Orders") is DENIED
    assert decide(authorizer, READ, TOPIC, "xord") is DENIED


def test_long_prefixes_sharing_a_head():
    # Prefixes of different lengths that share their first characters, as the index keys them.
    authorizer = make(
        acl(TOPIC, "orders-eu", PREFIXED, "User:alice", READ, ALLOW),
        acl(TOPIC, "orders-us-west", PREFIXED, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "or", PREFIXED, "User:alice", DELETE, ALLOW),
    )
    assert decide(authorizer, READ, TOPIC, "orders-eu-1") is ALLOWED
    assert decide(authorizer, WRITE, TOPIC, "orders-eu-1") is DENIED
    assert decide(authorizer, WRITE, TOPIC, "orders-us-west-2") is ALLOWED
    assert decide(authorizer, DELETE, TOPIC, "orders-us-west-2") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "orders-us") is DENIED
    assert decide(authorizer, DELETE, TOPIC, "o") is DENIED


def test_empty_resource_name_is_matched_only_by_the_wildcard():
    # AuthorizerTest.testAuthorizeWithEmptyResourceName.
    authorizer = make(
        acl(GROUP, "a", PREFIXED, "User:alice", READ, ALLOW),
        acl(GROUP, "x", LITERAL, "User:alice", READ, ALLOW),
    )
    assert decide(authorizer, READ, GROUP, "") is DENIED
    authorizer.add_acls([acl(GROUP, "*", LITERAL, "User:*", READ, ALLOW)])
    assert decide(authorizer, READ, GROUP, "") is ALLOWED


def test_resource_type_must_match():
    authorizer = make(
        acl(TOPIC, "*", LITERAL, "User:alice", ALL, ALLOW),
        acl(GROUP, "*", LITERAL, "User:alice", ALL, DENY),
    )
    assert decide(authorizer, READ, TOPIC, "x") is ALLOWED
    assert decide(authorizer, READ, GROUP, "x") is DENIED
    assert decide(authorizer, DESCRIBE, TXN, "x") is DENIED
    assert decide(authorizer, DESCRIBE, TOKEN, "x") is DENIED


def test_resource_names_are_case_sensitive():
    authorizer = make(acl(TOPIC, "Orders", LITERAL, "User:alice", READ, ALLOW))
    assert decide(authorizer, READ, TOPIC, "orders") is DENIED
    assert decide(authorizer, READ, TOPIC, "Orders") is ALLOWED


# ===================================================================== allow.everyone.if.no.acl.found (§3.6, §15.1)


def test_allow_everyone_if_no_acl_found_config_enabled():
    # StandardAuthorizerTest.testAllowEveryoneIfNoAclFoundConfigEnabled: Bob is denied on topic1, which has an ACL
    # only for Alice, and allowed on topic2, which has none.
    authorizer = make(acl(TOPIC, "topic1", LITERAL, "User:alice", READ, ALLOW), allow_everyone=True)
    assert decide(authorizer, READ, TOPIC, "topic1", "User:bob") is DENIED
    assert decide(authorizer, READ, TOPIC, "topic2", "User:bob") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "topic1", "User:alice") is ALLOWED


def test_allow_everyone_if_no_acl_found_config_disabled():
    authorizer = make(acl(TOPIC, "topic1", LITERAL, "User:alice", READ, ALLOW), allow_everyone=False)
    assert decide(authorizer, READ, TOPIC, "topic1", "User:bob") is DENIED
    assert decide(authorizer, READ, TOPIC, "topic2", "User:bob") is DENIED


@pytest.mark.parametrize(
    "relevant",
    [
        acl(TOPIC, "to", PREFIXED, "User:bob", WRITE, DENY),
        acl(TOPIC, "*", LITERAL, "User:bob", READ, ALLOW),
        acl(TOPIC, "topic1", LITERAL, "User:alice", READ, ALLOW, host="10.9.9.9"),
        acl(TOPIC, "topic1", LITERAL, "User:alice", CREATE, ALLOW),
        acl(TOPIC, "topic1", LITERAL, "Group:*", READ, DENY),
    ],
    ids=["other-principal-prefix-deny", "other-principal-wildcard", "other-host", "other-operation", "group-star"],
)
def test_any_relevant_acl_turns_the_default_into_deny(relevant):
    authorizer = make(relevant, allow_everyone=True)
    assert decide(authorizer, READ, TOPIC, "topic1", "User:alice") is DENIED


def test_acls_on_other_resources_keep_the_default():
    authorizer = make(
        acl(TOPIC, "topic1", LITERAL, "User:alice", READ, DENY),
        acl(TOPIC, "topic10", PREFIXED, "User:alice", READ, DENY),
        acl(TOPIC, "top", LITERAL, "User:alice", READ, DENY),
        acl(GROUP, "*", LITERAL, "User:alice", READ, DENY),
        allow_everyone=True,
    )
    assert decide(authorizer, READ, TOPIC, "topic2") is ALLOWED
    assert decide(authorizer, READ, TOPIC, "topic1") is DENIED


# =================================================================================== batches and snapshots (§3)


def test_batch_results_follow_action_order():
    authorizer = make(acl(TOPIC, "a", LITERAL, "User:alice", READ, ALLOW))
    actions = [
        action(READ, TOPIC, "a"),
        action(READ, TOPIC, "b"),
        action(DESCRIBE, TOPIC, "a"),
        action(WRITE, TOPIC, "a"),
    ]
    assert authorizer.authorize(ctx(), actions) == [ALLOWED, DENIED, ALLOWED, DENIED]
    assert authorizer.authorize(ctx(), []) == []
    assert authorizer.authorize_one(ctx(), action(READ, TOPIC, "a")) is ALLOWED


# ============================================================================ authorize_by_resource_type (§5)


@pytest.mark.parametrize(
    ("op", "resource_type", "message"),
    [
        (READ, ResourceType.ANY, "Must specify a non-filter resource type for authorizeByResourceType"),
        (READ, ResourceType.UNKNOWN, "Unknown resource type"),
        (READ, ResourceType.from_code(70), "Unknown resource type"),
        (Op.ANY, TOPIC, "Must specify a non-filter operation type for authorizeByResourceType"),
        (Op.UNKNOWN, TOPIC, "Unknown operation type"),
        (Op.from_code(70), TOPIC, "Unknown operation type"),
    ],
)
def test_by_resource_type_argument_errors(op, resource_type, message):
    authorizer = make(super_users="User:alice")
    with pytest.raises(InvalidActionError) as info:
        authorizer.authorize_by_resource_type(ctx(), op, resource_type)
    assert str(info.value) == message


def test_by_resource_type_probes_hardcode_with_implication():
    # A wildcard ALLOW READ lets the probe allow DESCRIBE (implication) although the scan has no implication.
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:alice", READ, ALLOW))
    assert by_type(authorizer, DESCRIBE, TOPIC) is ALLOWED


@pytest.mark.parametrize("prefix", ["h", "hard", "hardcode"])
def test_by_resource_type_probe_matches_prefixes_of_hardcode(prefix):
    # The probe's READ allow on a prefix of "hardcode" gives DESCRIBE through implication; a scan would not.
    authorizer = make(acl(TOPIC, prefix, PREFIXED, "User:alice", READ, ALLOW))
    assert by_type(authorizer, DESCRIBE, TOPIC) is ALLOWED


def test_by_resource_type_probe_allows_the_literal_hardcode_topic():
    authorizer = make(acl(TOPIC, "hardcode", LITERAL, "User:alice", WRITE, ALLOW))
    assert by_type(authorizer, DESCRIBE, TOPIC) is ALLOWED
    other = make(acl(TOPIC, "hardcoded", LITERAL, "User:alice", WRITE, ALLOW))
    assert by_type(other, DESCRIBE, TOPIC) is DENIED
    assert by_type(other, WRITE, TOPIC) is ALLOWED


def test_by_resource_type_scan_has_no_implication():
    authorizer = make(acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW))
    assert by_type(authorizer, READ, TOPIC) is ALLOWED
    assert by_type(authorizer, DESCRIBE, TOPIC) is DENIED


def test_by_resource_type_all_operation_ace():
    # BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllOperationAce.
    authorizer = make(acl(TOPIC, "orders", LITERAL, "User:alice", ALL, ALLOW))
    assert by_type(authorizer, WRITE, TOPIC) is ALLOWED
    assert by_type(authorizer, WRITE, GROUP) is DENIED


def test_by_resource_type_all_host_and_all_principal_ace():
    # BaseAuthorizerTest.testAuthorizeByResourceTypeWithAllHostAce / ...WithAllPrincipalAce.
    authorizer = make(acl(TOPIC, "orders", LITERAL, "User:*", WRITE, ALLOW))
    assert by_type(authorizer, WRITE, TOPIC, "Group:x") is ALLOWED
    host_only = make(acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW, host="10.0.0.9"))
    assert by_type(host_only, WRITE, TOPIC) is DENIED
    at_host = make(acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW, host=HOST))
    assert by_type(at_host, WRITE, TOPIC) is ALLOWED


def test_by_resource_type_ignores_other_principals():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:bob", WRITE, ALLOW), acl(TOPIC, "x", LITERAL, "Group:*", WRITE, ALLOW)
    )
    assert by_type(authorizer, WRITE, TOPIC) is DENIED
    assert by_type(authorizer, WRITE, TOPIC, "User:bob") is ALLOWED


def test_by_resource_type_unrelated_deny_does_not_dominate_allow():
    # BaseAuthorizerTest.testAuthorizeByResourceTypeIsolationUnrelatedDenyWontDominateAllow.
    authorizer = make(
        acl(TOPIC, "sb1", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "sb2", LITERAL, "User:alice", READ, DENY),
        acl(GROUP, "gr", PREFIXED, "User:alice", READ, DENY),
        acl(TOPIC, "s", LITERAL, "User:alice", READ, DENY),
    )
    assert by_type(authorizer, READ, TOPIC) is ALLOWED
    assert by_type(authorizer, READ, GROUP) is DENIED


def test_by_resource_type_deny_takes_precedence_on_the_same_name():
    # BaseAuthorizerTest.testAuthorizeByResourceTypeDenyTakesPrecedence.
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, DENY),
    )
    assert by_type(authorizer, WRITE, TOPIC) is DENIED


def test_by_resource_type_prefixed_deny_dominates():
    # BaseAuthorizerTest.testAuthorizeByResourceTypePrefixedResourceDenyDominate.
    authorizer = make(
        acl(TOPIC, "abcde", PREFIXED, "User:alice", READ, ALLOW),
        acl(TOPIC, "abcd", PREFIXED, "User:alice", READ, DENY),
    )
    assert by_type(authorizer, READ, TOPIC) is DENIED
    authorizer.add_acls([acl(TOPIC, "abc", PREFIXED, "User:alice", READ, ALLOW)])
    assert by_type(authorizer, READ, TOPIC) is ALLOWED
    authorizer.add_acls([acl(TOPIC, "a", PREFIXED, "User:alice", READ, DENY)])
    assert by_type(authorizer, READ, TOPIC) is DENIED
    authorizer.add_acls([acl(TOPIC, "b", LITERAL, "User:alice", READ, ALLOW)])
    assert by_type(authorizer, READ, TOPIC) is ALLOWED


def test_by_resource_type_prefix_deny_cancels_literal_allow_it_covers():
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "ord", PREFIXED, "User:alice", WRITE, DENY),
    )
    assert by_type(authorizer, WRITE, TOPIC) is DENIED
    equal = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "orders", PREFIXED, "User:alice", WRITE, DENY),
    )
    assert by_type(equal, WRITE, TOPIC) is DENIED


def test_by_resource_type_literal_deny_does_not_cancel_prefixed_allow():
    authorizer = make(
        acl(TOPIC, "orders", PREFIXED, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, DENY),
    )
    assert by_type(authorizer, WRITE, TOPIC) is ALLOWED
    # A literal deny only cancels the literal allow of the very same name.
    literal = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, DENY),
        acl(TOPIC, "ord", LITERAL, "User:alice", WRITE, DENY),
    )
    assert by_type(literal, WRITE, TOPIC) is DENIED


def test_by_resource_type_longer_prefix_deny_does_not_cancel_shorter_allow():
    authorizer = make(
        acl(TOPIC, "ord", PREFIXED, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "orders", PREFIXED, "User:alice", WRITE, DENY),
    )
    assert by_type(authorizer, WRITE, TOPIC) is ALLOWED


def test_by_resource_type_wildcard_deny_dominates():
    # BaseAuthorizerTest.testAuthorizeByResourceTypeWildcardResourceDenyDominate.
    authorizer = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "pay", PREFIXED, "User:alice", WRITE, ALLOW),
    )
    assert by_type(authorizer, WRITE, TOPIC) is ALLOWED
    authorizer.add_acls([acl(TOPIC, "*", LITERAL, "User:*", WRITE, DENY)])
    assert by_type(authorizer, WRITE, TOPIC) is DENIED
    # A wildcard ALLOW does not help either: the DENY is returned as soon as it is seen.
    authorizer.add_acls([acl(TOPIC, "*", LITERAL, "User:alice", WRITE, ALLOW)])
    assert by_type(authorizer, WRITE, TOPIC) is DENIED


def test_by_resource_type_wildcard_allow_beats_prefix_denies():
    authorizer = make(
        acl(TOPIC, "*", LITERAL, "User:alice", WRITE, ALLOW),
        acl(TOPIC, "h", PREFIXED, "User:alice", WRITE, DENY),
    )
    # The probe is denied by the "h" prefix, but the scan's wildcard allow wins.
    assert decide(authorizer, WRITE, TOPIC, "hardcode") is DENIED
    assert by_type(authorizer, WRITE, TOPIC) is ALLOWED


def test_by_resource_type_super_user_has_access():
    # BaseAuthorizerTest.testAuthorizeByResourceTypeSuperUserHasAccess.
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:*", ALL, DENY), super_users="User:root")
    assert by_type(authorizer, WRITE, TOPIC, "User:root") is ALLOWED
    assert by_type(authorizer, WRITE, TOPIC) is DENIED


def test_by_resource_type_no_acl_found_override():
    # AuthorizerTest.testAuthorizeByResourceTypeNoAclFoundOverride.
    assert by_type(make(allow_everyone=True), READ, TOPIC) is ALLOWED
    assert by_type(make(allow_everyone=False), READ, TOPIC) is DENIED


def test_by_resource_type_default_allow_through_the_probe_despite_acls_elsewhere():
    # The probe asks about "hardcode"; with no ACL relevant to it the allow.everyone default answers ALLOW,
    # even though every ACL the principal has is a DENY.
    authorizer = make(acl(TOPIC, "orders", LITERAL, "User:alice", READ, DENY), allow_everyone=True)
    assert by_type(authorizer, READ, TOPIC) is ALLOWED
    authorizer.add_acls([acl(TOPIC, "hard", PREFIXED, "User:bob", READ, ALLOW)])
    assert by_type(authorizer, READ, TOPIC) is DENIED


def test_by_resource_type_auto_create():
    # §16.1 carried into the scan: CREATE stands for AUTO_CREATE, for ALLOW and DENY alike.
    allow = make(acl(TOPIC, "orders", LITERAL, "User:alice", CREATE, ALLOW))
    assert by_type(allow, AUTO_CREATE, TOPIC) is ALLOWED
    denied = make(
        acl(TOPIC, "orders", LITERAL, "User:alice", AUTO_CREATE, ALLOW),
        acl(TOPIC, "ord", PREFIXED, "User:alice", CREATE, DENY),
    )
    assert by_type(denied, AUTO_CREATE, TOPIC) is DENIED
    auto_only = make(acl(TOPIC, "orders", LITERAL, "User:alice", AUTO_CREATE, ALLOW))
    assert by_type(auto_only, CREATE, TOPIC) is DENIED


# ================================================================================ creating ACLs (§8, §15.8)


def test_duplicate_creation_is_idempotent():
    authorizer = make()
    binding = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW)
    first = authorizer.add_acls([binding, binding])
    assert all(r.succeeded for r in first)
    assert first[0].acl_id is not None
    assert first[0].acl_id == first[1].acl_id
    second = authorizer.add_acls([binding])
    assert second[0].succeeded
    assert second[0].acl_id == first[0].acl_id
    assert authorizer.acl_count == 1
    assert authorizer.acls() == [binding]


def test_invalid_binding_fails_alone():
    # AclControlManagerTest.testCreateAclDeleteAcl: three successes and one INVALID_REQUEST in one request.
    authorizer = make()
    good = [acl(TOPIC, n, LITERAL, "User:alice", READ, ALLOW) for n in ("a", "b", "c")]
    bad = acl(CLUSTER, "not-the-cluster", LITERAL, "User:alice", ALTER, ALLOW)
    results = authorizer.add_acls([good[0], bad, good[1], good[2]])
    assert [r.succeeded for r in results] == [True, False, True, True]
    assert [r.binding for r in results] == [good[0], bad, good[1], good[2]]
    assert str(results[1].error) == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert results[1].acl_id is None
    assert sorted(b.pattern.name for b in authorizer.acls()) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(TOPIC, "", LITERAL, "User:alice", READ, ALLOW), "Invalid empty resource name"),
        (acl(TOPIC, "t", LITERAL, "alice", READ, ALLOW), "Invalid principal 'alice'"),
        (acl(TOPIC, "t", LITERAL, "User:alice", Op.from_code(33), ALLOW), "Invalid operation UNKNOWN"),
    ],
)
def test_creation_errors_name_the_problem(binding, message):
    authorizer = make()
    [result] = authorizer.add_acls([binding])
    assert not result.succeeded
    assert str(result.error).startswith(message)
    assert authorizer.acl_count == 0


def test_created_ids_come_from_the_id_factory():
    counter = iter(range(100))
    authorizer = StandardAuthorizer(id_factory=lambda: AclId(f"id-{next(counter)}"))
    results = authorizer.add_acls(
        [acl(TOPIC, "a", LITERAL, "User:alice", READ, ALLOW), acl(TOPIC, "b", LITERAL, "User:alice", READ, ALLOW)]
    )
    assert [r.acl_id for r in results] == ["id-0", "id-1"]
    assert {a.id for a in authorizer.stored_acls()} == {"id-0", "id-1"}


# ================================================================================== listing ACLs (§6)


def test_list_acls_with_filters():
    # StandardAuthorizerTest.testListAcls.
    foo_read = acl(TOPIC, "foo_", PREFIXED, "User:bob", READ, ALLOW)
    foo_write = acl(TOPIC, "foo_", PREFIXED, "User:bob", WRITE, ALLOW)
    bar_dc = acl(GROUP, "bar", LITERAL, "User:*", DESCRIBE_CONFIGS, DENY)
    bar_ac = acl(GROUP, "bar", LITERAL, "User:*", ALTER_CONFIGS, DENY)
    authorizer = make(foo_read, foo_write, bar_dc, bar_ac)
    assert set(authorizer.acls()) == {foo_read, foo_write, bar_dc, bar_ac}
    authorizer.remove_acls([foo_write.to_filter()])
    assert set(authorizer.acls()) == {foo_read, bar_dc, bar_ac}
    topics = AclBindingFilter(ResourcePatternFilter(TOPIC, None, PatternType.ANY), AccessControlEntryFilter.ANY)
    assert authorizer.acls(topics) == [foo_read]


def test_get_acls_by_principal_is_exact():
    # AuthorizerTest.testGetAclsPrincipal.
    alice = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW)
    anyone = acl(TOPIC, "t", LITERAL, "User:*", WRITE, ALLOW)
    authorizer = make(alice, anyone)

    def by_principal(principal: str) -> list[AclBinding]:
        entry_filter = AccessControlEntryFilter(principal, None, Op.ANY, AclPermissionType.ANY)
        return authorizer.acls(AclBindingFilter(ResourcePatternFilter.ANY, entry_filter))

    assert by_principal("User:alice") == [alice]
    assert by_principal("User:*") == [anyone]
    assert by_principal("User:bob") == []


def test_acls_filter_pattern_semantics():
    # AuthorizerTest.testAclsFilter shape: LITERAL "*" lists only the wildcard; ANY+name skips the wildcard;
    # MATCH+name lists everything relevant.
    wildcard = acl(TOPIC, "*", LITERAL, "User:alice", READ, ALLOW)
    literal = acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW)
    prefixed = acl(TOPIC, "ord", PREFIXED, "User:alice", READ, ALLOW)
    prefixed_same = acl(TOPIC, "orders", PREFIXED, "User:alice", READ, ALLOW)
    longer = acl(TOPIC, "orders-x", PREFIXED, "User:alice", READ, ALLOW)
    group = acl(GROUP, "orders", LITERAL, "User:alice", READ, ALLOW)
    authorizer = make(wildcard, literal, prefixed, prefixed_same, longer, group)

    def listed(resource_type: ResourceType, name: str | None, pattern_type: PatternType) -> set[AclBinding]:
        pattern_filter = ResourcePatternFilter(resource_type, name, pattern_type)
        return set(authorizer.acls(AclBindingFilter(pattern_filter, AccessControlEntryFilter.ANY)))

    assert listed(TOPIC, "*", LITERAL) == {wildcard}
    assert listed(TOPIC, "orders", LITERAL) == {literal}
    assert listed(TOPIC, "orders", PatternType.ANY) == {literal, prefixed_same}
    assert listed(TOPIC, "orders", MATCH) == {wildcard, literal, prefixed, prefixed_same}
    assert listed(ResourceType.ANY, "orders", MATCH) == {wildcard, literal, prefixed, prefixed_same, group}
    assert listed(TOPIC, None, PREFIXED) == {prefixed, prefixed_same, longer}
    assert listed(TOPIC, None, MATCH) == {wildcard, literal, prefixed, prefixed_same, longer}
    assert listed(ResourceType.UNKNOWN, None, PatternType.ANY) == set()
    assert listed(TOPIC, None, PatternType.UNKNOWN) == set()


# ================================================================================ deleting ACLs (§9, §15.8)


def test_delete_with_several_filters_lists_an_acl_under_each():
    # AclControlManagerTest.testDeleteDedupe: listed under every matching filter, removed once.
    shared = acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW)
    other = acl(TOPIC, "orders", LITERAL, "User:bob", READ, ALLOW)
    authorizer = make(shared, other)
    by_alice = AclBindingFilter(
        ResourcePatternFilter.ANY, AccessControlEntryFilter("User:alice", None, Op.ANY, AclPermissionType.ANY)
    )
    results = authorizer.remove_acls([shared.to_filter(), by_alice, AclBindingFilter.ANY])
    assert results[0].bindings == (shared,)
    assert results[1].bindings == (shared,)
    assert set(results[2].bindings) == {shared, other}
    shared_ids = {a.id for r in results for a in r.removed_acls if a.binding == shared}
    assert len(shared_ids) == 1
    assert authorizer.acls() == []


def test_delete_lists_the_state_before_the_request():
    a = acl(TOPIC, "a", LITERAL, "User:alice", READ, ALLOW)
    authorizer = make(a)
    results = authorizer.remove_acls([a.to_filter(), a.to_filter()])
    assert [r.bindings for r in results] == [(a,), (a,)]


def test_delete_filter_matching_nothing_is_empty_success():
    authorizer = make(acl(TOPIC, "a", LITERAL, "User:alice", READ, ALLOW))
    [result] = authorizer.remove_acls([acl(TOPIC, "b", LITERAL, "User:alice", READ, ALLOW).to_filter()])
    assert result.error is None
    assert result.removed_acls == ()
    assert authorizer.acl_count == 1


def test_delete_with_unknown_filter_parts_is_an_error_for_that_filter_only():
    a = acl(TOPIC, "a", LITERAL, "User:alice", READ, ALLOW)
    authorizer = make(a)
    unknown_pattern = AclBindingFilter(
        ResourcePatternFilter(ResourceType.UNKNOWN, None, PatternType.ANY), AccessControlEntryFilter.ANY
    )
    unknown_entry = AclBindingFilter(
        ResourcePatternFilter.ANY, AccessControlEntryFilter(None, None, Op.from_code(50), AclPermissionType.ANY)
    )
    results = authorizer.remove_acls([unknown_pattern, unknown_entry, a.to_filter()])
    assert str(results[0].error) == "Unknown patternFilter."
    assert str(results[1].error) == "Unknown entryFilter."
    assert results[2].error is None
    assert results[2].bindings == (a,)
    assert authorizer.acl_count == 0


def test_match_delete_removes_everything_that_applies_to_the_name():
    # §9.8: the MATCH foot-gun. Deleting (TOPIC, "orders-eu", MATCH) also removes the topic wildcard and every
    # PREFIXED ACL whose name is a prefix of "orders-eu", for every principal.
    doomed = [
        acl(TOPIC, "orders-eu", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "*", LITERAL, "User:bob", WRITE, DENY),
        acl(TOPIC, "orders", PREFIXED, "User:carol", READ, ALLOW),
        acl(TOPIC, "o", PREFIXED, "User:*", DESCRIBE, ALLOW),
        acl(TOPIC, "orders-eu", PREFIXED, "User:alice", ALL, ALLOW),
    ]
    kept = [
        acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "orders-eu-1", PREFIXED, "User:alice", READ, ALLOW),
        acl(TOPIC, "*", PREFIXED, "User:alice", READ, ALLOW),
        acl(GROUP, "orders-eu", LITERAL, "User:alice", READ, ALLOW),
    ]
    authorizer = make(*doomed, *kept)
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders-eu", MATCH), AccessControlEntryFilter.ANY)
    [result] = authorizer.remove_acls([match])
    assert set(result.bindings) == set(doomed)
    assert set(authorizer.acls()) == set(kept)


def test_match_delete_with_null_name_removes_every_acl_of_the_type():
    # SaslSslAdminIntegrationTest.testAclDelete: (TOPIC, null, MATCH) deletes all topic ACLs.
    topic_acls = [
        acl(TOPIC, "a", LITERAL, "User:alice", READ, ALLOW),
        acl(TOPIC, "b", PREFIXED, "User:bob", WRITE, DENY),
    ]
    group_acl = acl(GROUP, "a", LITERAL, "User:alice", READ, ALLOW)
    authorizer = make(*topic_acls, group_acl)
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, None, MATCH), AccessControlEntryFilter.ANY)
    [result] = authorizer.remove_acls([match])
    assert set(result.bindings) == set(topic_acls)
    assert authorizer.acls() == [group_acl]


def test_delete_then_recreate_gets_a_new_id_and_decides_again():
    binding = acl(TOPIC, "t", LITERAL, "User:alice", READ, DENY)
    authorizer = make(binding, acl(TOPIC, "t", LITERAL, "User:alice", ALL, ALLOW))
    assert decide(authorizer, READ, TOPIC, "t") is DENIED
    [removed] = authorizer.remove_acls([binding.to_filter()])
    assert decide(authorizer, READ, TOPIC, "t") is ALLOWED
    [created] = authorizer.add_acls([binding])
    assert created.acl_id != removed.removed_acls[0].id
    assert decide(authorizer, READ, TOPIC, "t") is DENIED


# ======================================================================== apply_changes and replace_acls


def stored_acl(acl_id: str, binding: AclBinding) -> StoredAcl:
    return StoredAcl(AclId(acl_id), binding)


def test_apply_changes_removes_then_adds_in_one_swap():
    allow = stored_acl("1", acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW))
    deny = stored_acl("2", acl(TOPIC, "t", LITERAL, "User:alice", READ, DENY))
    authorizer = StandardAuthorizer(acls=[allow])
    assert decide(authorizer, READ, TOPIC, "t") is ALLOWED
    before = authorizer.snapshot
    authorizer.apply_changes(added=[deny], removed=[AclId("1"), AclId("missing")])
    assert authorizer.stored_acls() == [deny]
    assert decide(authorizer, READ, TOPIC, "t") is DENIED
    # The old snapshot is untouched (readers holding it keep a consistent view).
    assert [a.binding for a in before.index] == [allow.binding]


def test_apply_changes_ignores_duplicate_additions():
    first = stored_acl("1", acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW))
    same_binding = stored_acl("2", first.binding)
    same_id = stored_acl("1", acl(TOPIC, "u", LITERAL, "User:alice", READ, ALLOW))
    authorizer = StandardAuthorizer(acls=[first])
    authorizer.apply_changes(added=[same_binding, same_id])
    assert authorizer.stored_acls() == [first]


def test_replace_acls_swaps_the_whole_set():
    authorizer = make(acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW))
    replacement = stored_acl("9", acl(GROUP, "g", LITERAL, "User:alice", READ, ALLOW))
    authorizer.replace_acls([replacement])
    assert authorizer.stored_acls() == [replacement]
    assert decide(authorizer, READ, TOPIC, "t") is DENIED
    assert decide(authorizer, READ, GROUP, "g") is ALLOWED


def test_initial_acls_are_deduplicated_by_binding():
    binding = acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW)
    authorizer = StandardAuthorizer(acls=[stored_acl("1", binding), stored_acl("2", binding)])
    assert [a.id for a in authorizer.stored_acls()] == ["1"]


# ============================================================================================ explain (§3.7)


def test_explain_super_user():
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:*", ALL, DENY), super_users="User:root")
    decision = authorizer.explain(ctx("User:root"), action(READ, TOPIC, "t"))
    assert decision.result is ALLOWED
    assert decision.rule == SuperUserRule("User:root")
    assert str(decision.rule) == "SuperUser"
    assert decision.matching_acls == ()
    assert decision.explanation() == (
        "ALLOWED: User:root from 192.168.0.1 READ on Topic:LITERAL:t, because User:root is a super user "
        "(super users bypass every ACL)."
    )


def test_explain_matching_acls_most_specific_first_and_deny_rule():
    wildcard_allow = acl(TOPIC, "*", LITERAL, "User:*", READ, ALLOW)
    short_deny = acl(TOPIC, "o", PREFIXED, "User:alice", READ, DENY)
    long_allow = acl(TOPIC, "orders-", PREFIXED, "User:alice", ALL, ALLOW)
    mid_deny = acl(TOPIC, "ord", PREFIXED, "User:*", READ, DENY)
    literal_allow = acl(TOPIC, "orders-eu", LITERAL, "User:alice", READ, ALLOW)
    unrelated = acl(TOPIC, "orders-eu", LITERAL, "User:bob", READ, ALLOW)
    other_op = acl(TOPIC, "orders-eu", LITERAL, "User:alice", WRITE, DENY)
    authorizer = make(wildcard_allow, short_deny, long_allow, mid_deny, literal_allow, unrelated, other_op)
    decision = authorizer.explain(ctx(), action(READ, TOPIC, "orders-eu"))
    assert decision.result is DENIED
    assert not decision.allowed
    assert [a.binding for a in decision.matching_acls] == [
        literal_allow,
        long_allow,
        mid_deny,
        short_deny,
        wildcard_allow,
    ]
    assert decision.relevant_acl_count == 7
    # The rule names the most specific matching DENY.
    assert isinstance(decision.rule, MatchingAclRule)
    assert decision.rule.acl.binding == mid_deny
    acl_id = decision.rule.acl.id
    assert str(decision.rule) == f"MatchingAcl(acl={mid_deny}, id={acl_id})"
    assert decision.explanation() == (
        f"DENIED: User:alice from 192.168.0.1 READ on Topic:LITERAL:orders-eu, because ACL {acl_id} denies it "
        "(a matching DENY always wins): DENY READ for User:* from host * on Topic:PREFIXED:ord."
    )


def test_explain_names_the_allow_kafka_names_the_last_in_its_scan_order():
    """Kafka's StandardAuthorizerData.checkSection overwrites the allowing ACL on every match while it walks the
    exact name, then shorter prefixes, then ``*``: its audit log names the LAST matching ALLOW (here the prefix),
    and kafkaguard names the same one, so usage counts per ACL agree with Kafka's log (tests/kafka)."""
    literal_allow = acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW)
    prefix_allow = acl(TOPIC, "ord", PREFIXED, "User:alice", ALL, ALLOW)
    wildcard_other = acl(TOPIC, "*", LITERAL, "User:bob", READ, ALLOW)
    authorizer = make(prefix_allow, literal_allow, wildcard_other)
    decision = authorizer.explain(ctx(), action(DESCRIBE, TOPIC, "orders"))
    assert decision.result is ALLOWED
    assert isinstance(decision.rule, MatchingAclRule)
    assert decision.rule.acl.binding == prefix_allow
    assert [a.binding for a in decision.matching_acls] == [literal_allow, prefix_allow]
    assert decision.explanation() == (
        f"ALLOWED: User:alice from 192.168.0.1 DESCRIBE on Topic:LITERAL:orders, because ACL {decision.rule.acl.id} "
        "allows it (it matches and no DENY matches): ALLOW ALL for User:alice from host * on Topic:PREFIXED:ord."
    )


def test_explain_names_the_first_deny_and_orders_one_name_by_operation_then_principal():
    """At one resource name Kafka orders ACLs by pattern type, operation, principal, host, permission: the first
    matching DENY is reported (ALL, code 2, before READ, code 3), and the last matching ALLOW."""
    deny_all = acl(TOPIC, "orders", LITERAL, "User:*", ALL, DENY)
    deny_read = acl(TOPIC, "orders", LITERAL, "User:alice", READ, DENY)
    allow_read = acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW)
    allow_read_any = acl(TOPIC, "orders", LITERAL, "User:*", READ, ALLOW)
    denied = make(deny_read, deny_all).explain(ctx(), action(READ, TOPIC, "orders"))
    assert isinstance(denied.rule, MatchingAclRule) and denied.rule.acl.binding == deny_all
    allowed = make(allow_read_any, allow_read).explain(ctx(), action(READ, TOPIC, "orders"))
    # same operation: by principal string, "User:*" < "User:alice", so User:alice's ACL is met last
    assert isinstance(allowed.rule, MatchingAclRule) and allowed.rule.acl.binding == allow_read


def test_explain_relevant_acls_but_none_matching():
    authorizer = make(
        acl(TOPIC, "t", LITERAL, "User:bob", READ, ALLOW),
        acl(TOPIC, "*", LITERAL, "User:bob", READ, ALLOW),
        allow_everyone=True,
    )
    decision = authorizer.explain(ctx(), action(READ, TOPIC, "t"))
    assert decision.result is DENIED
    assert decision.rule == DefaultRule(DENIED, resource_has_acls=True)
    assert str(decision.rule) == "DefaultDeny"
    assert decision.matching_acls == ()
    assert decision.relevant_acl_count == 2
    assert decision.explanation() == (
        "DENIED: User:alice from 192.168.0.1 READ on Topic:LITERAL:t, because 2 ACL(s) apply to the resource but "
        "none matches this principal, host and operation (access is denied unless an ACL allows it)."
    )


@pytest.mark.parametrize(
    ("allow_everyone", "result", "rule_text"), [(True, ALLOWED, "DefaultAllow"), (False, DENIED, "DefaultDeny")]
)
def test_explain_no_relevant_acl_uses_the_default(allow_everyone, result, rule_text):
    authorizer = make(acl(GROUP, "t", LITERAL, "User:alice", READ, ALLOW), allow_everyone=allow_everyone)
    decision = authorizer.explain(ctx(), action(READ, TOPIC, "t"))
    assert decision.result is result
    assert decision.rule == DefaultRule(result, resource_has_acls=False)
    assert str(decision.rule) == rule_text
    assert decision.relevant_acl_count == 0
    assert decision.explanation().endswith(
        f"because no ACL applies to the resource and allow.everyone.if.no.acl.found is {str(allow_everyone).lower()}."
    )


def test_explain_resource_named_star_counts_the_wildcard_once():
    authorizer = make(acl(TOPIC, "*", LITERAL, "User:alice", READ, ALLOW))
    decision = authorizer.explain(ctx(), action(READ, TOPIC, "*"))
    assert decision.relevant_acl_count == 1
    assert len(decision.matching_acls) == 1


def test_explain_carries_context_and_action():
    authorizer = make()
    act = action(READ, TOPIC, "t")
    decision = authorizer.explain(ctx("User:zed", "10.1.1.1"), act)
    assert decision.context == ctx("User:zed", "10.1.1.1")
    assert decision.action == act


# ====================================================================================== configuration (§3.1)


def test_configured_super_users():
    # StandardAuthorizerTest.testGetConfiguredSuperUsers.
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" ") == frozenset()
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    # ":alice" is accepted (the split yields an empty type).
    assert parse_super_users(":alice") == {":alice"}
    assert parse_super_users(["User:a", " User:b "]) == {"User:a", "User:b"}


def test_configured_super_user_without_colon_is_an_error():
    with pytest.raises(InvalidConfigError) as info:
        parse_super_users("bob;:alice")
    assert str(info.value) == "super.users: expected a string in format principalType:principalName but got bob"
    with pytest.raises(InvalidConfigError, match="but got bob"):
        StandardAuthorizer.from_config({"super.users": "User:x; bob "})


def test_from_config():
    # StandardAuthorizerTest.testConfigure.
    authorizer = StandardAuthorizer.from_config(
        {"super.users": "User:alice;User:chris", "allow.everyone.if.no.acl.found": "true"}
    )
    assert authorizer.super_users == {"User:alice", "User:chris"}
    assert authorizer.allow_everyone_if_no_acl_found is True
    assert decide(authorizer, READ, TOPIC, "t", "User:bob") is ALLOWED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("true", True),
        ("TRUE", True),
        (" True ", True),
        ("false", False),
        ("yes", False),
        ("1", False),
        ("", False),
    ],
)
def test_from_config_allow_everyone_is_java_parse_boolean(value, expected):
    config = {} if value is None else {"allow.everyone.if.no.acl.found": value}
    authorizer = StandardAuthorizer.from_config(config)
    assert authorizer.allow_everyone_if_no_acl_found is expected
    assert authorizer.super_users == frozenset()
    assert decide(authorizer, READ, TOPIC, "t") is (ALLOWED if expected else DENIED)


def test_from_config_passes_keyword_arguments():
    authorizer = StandardAuthorizer.from_config({"super.users": "User:root"}, ready=False)
    with pytest.raises(AuthorizerNotReadyError):
        authorizer.authorize(ctx(), [action(READ, TOPIC, "t")])
    assert authorizer.authorize(ctx("User:root"), [action(READ, TOPIC, "t")]) == [ALLOWED]

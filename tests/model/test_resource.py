"""Resource patterns and pattern filters (SEMANTICS.md §6.1; mirrors Kafka's ResourcePatternFilterTest)."""

from __future__ import annotations

import pytest

from kafkaguard import InvalidAclError, PatternType, ResourcePattern, ResourcePatternFilter, ResourceType
from kafkaguard.model import CLUSTER_NAME, WILDCARD_RESOURCE

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ANY, MATCH, LITERAL, PREFIXED = PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED


def matches(
    filter_args: tuple[ResourceType, str | None, PatternType], pattern_args: tuple[ResourceType, str, PatternType]
) -> bool:
    return ResourcePatternFilter(*filter_args).matches(ResourcePattern(*pattern_args))


def test_constants():
    assert CLUSTER_NAME == "kafka-cluster"
    assert WILDCARD_RESOURCE == "*"


def test_pattern_type_defaults_to_literal():
    assert ResourcePattern(TOPIC, "orders").pattern_type is LITERAL


@pytest.mark.parametrize(
    ("resource_type", "pattern_type"),
    [(ResourceType.ANY, LITERAL), (TOPIC, ANY), (TOPIC, MATCH)],
)
def test_pattern_refuses_filter_only_values(resource_type, pattern_type):
    with pytest.raises(InvalidAclError, match="filters"):
        ResourcePattern(resource_type, "x", pattern_type)


def test_pattern_admits_unknown_values_so_they_can_be_reported():
    pattern = ResourcePattern(ResourceType.from_code(42), "x", PatternType.from_code(9))
    assert pattern.resource_type.code == 42
    assert pattern.pattern_type.code == 9


def test_pattern_refuses_a_non_string_name():
    with pytest.raises(InvalidAclError, match="string"):
        ResourcePattern(TOPIC, None, LITERAL)  # type: ignore[arg-type]


def test_pattern_equality_is_exact_and_case_sensitive():
    assert ResourcePattern(TOPIC, "a", LITERAL) == ResourcePattern(TOPIC, "a", LITERAL)
    assert ResourcePattern(TOPIC, "a", LITERAL) != ResourcePattern(TOPIC, "A", LITERAL)
    assert ResourcePattern(TOPIC, "a", LITERAL) != ResourcePattern(TOPIC, "a", PREFIXED)
    assert ResourcePattern(TOPIC, "a", LITERAL) != ResourcePattern(GROUP, "a", LITERAL)


def test_is_wildcard_only_for_literal_star():
    assert ResourcePattern(TOPIC, "*", LITERAL).is_wildcard
    assert not ResourcePattern(TOPIC, "*", PREFIXED).is_wildcard
    assert not ResourcePattern(TOPIC, "a*", LITERAL).is_wildcard


def test_str_is_kafkas_audit_form():
    assert str(ResourcePattern(TOPIC, "alpha", LITERAL)) == "Topic:LITERAL:alpha"
    assert str(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PREFIXED)) == "TransactionalId:PREFIXED:tx"


def test_to_filter_matches_exactly_itself():
    pattern = ResourcePattern(TOPIC, "ab", PREFIXED)
    pattern_filter = pattern.to_filter()
    assert pattern_filter == ResourcePatternFilter(TOPIC, "ab", PREFIXED)
    assert pattern_filter.matches(pattern)
    assert not pattern_filter.matches(ResourcePattern(TOPIC, "ab", LITERAL))
    assert not pattern_filter.matches(ResourcePattern(TOPIC, "a", PREFIXED))


# ---- Kafka's ResourcePatternFilterTest, case by case


def test_should_not_match_if_different_resource_type():
    assert not matches((TOPIC, "Name", LITERAL), (GROUP, "Name", LITERAL))


def test_should_not_match_if_different_name():
    assert not matches((TOPIC, "Different", PREFIXED), (TOPIC, "Name", PREFIXED))


def test_should_not_match_if_different_name_case():
    assert not matches((TOPIC, "NAME", LITERAL), (TOPIC, "Name", LITERAL))


def test_should_not_match_if_different_pattern_type():
    assert not matches((TOPIC, "Name", LITERAL), (TOPIC, "Name", PREFIXED))


def test_should_match_where_resource_type_is_any():
    assert matches((ResourceType.ANY, "Name", PREFIXED), (TOPIC, "Name", PREFIXED))


def test_should_match_where_resource_name_is_any():
    assert matches((TOPIC, None, PREFIXED), (TOPIC, "Name", PREFIXED))


def test_should_match_where_pattern_type_is_any():
    assert matches((TOPIC, None, ANY), (TOPIC, "Name", PREFIXED))


def test_should_match_where_pattern_type_is_match():
    assert matches((TOPIC, None, MATCH), (TOPIC, "Name", PREFIXED))
    assert matches((TOPIC, None, MATCH), (TOPIC, "Name", LITERAL))


def test_should_match_literal_if_exact_match():
    assert matches((TOPIC, "Name", LITERAL), (TOPIC, "Name", LITERAL))


def test_should_match_literal_if_name_matches_and_filter_is_on_pattern_type_any():
    assert matches((TOPIC, "Name", ANY), (TOPIC, "Name", LITERAL))


def test_should_match_literal_if_name_matches_and_filter_is_on_pattern_type_match():
    assert matches((TOPIC, "Name", MATCH), (TOPIC, "Name", LITERAL))


def test_should_not_match_literal_if_name_prefixed():
    assert not matches((TOPIC, "Name-something", LITERAL), (TOPIC, "Name", LITERAL))


def test_should_match_literal_wildcard_if_exact_match():
    assert matches((TOPIC, "*", LITERAL), (TOPIC, "*", LITERAL))


def test_should_not_match_literal_wildcard_against_other_name():
    # A LITERAL filter named "*" selects only the stored wildcard, never every ACL.
    assert not matches((TOPIC, "Name", LITERAL), (TOPIC, "*", LITERAL))


def test_should_not_match_literal_wildcard_the_way_around():
    assert not matches((TOPIC, "*", LITERAL), (TOPIC, "Name", LITERAL))


def test_should_not_match_literal_wildcard_if_filter_has_pattern_type_of_any():
    assert not matches((TOPIC, "Name", ANY), (TOPIC, "*", LITERAL))


def test_should_match_literal_wildcard_if_filter_has_pattern_type_of_match():
    assert matches((TOPIC, "Name", MATCH), (TOPIC, "*", LITERAL))


def test_should_match_prefixed_if_exact_match():
    assert matches((TOPIC, "Name", PREFIXED), (TOPIC, "Name", PREFIXED))


def test_should_not_match_if_both_prefixed_and_filter_is_prefix_of_resource():
    assert not matches((TOPIC, "Name", PREFIXED), (TOPIC, "Name-something", PREFIXED))


def test_should_not_match_if_both_prefixed_and_resource_is_prefix_of_filter():
    assert not matches((TOPIC, "Name-something", PREFIXED), (TOPIC, "Name", PREFIXED))


def test_should_not_match_prefixed_if_name_prefixed_and_filter_type_is_any():
    assert not matches((TOPIC, "Name-something", ANY), (TOPIC, "Name", PREFIXED))


def test_should_match_prefixed_if_name_prefixed_and_filter_type_is_match():
    assert matches((TOPIC, "Name-something", MATCH), (TOPIC, "Name", PREFIXED))


def test_match_does_not_match_a_longer_prefix_or_a_literal_prefix():
    assert not matches((TOPIC, "Na", MATCH), (TOPIC, "Name", PREFIXED))
    # A literal that is merely a prefix of the name is not relevant to it.
    assert not matches((TOPIC, "Name-something", MATCH), (TOPIC, "Name", LITERAL))


def test_match_treats_prefixed_star_as_an_ordinary_prefix():
    assert not matches((TOPIC, "Name", MATCH), (TOPIC, "*", PREFIXED))
    assert matches((TOPIC, "*Name", MATCH), (TOPIC, "*", PREFIXED))


def test_unknown_resource_type_matches_nothing_concrete():
    for resource_type in ResourceType:
        if resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN):
            assert not matches((ResourceType.UNKNOWN, None, ANY), (resource_type, "x", LITERAL))


def test_unknown_pattern_type_matches_no_stored_pattern():
    assert not matches((TOPIC, None, PatternType.UNKNOWN), (TOPIC, "x", LITERAL))
    assert not matches((TOPIC, None, PatternType.UNKNOWN), (TOPIC, "x", PREFIXED))


def test_any_filter_matches_everything():
    for pattern in (ResourcePattern(TOPIC, "*"), ResourcePattern(GROUP, "g", PREFIXED)):
        assert ResourcePatternFilter.ANY.matches(pattern)
    assert ResourcePatternFilter(ResourceType.ANY, None, ANY) == ResourcePatternFilter.ANY


# ---- find_indefinite_field / is_unknown


@pytest.mark.parametrize(
    ("pattern_filter", "message"),
    [
        (ResourcePatternFilter(ResourceType.ANY, "x", LITERAL), "Resource type is ANY."),
        (ResourcePatternFilter(ResourceType.UNKNOWN, "x", LITERAL), "Resource type is UNKNOWN."),
        (ResourcePatternFilter(ResourceType.from_code(50), "x", LITERAL), "Resource type is UNKNOWN."),
        (ResourcePatternFilter(TOPIC, None, LITERAL), "Resource name is NULL."),
        (ResourcePatternFilter(TOPIC, "x", MATCH), "Resource pattern type is MATCH."),
        (ResourcePatternFilter(TOPIC, "x", PatternType.UNKNOWN), "Resource pattern type is UNKNOWN."),
        (ResourcePatternFilter(TOPIC, "x", LITERAL), None),
        (ResourcePatternFilter(TOPIC, "x", PREFIXED), None),
        # Kafka's findIndefiniteField does not flag pattern type ANY (§6.3).
        (ResourcePatternFilter(TOPIC, "x", ANY), None),
    ],
)
def test_find_indefinite_field(pattern_filter, message):
    assert pattern_filter.find_indefinite_field() == message
    assert pattern_filter.matches_at_most_one() is (message is None)


def test_is_unknown():
    assert ResourcePatternFilter(ResourceType.UNKNOWN, None, ANY).is_unknown
    assert ResourcePatternFilter(TOPIC, None, PatternType.from_code(7)).is_unknown
    assert not ResourcePatternFilter(ResourceType.ANY, None, MATCH).is_unknown

"""certificate_super_users: which super users some certificate subject maps to under ssl.principal.mapping.rules.
Every subject reported is checked here against the real mapper: a report is never a guess."""

from __future__ import annotations

import pytest

from kafkaguard.identity.ssl_mapping import SslPrincipalMapper
from kafkaguard.identity.super_user_reach import SuperUserReach, certificate_super_users

README_RULE = "RULE:^CN=([^,]*),OU=ServiceUsers,.*$/$1/L"


def reach(rules: str, *super_users: str) -> dict[str, SuperUserReach]:
    mapper = SslPrincipalMapper.from_rules(rules)
    found = {r.super_user: r for r in certificate_super_users(mapper, super_users)}
    for r in found.values():  # each witness really maps to its super user, under all the rules
        assert f"User:{mapper.name_of(r.subject)}" == r.super_user, r
    return found


def test_the_readme_rule_makes_admin_from_a_subject_java_writes():
    found = reach(README_RULE + ",DEFAULT", "User:admin")
    admin = found["User:admin"]
    assert admin.subject == "CN=admin,OU=ServiceUsers,O=Example"
    assert admin.writable
    assert admin.rule == README_RULE


def test_a_lower_casing_rule_never_makes_a_capital_letter():
    assert reach(README_RULE, "User:Admin", "User:ADMIN") == {}


def test_an_upper_casing_rule_makes_capitals_from_any_case():
    found = reach("RULE:^CN=([^,]*),OU=Kafka$/$1/U", "User:ADMIN", "User:admin")
    assert set(found) == {"User:ADMIN"}


def test_a_prefixed_replacement_makes_only_prefixed_names():
    found = reach("RULE:^CN=([^,]*),OU=ServiceUsers,.*$/cert-$1/L", "User:admin", "User:cert-ops")
    assert set(found) == {"User:cert-ops"}


def test_only_user_super_users_are_looked_for():
    assert reach(README_RULE, "Group:admin", "ServiceAccount:admin") == {}


def test_default_makes_a_super_user_named_like_a_subject_and_nothing_else():
    found = reach("DEFAULT", "User:admin", "User:CN=ops,O=Example", "User:CN=Tkac\\, Adam,OU=ITZ")
    assert set(found) == {"User:CN=ops,O=Example", "User:CN=Tkac\\, Adam,OU=ITZ"}
    assert all(r.writable and r.rule == "DEFAULT" for r in found.values())


def test_a_subject_an_earlier_rule_takes_does_not_count_and_a_later_rule_is_named():
    rules = README_RULE.replace("/$1/L", "/svc-$1/L") + ",RULE:^CN=([^,]*)(,.*)?$/$1/L"
    admin = reach(rules, "User:admin")["User:admin"]
    assert admin.rule == "RULE:^CN=([^,]*)(,.*)?$/$1/L"
    assert "OU=ServiceUsers" not in admin.subject  # that one would be svc-admin


def test_two_groups_split_the_name_at_the_replacements_literal():
    found = reach("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/", "User:alice@ops", "User:alice")
    assert set(found) == {"User:alice@ops"}
    assert found["User:alice@ops"].subject == "CN=alice,OU=ops"


def test_a_case_insensitive_pattern_is_tried_with_java_s_capitals():
    admin = reach("RULE:(?i)^cn=(admin|ops),.*$/$1/", "User:admin")["User:admin"]
    assert admin.subject == "CN=admin,O=Example"
    assert admin.writable


def test_a_lookahead_that_only_excludes_one_case_is_seen_through():
    """The pattern refuses ``admin`` but not ``ADMIN``, which the /L fold makes ``admin``: the mapper decides."""
    admin = reach("RULE:^CN=(?!admin)([^,]*),.*$/$1/L", "User:admin")["User:admin"]
    assert admin.subject.startswith("CN=ADMIN,") or admin.subject.startswith("CN=Admin,")


@pytest.mark.parametrize(
    "rules",
    [
        "RULE:^CN=(?!(?i:admin),)([^,]*),OU=ServiceUsers$/$1/L",  # every case form refused
        "RULE:^CN=([0-9]+),OU=ServiceUsers$/$1/",  # digits only
        "RULE:^CN=([^,]*),OU=ServiceUsers$/$1/L,DEFAULT".replace("$1/L", "ops/"),  # a constant
    ],
)
def test_rules_that_cannot_make_admin_report_nothing(rules: str):
    assert reach(rules, "User:admin") == {}


def test_whole_match_and_repeats_with_a_minimum():
    assert set(reach("RULE:^CN=([0-9]{3,5})$/u$1/", "User:u123", "User:u12", "User:u123456")) == {"User:u123"}
    assert reach("RULE:^CN=.*$/$0/", "User:CN=admin")["User:CN=admin"].subject == "CN=admin"


def test_a_pattern_the_construction_cannot_build_is_not_seen_and_does_not_fail():
    """A minimum of 2^31 - 1 characters is not built (it would take the memory): that rule is simply not seen."""
    assert reach("RULE:^CN=(a{2147483647})$/$1/", "User:admin") == {}
    assert set(reach("RULE:^CN=(a{2147483647})$/$1/,RULE:^CN=(.*)$/$1/", "User:admin")) == {"User:admin"}

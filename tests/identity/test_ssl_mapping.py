"""``SslPrincipalMapper``: Kafka's ``SslPrincipalMapperTest`` (3.9) case for case, then what it leaves out: Java's
replacement syntax, ``escapeLiteralBackReferences`` and its quirk, ``find()`` semantics, and the patterns refused."""

from __future__ import annotations

import pytest

from kafkaguard.errors import InvalidConfigError
from kafkaguard.identity.ssl_mapping import (
    NoMatchingRule,
    ReplacementError,
    SslPrincipalMapper,
    escape_literal_back_references,
)


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    assert SslPrincipalMapper.from_rules(rules).rules


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"^Invalid rule: `.*`, unmatched substring: `"):
        SslPrincipalMapper.from_rules(rules)


def test_invalid_rule_message_is_kafkas() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        SslPrincipalMapper.from_rules("DEFAULT/L")
    assert str(refused.value) == "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"


def test_ssl_principal_mapper() -> None:
    mapper = SslPrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name_of("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name_of("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name_of("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name_of("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name_of("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
        # empty rules are ignored
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # escape sequences
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        # rules rule
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name_of("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_none_is_default() -> None:
    assert SslPrincipalMapper.from_rules(None).name_of("CN=x,O=y") == "CN=x,O=y"


def test_no_matching_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=admin$/root/, RULE:^O=(.*)$/$1/L")
    with pytest.raises(NoMatchingRule) as raised:
        mapper.name_of("CN=alice,O=Org")
    assert str(raised.value) == "No rules apply to CN=alice,O=Org, rules [RULE:^CN=admin$/root, RULE:^O=(.*)$/$1/L]"
    with pytest.raises(NoMatchingRule, match=r"rules \[\]$"):
        SslPrincipalMapper.from_rules("").name_of("CN=alice")


def test_whole_name_must_match_but_every_match_is_replaced() -> None:
    assert SslPrincipalMapper.from_rules("RULE:CN=a/b/").rules[0].apply("CN=a,O=x") is None
    # matches() holds, then replaceAll replaces each find(): "a" twice (the lazy pattern finds short matches)
    assert SslPrincipalMapper.from_rules("RULE:(a|b)*?/-/").name_of("ab") == "-a-b-"
    assert SslPrincipalMapper.from_rules("RULE:.*/X/").name_of("abc") == "XX"


def test_first_matching_rule_wins_and_case_follows_the_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=([^,]*),.*$/$1/U, RULE:^CN=([^,]*).*$/$1/L")
    assert mapper.name_of("CN=Émile,O=x") == "ÉMILE"
    assert mapper.name_of("CN=Straße") == "straße"
    assert SslPrincipalMapper.from_rules("RULE:(.*)/$1/U").name_of("Straße") == "STRASSE"


@pytest.mark.parametrize(
    ("replacement", "groups", "escaped"),
    [
        ("$1@$2", 2, "$1@$2"),
        ("$1@$3", 2, "$1@\\$3"),
        ("$12", 1, "$12"),  # $1 then "2" (Java's greedy group number)
        ("$0", 1, "$0"),
        ("$01", 1, "$01"),
        ("$3$4", 2, "\\$\\3$4"),  # the second backslash lands one character early (Kafka's quirk)
        ("$3", 0, "$3"),
    ],
)
def test_escape_literal_back_references(replacement: str, groups: int, escaped: str) -> None:
    assert escape_literal_back_references(replacement, groups) == escaped


@pytest.mark.parametrize(
    ("rule", "name"),
    [
        ("RULE:^CN=(.*?),O=(.*)$/$1@$3/", "duke@$3"),
        ("RULE:^CN=(.*?),O=(.*)$/$12/", "duke2"),
        ("RULE:^CN=(.*?),O=(.*)$/[$0]/", "[CN=duke,O=org]"),
        ("RULE:^CN=(.*?),O=(.*)$/\\$1/", "$1"),
        ("RULE:^CN=(.*?),O=(.*)$/a\\\\b/", "a\\b"),
        ("RULE:^CN=(.*?)(,X=(.*))?,O=(.*)$/$1[$3]$4/", "duke[]org"),
    ],
)
def test_java_replacements(rule: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(rule).name_of("CN=duke,O=org") == name


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("RULE:^CN=.*$/$1/", "No group 1"),
        ("RULE:^CN=.*$/a$/", "Illegal group reference: group index is missing"),
        ("RULE:^CN=(.*)$/$x/", "Illegal group reference"),
        ("RULE:^CN=(.*)$/${name}/", "No group with name {name}"),
        ("RULE:^CN=(.*)$/$99999999999/", 'For input string: "99999999999"'),
    ],
)
def test_replacements_java_cannot_expand(rule: str, message: str) -> None:
    mapper = SslPrincipalMapper.from_rules(rule)
    with pytest.raises(ReplacementError) as raised:
        mapper.name_of("CN=duke")
    assert str(raised.value) == message
    with pytest.raises(NoMatchingRule):
        mapper.name_of("O=no-match")  # the replacement is only read when the rule matches, as in Kafka


@pytest.mark.parametrize(
    "pattern",
    ["\\p{L}+", "\\Qa\\E", "(?<name>a)", "(a)\\1", "\\0101", "\\bCN", "[a-z&&[^b]]", "[[a]]", "a{,3}", "a(?s).*",
     "(?P<n>a)", "(?#c)a", "x(?i)y", "\\U0001F600"],
)  # fmt: skip
def test_patterns_refused_at_configuration(pattern: str) -> None:
    rule = f"RULE:{pattern}/x/"
    with pytest.raises(InvalidConfigError) as refused:
        SslPrincipalMapper.from_rules(rule)
    assert f"Invalid rule: `{rule}`: kafkaguard cannot match the pattern `{pattern}` as Java does" in str(refused.value)


def test_java_dot_and_dollar() -> None:
    dot = SslPrincipalMapper.from_rules("RULE:CN=(.*)/$1/")
    for terminator in "\n\r\x85\u2028\u2029":
        assert dot.rules[0].apply(f"CN=a{terminator}b") is None
    assert dot.name_of("CN=a\tb") == "a\tb"
    end = SslPrincipalMapper.from_rules("RULE:CN=([a-z]*)$\\s?/$1/")
    assert end.name_of("CN=abc\r") == "abc"
    assert end.name_of("CN=abc\u2028".replace("\u2028", "\n")) == "abc"
    ascii_word = SslPrincipalMapper.from_rules("RULE:CN=(\\w+)/$1/")
    assert ascii_word.rules[0].apply("CN=José") is None
    assert SslPrincipalMapper.from_rules("RULE:(?i)cn=(\\w+)/$1/").name_of("CN=Bob") == "Bob"

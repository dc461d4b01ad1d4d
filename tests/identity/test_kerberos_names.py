"""``KerberosShortNamer``: Kafka's ``KerberosNameTest`` (3.9) case for case, then what it leaves out: DEFAULT's realm
rule, the non-simple result that ends the search, ``replaceParameters``' errors, Java's replacement syntax, the list
setting's splitting. ``tests/kafka/test_kerberos_names_java.py`` compares all of it with Kafka's own classes."""

from __future__ import annotations

import pytest

from kafkaguard.errors import InvalidConfigError
from kafkaguard.identity.kerberos_names import (
    BadFormatString,
    KerberosMappingError,
    KerberosName,
    KerberosShortNamer,
    NoMatchingKerberosRule,
    replace_parameters,
    split_rules,
)


def short(rules: list[str], principal: str, realm: str = "REALM.COM") -> str:
    return KerberosShortNamer.from_rules(realm, rules).short_name(KerberosName.parse(principal))


def test_parse_as_kafka() -> None:
    rules = ["RULE:[1:$1](App\\..*)s/App\\.(.*)/$1/g", "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g", "DEFAULT"]
    assert KerberosName.parse("App.service-name/example.com@REALM.COM") == KerberosName(
        "App.service-name", "example.com", "REALM.COM"
    )
    assert short(rules, "App.service-name/example.com@REALM.COM") == "service-name"
    assert KerberosName.parse("App.service-name@REALM.COM") == KerberosName("App.service-name", None, "REALM.COM")
    assert short(rules, "App.service-name@REALM.COM") == "service-name"
    assert short(rules, "user/host@REALM.COM") == "user"


def test_to_lower_case_as_kafka() -> None:
    rules = [
        "RULE:[1:$1]/L",
        "RULE:[2:$1](Test.*)s/ABC///L",
        "RULE:[2:$1](ABC.*)s/ABC/XYZ/g/L",
        "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g/L",
        "RULE:[2:$1]/L",
        "DEFAULT",
    ]
    assert short(rules, "User@REALM.COM") == "user"
    assert short(rules, "TestABC/host@FOO.COM") == "test"
    assert short(rules, "ABC_User_ABC/host@FOO.COM") == "xyz_user_xyz"
    assert short(rules, "App.SERVICE-name/example.com@REALM.COM") == "service-name"
    assert short(rules, "User/root@REALM.COM") == "user"


@pytest.mark.parametrize(
    "rule",
    [
        "RULE:[1:$1]/L/LA",
        "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
        "RULE:[2:$1](ABC.*)s/ABC/XYZ/gg",
        "RULE:[1:$1]/L/U",
        "RULE:[1:$1]/LU",
        "DEFAULT/L",  # the case applies to RULEs only
        "RULE:[:$1]",  # no number of components (Java's NumberFormatException)
        "RULE:[99999999999:$1]",  # beyond a Java int
        "default",
        "RULE:[1:$1](a[)",  # a pattern that does not compile
    ],
)
def test_invalid_rules_refused(rule: str) -> None:
    with pytest.raises(InvalidConfigError, match="Invalid rule"):
        KerberosShortNamer.from_rules("REALM.COM", [rule])


def test_default_maps_only_the_default_realm_and_drops_the_instance() -> None:
    assert short(["DEFAULT"], "alice@REALM.COM") == "alice"
    assert short(["DEFAULT"], "alice/admin@REALM.COM") == "alice"
    with pytest.raises(NoMatchingKerberosRule, match=r"No rules apply to alice@OTHER\.ORG, rules \[DEFAULT\]"):
        short(["DEFAULT"], "alice@OTHER.ORG")
    assert short([], "alice") == "alice"  # a name without realm is used as it is, rules or not
    with pytest.raises(NoMatchingKerberosRule):
        short([], "alice@REALM.COM")  # no rules at all


def test_first_match_wins_and_a_non_simple_result_ends_the_search() -> None:
    rules = ["RULE:[1:$1@$0](.*@OTHER\\.ORG)s/@.*//", "RULE:[1:$1@$0]", "DEFAULT"]
    assert short(rules, "bob@OTHER.ORG") == "bob"
    with pytest.raises(NoMatchingKerberosRule, match=r"Non-simple name alice@REALM\.COM after auth_to_local rule"):
        short(rules, "alice@REALM.COM")  # the second rule applies with a non-simple name: DEFAULT is never asked
    assert short(rules, "alice/x@REALM.COM") == "alice"  # two components: only DEFAULT applies


def test_components_count_and_format() -> None:
    rules = ["RULE:[2:$2-$1]", "RULE:[1:x$1y]"]
    assert short(rules, "svc/host1@R") == "host1-svc"
    assert short(rules, "alice@R") == "xalicey"
    with pytest.raises(BadFormatString, match="index 2 from x\\$2 is outside of the valid range 0 to 1"):
        short(["RULE:[1:x$2]"], "alice@R")
    with pytest.raises(BadFormatString, match="bad format in username mapping in "):
        short(["RULE:[1:$1$]"], "alice@R")


def test_replace_parameters_copies_text_between_parameters() -> None:
    assert replace_parameters("$0:$1:$2!", ["R", "a", "b"]) == "R:a:b!"
    assert replace_parameters("", ["R", "a"]) == ""
    assert replace_parameters("$01", ["R", "a"]) == "a"  # "01" is 1 to Integer.parseInt


def test_substitution_first_or_every_match_in_java_syntax() -> None:
    assert short(["RULE:[1:$1]s/a/b/"], "banana@R") == "bbnana"
    assert short(["RULE:[1:$1]s/a/b/g"], "banana@R") == "bbnbnb"
    assert short(["RULE:[1:$1]s/(n)(a)/$2$1/g"], "banana@R") == "baanan"
    assert short(["RULE:[1:$1]s/x*/-/g"], "ab@R") == "-a-b-"  # empty matches, as Java's replaceAll finds them
    assert short(["RULE:[1:$1]s/a/\\$/"], "a@R") == "$"
    with pytest.raises(KerberosMappingError, match="No group 1"):
        short(["RULE:[1:$1]s/a/$1/"], "a@R")


def test_the_match_must_cover_the_whole_base() -> None:
    rules = ["RULE:[1:$1](ali)", "RULE:[1:$1](ali.*)s/^/x/"]
    assert short(rules, "alice@R") == "xalice"


def test_to_upper_case_as_kafka() -> None:
    rules = [
        "RULE:[1:$1]/U",
        "RULE:[2:$1](Test.*)s/ABC///U",
        "RULE:[2:$1](ABC.*)s/ABC/XYZ/g/U",
        "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g/U",
        "RULE:[2:$1]/U",
        "DEFAULT",
    ]
    assert short(rules, "User@REALM.COM") == "USER"
    assert short(rules, "TestABC/host@FOO.COM") == "TEST"
    assert short(rules, "ABC_User_ABC/host@FOO.COM") == "XYZ_USER_XYZ"
    assert short(rules, "App.SERVICE-name/example.com@REALM.COM") == "SERVICE-NAME"
    assert short(rules, "User/root@REALM.COM") == "USER"


def test_upper_case_realms_and_lower_case() -> None:
    assert short(["RULE:[1:$1]/L"], "ÄLICE@R") == "älice"
    with pytest.raises(NoMatchingKerberosRule):  # realms are compared exactly
        short(["DEFAULT"], "alice@realm.com")


def test_malformed_names() -> None:
    with pytest.raises(KerberosMappingError, match="Malformed Kerberos name: a/b/c@R"):
        KerberosName.parse("a/b/c@R")
    with pytest.raises(KerberosMappingError, match="Malformed"):
        KerberosName.parse("a@b@R")
    assert KerberosName.parse("a/b") == KerberosName("a/b")
    assert KerberosName.parse("/@") == KerberosName("", "", "")
    assert str(KerberosName.parse("svc/host@R")) == "svc/host@R"


def test_list_setting_split_as_kafka() -> None:
    assert split_rules(" RULE:[1:$1]/L , DEFAULT ") == ["RULE:[1:$1]/L", "DEFAULT"]
    assert split_rules("  ") == []
    assert split_rules("DEFAULT,") == ["DEFAULT", ""]


def test_rules_print_as_kafka_prints_them() -> None:
    namer = KerberosShortNamer.from_rules("R", ["RULE:[2:$1@$0](.*@R)s/@.*//g/L", "DEFAULT", "RULE:[1:$1]U"])
    assert str(namer) == "KerberosShortNamer(principalToLocalRules = [RULE:[2:$1@$0](.*@R)s/@.*//g/L, DEFAULT, " \
                         "RULE:[1:$1]/U])"  # fmt: skip

"""Differential: Kafka 3.9's own ``KerberosShortNamer`` and ``KerberosName`` (from the broker's jars, run by
``KerberosNamesProbe.java``) and ``identity.kerberos_names`` parse the same rule lists, and map every principal below
to the same short name or fail it, for every rule list."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kafkaguard.errors import InvalidConfigError
from kafkaguard.identity.kerberos_names import KerberosMappingError, KerberosName, KerberosShortNamer
from tests.kafka.broker import java

pytestmark = pytest.mark.integration

PROBE = Path(__file__).with_name("KerberosNamesProbe.java")
REALM = "EXAMPLE.COM"

RULE_LISTS: list[list[str]] = [
    ["DEFAULT"],
    [],
    ["RULE:[1:$1]/L", "RULE:[2:$1](Test.*)s/ABC///L", "RULE:[2:$1](ABC.*)s/ABC/XYZ/g/L", "DEFAULT"],
    ["RULE:[1:$1@$0](.*@OTHER\\.ORG)s/@.*//", "RULE:[2:$1@$0](.*@OTHER\\.ORG)s/@.*//L", "DEFAULT"],
    ["RULE:[1:$1@$0]", "DEFAULT"],  # a non-simple result ends the search
    ["RULE:[2:$2-$1]", "RULE:[1:x$1y]"],
    ["RULE:[1:$2]", "DEFAULT"],  # BadFormatString for every one-component name
    ["RULE:[1:$1$]"],
    ["RULE:[1:$1]s/(a)/$2/", "DEFAULT"],  # Java's "No group 2"
    ["RULE:[1:$1]s/x*/-/g/L"],
    ["RULE:[1:$1]s/[aeiou]/\\$/g", "DEFAULT"],
    ["RULE:[1:$1]/U", "RULE:[2:$1]s/a/b/gU"],
    ["DEFAULT/L"],
    ["RULE:[2:$1/$2](svc/.*)s/\\/.*//", "RULE:[2:$1]"],
    ["RULE:[1:$1](ali.*)", "RULE:[1:$0](EXAMPLE\\.COM)s/.*/realm-user/"],
    ["RULE:[1:$01]"],
    ["RULE:[1:$1]/L/LA"],  # refused at parse
    ["RULE:[2:$1](ABC.*)s/ABC/XYZ/gg"],
    ["RULE:[:$1]"],
    ["default"],
    ["DEFAULT", ""],
    ["RULE:[1:$1](?i)alice.*/L", "DEFAULT"],
]

NAMES = [
    "alice@EXAMPLE.COM",
    "Alice@EXAMPLE.COM",
    "ALICE@EXAMPLE.COM",
    "alice/admin@EXAMPLE.COM",
    "svc/host1.example.com@EXAMPLE.COM",
    "bob@OTHER.ORG",
    "Bob/Ops@OTHER.ORG",
    "carol@example.com",
    "TestABC/host@EXAMPLE.COM",
    "ABC_User_ABC/host@EXAMPLE.COM",
    "banana@EXAMPLE.COM",
    "ÄLICE@EXAMPLE.COM",
    "simple",
    "a/b",
    "a/b/c@EXAMPLE.COM",
    "a@b@EXAMPLE.COM",
    "@EXAMPLE.COM",
    "/@",
    "x@",
]


def python_lines(rules: list[str]) -> list[str]:
    try:
        namer = KerberosShortNamer.from_rules(REALM, rules)
    except InvalidConfigError:
        return ["P refused"]
    lines = ["P ok"]
    for name in NAMES:
        try:
            lines.append("R " + namer.short_name(KerberosName.parse(name)).encode().hex())
        except KerberosMappingError:
            lines.append("E")
    return lines


def test_kafka_and_kafkaguard_agree(kafka_dist: Path, tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.hex"
    rules_file.write_text("".join((",".join(r.encode().hex() for r in rules) or "-") + "\n" for rules in RULE_LISTS))
    names_file = tmp_path / "names.hex"
    names_file.write_text("".join(name.encode().hex() + "\n" for name in NAMES))
    done = subprocess.run(
        [java(), "-cp", str(kafka_dist / "libs" / "*"), str(PROBE), REALM, str(rules_file), str(names_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    java_lines = iter(done.stdout.splitlines())
    mismatches = []
    outcomes = set()
    for rules in RULE_LISTS:
        parsed = next(java_lines)
        ours = python_lines(rules)
        if parsed != "P ok":
            outcomes.add("refused")
            if ours != ["P refused"]:
                mismatches.append(f"{rules}: Java refuses ({parsed}), kafkaguard does not")
            continue
        theirs = [parsed] + [next(java_lines) for _ in NAMES]
        if ours == ["P refused"]:
            mismatches.append(f"{rules}: kafkaguard refuses, Java does not")
            continue
        # Java's exception classes (NoMatchingRule, BadFormatString, IllegalArgumentException …) are all "no name"
        theirs = [line if line.startswith(("P", "R")) else "E" for line in theirs]
        outcomes |= {line[0] for line in theirs[1:]}
        for name, java_line, our_line in zip(["(parse)", *NAMES], theirs, ours, strict=True):
            if java_line != our_line:
                mismatches.append(f"{rules} {name!r}: Java {java_line}, kafkaguard {our_line}")
    assert next(java_lines, None) is None
    assert mismatches == []
    assert {"R", "E", "refused"} <= outcomes  # every kind of outcome was compared

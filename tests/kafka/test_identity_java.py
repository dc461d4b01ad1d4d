"""Differential: for every certificate of ``tests/identity/certs.py``, JDK 17's
``getSubjectX500Principal().getName()`` equals ``rfc2253_name``, and Kafka 3.9's own ``SslPrincipalMapper`` (from the
broker's jars) maps it to the same name, or fails the same way, as kafkaguard's, for every rule set below."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kafkaguard.identity.ssl_mapping import NoMatchingRule, PrincipalMappingError, SslPrincipalMapper
from kafkaguard.identity.x500 import rfc2253_name
from tests.identity.certs import write_certificates
from tests.kafka.broker import java

pytestmark = pytest.mark.integration

PROBE = Path(__file__).with_name("IdentityProbe.java")

RULE_SETS = [
    "DEFAULT",
    "RULE:^CN=([^,]*),.*$/$1/L, RULE:^CN=(.*)$/$1/L",  # extract the CN, lower-case
    "RULE:^.*O=([^,]*).*$/$1/U, DEFAULT",  # upper-case, falling back to the DN
    "RULE:^CN=nomatch$/x/, RULE:^(.*?)CN=([^,]*)(.*)$/$2:$1:$3/",  # the first rule never matches
    "RULE:^NOTHING$/x/",  # matches nothing: NoMatchingRule
    "RULE:^CN=([^,]*),(.*)$/$1@$3/, RULE:^(.*)$/$1$2$12/",  # $3 and $2 out of range, $12 is $1 then "2"
    "RULE:^CN=((\\\\,|[^,])*)(,.*|$)/$1/, DEFAULT",  # an escaped comma kept in the CN
    "RULE:^(.*)\\/(.*)$/$2/, RULE:^(.*)(\\\\,)(.*)$/$3\\/$1/, DEFAULT",  # escaped / in pattern and replacement
    "RULE:^CN=[^,]*$/$1/, DEFAULT",  # $1 without groups: Java's IndexOutOfBoundsException
    "RULE:^(.*?)([a-z]*)$/<$2>/U, DEFAULT",  # replaceAll: every find(), empty ones included
    "",  # no rules at all
]


def python_line(rules: str, dn: str) -> str:
    try:
        return "R " + SslPrincipalMapper.from_rules(rules).name_of(dn).encode().hex()
    except NoMatchingRule:
        return "E NoMatchingRule"
    except PrincipalMappingError as e:
        return f"E {type(e).__name__}"


def test_java_and_kafka_agree(kafka_dist: Path, tmp_path: Path) -> None:
    certs = write_certificates(tmp_path / "certs")
    rules_file = tmp_path / "rules.hex"
    rules_file.write_text("".join(rules.encode().hex() + "\n" for rules in RULE_SETS))
    names = sorted(certs.clients)
    done = subprocess.run(
        [java(), "-cp", str(kafka_dist / "libs" / "*"), str(PROBE), str(rules_file),
         *(str(certs.clients[name].cert) for name in names)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    per_certificate = len(RULE_SETS) + 1
    assert len(lines) == per_certificate * len(names)
    java_errors = {"IndexOutOfBoundsException", "IllegalArgumentException", "NumberFormatException"}
    mismatches = []
    for index, name in enumerate(names):
        block = lines[index * per_certificate : (index + 1) * per_certificate]
        dn = rfc2253_name(certs.clients[name].der)
        java_dn = bytes.fromhex(block[0].removeprefix("N ")).decode()
        if java_dn != dn:
            mismatches.append(f"{name}: Java {java_dn!r}, kafkaguard {dn!r}")
            continue
        for rules, java_line in zip(RULE_SETS, block[1:], strict=True):
            expected = "E ReplacementError" if java_line.removeprefix("E ") in java_errors else java_line
            if python_line(rules, dn) != expected:
                mismatches.append(f"{name} {rules!r}: Java {java_line}, kafkaguard {python_line(rules, dn)}")
    assert mismatches == []
    outcomes = {line.split()[0] + (line.split()[1] if line.startswith("E") else "") for line in lines}
    assert {"R", "ENoMatchingRule", "EIndexOutOfBoundsException"} <= outcomes  # every kind of outcome was compared

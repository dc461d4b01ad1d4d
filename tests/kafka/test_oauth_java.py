"""Differential: every token of ``tests/identity/tokens.py`` validated by Kafka 3.9's own broker-side validator
(``TokenProbe.java``: ``OAuthBearerValidatorCallbackHandler`` with the ``JwksFileVerificationKeyResolver`` and the
validator ``AccessTokenValidatorFactory`` builds from the sasl.oauthbearer.* settings) and by
``kafkaguard.identity.oauth.validate_token``: the same verdict, principal and scopes for every case.

Tokens are made right before the probe runs, with margins of at least 20 s around every time limit.

``KNOWN_JOSE4J_DIFFERENCES``: the jose4j in the test tarball is built from older sources and registers no PS*
algorithm (it looks for the BouncyCastle name SHA256withRSAandMGF1, which JDK 17 does not provide; released jose4j
0.9 uses RSASSA-PSS), so Kafka there refuses PS256 tokens that a stock Kafka 3.9 accepts. The test asserts that
jose4j's exact reason, so it fails, and asks for the entry to be removed, once the tarball's jose4j supports PS256.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from kafkaguard.identity.jwks import parse_jwks
from kafkaguard.identity.oauth import TokenRejected, validate_token
from tests.identity.tokens import CASES, ISSUER, SKEW, TokenCase, jwks_document, session_keys, write_jwks
from tests.kafka.broker import java

PROBE = Path(__file__).with_name("TokenProbe.java")
KNOWN_JOSE4J_DIFFERENCES = {
    "valid_ps256": "org.jose4j.lang.InvalidAlgorithmException: PS256 is an unknown, unsupported or unavailable alg "
    "algorithm (not one of [none, HS256, HS384, HS512, ES256, ES384, ES512, RS256, RS384, RS512])",
}


def ours(case: TokenCase, token: str, now: int) -> tuple[str, str, str]:
    keys = parse_jwks(json.dumps(jwks_document()))
    try:
        validated = validate_token(token, keys, case.expectations(), now * 1000)
    except TokenRejected:
        return ("REJECTED", "", "")
    return ("ACCEPTED", validated.principal_name, "|".join(sorted(validated.scopes)))


@pytest.fixture(scope="module")
def kafka_verdicts(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[str], str, int]]:
    """name → (Kafka's output fields, the token, the ``now`` it was made at)."""
    directory = tmp_path_factory.mktemp("token-probe")
    jwks = write_jwks(directory / "jwks.json", jwks_document())
    now = int(time.time())
    tokens = {case.name: case.make(session_keys(), now) for case in CASES}
    lines = []
    for case in CASES:
        expectations = case.expectations()
        audiences = ",".join(expectations.expected_audience) or "-"
        lines.append(f"{case.name}\t{expectations.sub_claim_name}\t{audiences}\t{tokens[case.name]}\n")
    cases_file = directory / "cases.tsv"
    cases_file.write_text("".join(lines))
    log4j = directory / "log4j2.properties"
    log4j.write_text("rootLogger.level = OFF\n")
    done = subprocess.run(
        [java(), f"-Dlog4j2.configurationFile={log4j}", "-cp", str(kafka_dist / "libs" / "*"), str(PROBE),
         str(jwks), ISSUER, str(SKEW), str(cases_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    verdicts: dict[str, tuple[list[str], str, int]] = {}
    for line in done.stdout.splitlines():
        fields = line.split("\t")
        verdicts[fields[0]] = (fields[1:], tokens[fields[0]], now)
    assert set(verdicts) == {case.name for case in CASES}, done.stdout + done.stderr[-3000:]
    return verdicts


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_kafka_and_kafkaguard_agree(case: TokenCase, kafka_verdicts: dict[str, tuple[list[str], str, int]]) -> None:
    fields, token, now = kafka_verdicts[case.name]
    verdict, *rest = fields
    if case.name in KNOWN_JOSE4J_DIFFERENCES:
        assert verdict == "REJECTED" and KNOWN_JOSE4J_DIFFERENCES[case.name] in rest[-1], fields
        assert ours(case, token, now)[0] == "ACCEPTED"
        return
    kafka = (verdict, rest[0], rest[1]) if verdict == "ACCEPTED" else ("REJECTED", "", "")
    assert ours(case, token, now) == kafka, fields
    # The table's own expectation is Kafka's too: the table documents Kafka, not just kafkaguard.
    assert (verdict == "ACCEPTED") == case.accepted, fields
    if verdict == "REJECTED":
        assert rest[0] == "invalid_token", fields  # the callback's error status: Kafka's challenge

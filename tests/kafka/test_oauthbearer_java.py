"""Differential: OAUTHBEARER exchanges run through Kafka 3.9's own ``OAuthBearerSaslServer`` (``SaslProbe.java``,
validating with Kafka's ``OAuthBearerValidatorCallbackHandler``) and through ``OAuthBearerServerSession`` +
``validate_token``: the same challenge bytes, the same completion, the same exception kind and message, response by
response.

Kafka's ``SaslException`` is our ``OAuthBearerProtocolError`` (its message); its ``SaslAuthenticationException`` is our
``OAuthBearerAuthenticationError`` (the ``client_message``, which Kafka sends in SaslAuthenticate).

``KNOWN_KAFKA_DIFFERENCES``: a scheme other than Bearer makes Kafka's parser ask the wrong matcher for the group
``scheme``, so it throws IllegalArgumentException (the broker closes the connection without an answer); kafkaguard
refuses the response as a protocol error with the message Kafka meant.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from kafkaguard.errors import OAuthBearerAuthenticationError, OAuthBearerProtocolError
from kafkaguard.identity.jwks import parse_jwks
from kafkaguard.identity.oauth import KeySet, TokenRejected, ValidatedToken, validate_token
from kafkaguard.identity.oauthbearer import OAuthBearerServerSession
from tests.identity.tokens import AUDIENCE, EXPECTATIONS, ISSUER, SKEW, claims, jwks_document, session_keys, sign
from tests.identity.tokens import write_jwks as write_jwks_file
from tests.kafka.broker import java

PROBE = Path(__file__).with_name("SaslProbe.java")
KNOWN_KAFKA_DIFFERENCES = {"basic_scheme": "THROWN:IllegalArgumentException:No group with name <scheme>"}


NAMES = (
    "valid", "valid_with_authzid", "valid_with_extensions", "authzid_mismatch", "expired_then_ack",
    "expired_then_valid", "expired_then_other_bytes", "not_a_jwt", "ack_first", "empty", "no_auth",
    "bad_auth_format", "missing_final_separator", "non_ascii", "basic_scheme",
)  # fmt: skip


def initial(token: str, authzid: str = "", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def exchanges(now: int) -> dict[str, list[bytes]]:
    keys = session_keys()
    valid = sign(claims(now), keys.rsa_1)
    expired = sign(claims(now, exp=now - 120), keys.rsa_1)
    return {
        "valid": [initial(valid)],
        "valid_with_authzid": [initial(valid, "alice")],
        "valid_with_extensions": [initial(valid, extensions="\x01traceId=abc\x01other=x y")],
        "authzid_mismatch": [initial(valid, "bob")],
        "expired_then_ack": [initial(expired), b"\x01"],
        "expired_then_valid": [initial(expired), initial(valid)],
        "expired_then_other_bytes": [initial(expired), b"\x02"],
        "not_a_jwt": [initial("abc"), b"\x01"],
        "ack_first": [b"\x01"],
        "empty": [b""],
        "no_auth": [b"n,,\x01host=h\x01\x01"],
        "bad_auth_format": [b"n,,\x01auth=Bearer a b\x01\x01"],
        "missing_final_separator": [f"n,,\x01auth=Bearer {valid}\x01".encode()],
        "non_ascii": ["n,,\x01auth=Bearer tök\x01\x01".encode()],
        "basic_scheme": [b"n,,\x01auth=Basic abc\x01\x01"],
    }


def ours(messages: list[bytes], keys: KeySet, now: int) -> list[str]:
    session = OAuthBearerServerSession()
    out: list[str] = []
    for message in messages:
        try:
            response = session.receive_client_response(message)
            outcome: ValidatedToken | TokenRejected
            try:
                outcome = validate_token(response.token.value, keys, EXPECTATIONS, now * 1000)
            except TokenRejected as e:
                outcome = e
            challenge = session.receive_validation(outcome)
        except OAuthBearerProtocolError as e:
            out.append(f"THROWN:SaslException:{e}")
            break
        except OAuthBearerAuthenticationError as e:
            out.append(f"THROWN:SaslAuthenticationException:{e.client_message}")
            break
        if session.stage.name == "AUTHENTICATED":
            out.append(f"COMPLETE:{session.validated_token.principal_name}")
        else:
            out.append(f"CHALLENGE:{challenge.hex()}")
    return out


@pytest.fixture(scope="module")
def kafka_exchanges(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], int]:
    directory = tmp_path_factory.mktemp("sasl-probe")
    jwks = write_jwks_file(directory / "jwks.json", jwks_document())
    now = int(time.time())
    cases = exchanges(now)
    cases_file = directory / "cases.tsv"
    cases_file.write_text(
        "".join("\t".join([name, *(m.hex() for m in messages)]) + "\n" for name, messages in cases.items())
    )
    log4j = directory / "log4j2.properties"
    log4j.write_text("rootLogger.level = OFF\n")
    done = subprocess.run(
        [java(), f"-Dlog4j2.configurationFile={log4j}", "-cp", str(kafka_dist / "libs" / "*"), str(PROBE),
         str(jwks), AUDIENCE, ISSUER, str(SKEW), str(cases_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    results = {fields[0]: fields[1:] for fields in (line.split("\t") for line in done.stdout.splitlines())}
    assert set(results) == set(cases), done.stdout
    return results, now


@pytest.mark.parametrize("name", NAMES)
def test_kafka_and_kafkaguard_exchanges_agree(name: str, kafka_exchanges: tuple[dict[str, list[str]], int]) -> None:
    results, now = kafka_exchanges
    kafka = results[name]
    messages = exchanges(now)[name]
    mine = ours(messages, parse_jwks(json.dumps(jwks_document())), now)
    if name in KNOWN_KAFKA_DIFFERENCES:
        assert kafka == [KNOWN_KAFKA_DIFFERENCES[name]]
        assert mine == ["THROWN:SaslException:Invalid scheme in OAUTHBEARER client first message: Basic"]
        return
    assert mine == kafka

"""``validate_token``: every case of the token table gets Kafka's verdict (checked against Kafka itself in
tests/kafka/test_oauth_java.py), plus the rules the table does not reach: jose4j's key selection ties, key checks,
JSON details, groups, and that no message ever carries the token."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.warnings import InsecureKeyLengthWarning

from kafkaguard.identity.jwks import parse_jwks
from kafkaguard.identity.oauth import KeySet, TokenExpectations, TokenRejected, token_key_id, validate_token
from tests.identity.tokens import (
    CASES,
    DROP,
    EXPECTATIONS,
    TokenCase,
    claims,
    jwks_document,
    public_jwk,
    session_keys,
    sign,
)


def raw_signed(claim_set: dict[str, object]) -> str:
    """Signed by rsa-1 without PyJWT's claim checks (it refuses to encode a non-string iss)."""
    payload = json.dumps(claim_set).encode()
    return jwt.api_jws.encode(payload, session_keys().rsa_1, algorithm="RS256", headers={"kid": "rsa-1"})


def signed(claim_set, key=None, alg="RS256", kid="rsa-1") -> str:
    """``sign`` with the session's rsa-1 key by default."""
    return sign(claim_set, key or session_keys().rsa_1, alg, kid)


NOW = 1_800_000_000  # seconds


@pytest.fixture(scope="module")
def keys() -> KeySet:
    return parse_jwks(json.dumps(jwks_document()))


def check(token: str, keys: KeySet, expectations: TokenExpectations = EXPECTATIONS, now: int = NOW):
    return validate_token(token, keys, expectations, now * 1000)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_token_table(case: TokenCase, keys: KeySet) -> None:
    token = case.make(session_keys(), NOW)
    if not case.accepted:
        with pytest.raises(TokenRejected) as refused:
            check(token, keys, case.expectations())
        assert token not in str(refused.value)
        for section in token.split("."):
            assert not section or section not in str(refused.value)
        return
    validated = check(token, keys, case.expectations())
    assert validated.principal_name == case.principal
    assert validated.scopes == case.scopes
    assert validated.groups == case.groups


def test_table_is_large_and_mixed() -> None:
    assert len(CASES) >= 24
    assert len({case.name for case in CASES}) == len(CASES)
    assert sum(case.accepted for case in CASES) >= 10
    assert sum(not case.accepted for case in CASES) >= 14


def test_lifetime_is_in_milliseconds(keys: KeySet) -> None:
    validated = check(signed(claims(NOW, iat=NOW - 5, exp=NOW + 300)), keys)
    assert validated.expires_at_ms == (NOW + 300) * 1000
    assert validated.issued_at_ms == (NOW - 5) * 1000


@pytest.mark.parametrize(
    ("exp_offset", "accepted"),
    [(-31, False), (-30, False), (-29, True), (1, True)],  # refused when now - skew >= exp
)
def test_exp_boundary_is_jose4js(keys: KeySet, exp_offset: int, accepted: bool) -> None:
    token = signed(claims(NOW, iat=NOW - 100, exp=NOW + exp_offset))
    if accepted:
        assert check(token, keys).principal_name == "alice"
    else:
        with pytest.raises(TokenRejected, match="no longer valid"):
            check(token, keys)


@pytest.mark.parametrize(("nbf_offset", "accepted"), [(30, True), (31, False)])  # refused when now + skew < nbf
def test_nbf_boundary_is_jose4js(keys: KeySet, nbf_offset: int, accepted: bool) -> None:
    token = signed(claims(NOW, nbf=NOW + nbf_offset))
    if accepted:
        assert check(token, keys).principal_name == "alice"
    else:
        with pytest.raises(TokenRejected, match="not yet valid"):
            check(token, keys)


def test_now_in_milliseconds_is_truncated_to_seconds(keys: KeySet) -> None:
    token = signed(claims(NOW, exp=NOW + 30))  # refused at NOW + 60 s, accepted at NOW + 59.999 s
    assert validate_token(token, keys, EXPECTATIONS, (NOW + 59) * 1000 + 999).principal_name == "alice"
    with pytest.raises(TokenRejected):
        validate_token(token, keys, EXPECTATIONS, (NOW + 60) * 1000)


def test_fractional_dates_are_truncated(keys: KeySet) -> None:
    validated = check(signed(claims(NOW, exp=NOW + 100.9, iat=NOW - 1.5)), keys)
    assert validated.expires_at_ms == (NOW + 100) * 1000
    assert validated.issued_at_ms == (NOW - 2) * 1000  # 1 799 999 998.5 → 1 799 999 998 (Java's longValue)


@pytest.mark.parametrize("value", ["soon", True, [NOW + 100]])
def test_non_numeric_exp_is_refused(keys: KeySet, value: object) -> None:
    with pytest.raises(TokenRejected, match="'exp' claim is not the expected type"):
        check(signed(claims(NOW, exp=value)), keys)


def test_non_string_iss_is_refused_even_without_expected_issuer(keys: KeySet) -> None:
    no_issuer = TokenExpectations(expected_audience=("kafka",))
    assert check(signed(claims(NOW, iss=DROP)), keys, no_issuer).principal_name == "alice"
    with pytest.raises(TokenRejected, match="'iss' claim"):
        check(raw_signed(claims(NOW, iss=7)), keys, no_issuer)


def test_non_string_sub_is_refused_even_when_the_principal_is_another_claim(keys: KeySet) -> None:
    expectations = TokenExpectations(expected_audience=("kafka",), sub_claim_name="client_id")
    with pytest.raises(TokenRejected, match="'sub' claim"):
        check(signed(claims(NOW, sub=42, client_id="svc")), keys, expectations)


def test_non_string_jti_is_refused(keys: KeySet) -> None:
    with pytest.raises(TokenRejected, match="'jti' claim"):
        check(signed(claims(NOW, jti=5)), keys)


@pytest.mark.parametrize("aud", [[], 5, ["kafka", 5]])
def test_malformed_audience_is_refused(keys: KeySet, aud: object) -> None:
    with pytest.raises(TokenRejected, match="aud"):
        check(signed(claims(NOW, aud=aud)), keys)


def test_null_claims_read_as_absent(keys: KeySet) -> None:
    no_audience = TokenExpectations(expected_issuer="https://issuer.test")
    assert check(signed(claims(NOW, aud=None)), keys, no_audience).principal_name == "alice"
    with pytest.raises(TokenRejected, match="sub value must be non-null"):
        check(signed(claims(NOW, sub=None)), keys)


def test_scope_of_another_type_is_no_scope(keys: KeySet) -> None:
    assert check(signed(claims(NOW, scope=7)), keys).scopes == frozenset()
    assert check(signed(claims(NOW, scope={"read": True})), keys).scopes == frozenset()


def test_scope_entries_are_trimmed_and_checked(keys: KeySet) -> None:
    assert check(signed(claims(NOW, scope=[" read ", "write"])), keys).scopes == {"read", "write"}
    for bad in ([None], [""], [3]):
        with pytest.raises(TokenRejected, match="scope value"):
            check(signed(claims(NOW, scope=bad)), keys)


def test_scope_claim_name_is_configurable(keys: KeySet) -> None:
    expectations = TokenExpectations(expected_audience=("kafka",), scope_claim_name="scp")
    assert check(signed(claims(NOW, scp=["a"])), keys, expectations).scopes == {"a"}


def test_duplicate_claim_names_are_refused(keys: KeySet) -> None:
    payload = json.dumps(claims(NOW))[:-1] + ', "sub": "mallory"}'
    token = jwt.api_jws.encode(payload.encode(), session_keys().rsa_1, algorithm="RS256", headers={"kid": "rsa-1"})
    with pytest.raises(TokenRejected, match="'sub' appears twice"):
        check(token, keys)


@pytest.mark.parametrize("payload", [b"[1, 2]", b"not json", b'{"exp": NaN}'])
def test_claims_must_be_a_json_object(keys: KeySet, payload: bytes) -> None:
    token = jwt.api_jws.encode(payload, session_keys().rsa_1, algorithm="RS256", headers={"kid": "rsa-1"})
    with pytest.raises(TokenRejected, match="JSON"):
        check(token, keys)


@pytest.mark.parametrize(
    "token",
    ["", "   ", "a.b", "a.b.c.d", "a..c", "a.b. ", ".b.c"],
)
def test_sections_are_checked_first(keys: KeySet, token: str) -> None:
    with pytest.raises(TokenRejected, match="JWT provided"):
        check(token, keys)


def test_token_is_trimmed_as_java_trims(keys: KeySet) -> None:
    token = signed(claims(NOW))
    assert check(f" \t{token}\n", keys).principal_name == "alice"


def test_selection_breaks_ties_by_alg_then_first(keys: KeySet) -> None:
    k = session_keys()
    document = {
        "keys": [
            public_jwk(k.rsa_2, "same", alg="RS512"),
            public_jwk(k.rsa_1, "same", alg="RS256"),
            public_jwk(k.rsa_2, "same"),
        ]
    }
    ties = parse_jwks(json.dumps(document))
    # RS256 token: the alg filter leaves rsa_1 (alg RS256) and the third key (no alg): the first, rsa_1, wins.
    assert check(signed(claims(NOW), k.rsa_1, kid="same"), ties).principal_name == "alice"
    # RS384 token: only the key without alg is left: rsa_2.
    assert check(signed(claims(NOW), k.rsa_2, "RS384", kid="same"), ties).principal_name == "alice"
    with pytest.raises(TokenRejected, match="signature is invalid"):
        check(signed(claims(NOW), k.rsa_1, "RS384", kid="same"), ties)


def test_encryption_keys_are_not_used(keys: KeySet) -> None:
    k = session_keys()
    enc_only = parse_jwks(json.dumps({"keys": [public_jwk(k.rsa_1, "rsa-1", use="enc")]}))
    with pytest.raises(TokenRejected, match="no suitable verification key"):
        check(signed(claims(NOW)), enc_only)


def test_short_rsa_keys_are_refused() -> None:
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505 - the weak key under test
    short_keys = parse_jwks(json.dumps({"keys": [public_jwk(short, "short")]}))
    with pytest.warns(InsecureKeyLengthWarning):
        token = signed(claims(NOW), short, kid="short")
    with pytest.raises(TokenRejected, match="2048 bits or larger"):
        check(token, short_keys)


def test_ec_key_on_another_curve_is_refused() -> None:
    p384 = ec.generate_private_key(ec.SECP384R1())
    jwk = public_jwk(p384, "ec-384")
    p384_keys = parse_jwks(json.dumps({"keys": [jwk]}))
    # An ES256 token naming a P-384 key: refused before any signature check.
    header = jwt.api_jws.encode(b"{}", session_keys().ec_1, algorithm="ES256", headers={"kid": "ec-384"})
    with pytest.raises(TokenRejected, match="P-256"):
        check(header, p384_keys)
    assert check(signed(claims(NOW), p384, "ES384", kid="ec-384"), p384_keys).principal_name == "alice"


def test_eddsa_is_accepted() -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from jwt.algorithms import OKPAlgorithm

    private = ed25519.Ed25519PrivateKey.generate()
    jwk = json.loads(OKPAlgorithm.to_jwk(private.public_key())) | {"kid": "ed-1"}
    ed_keys = parse_jwks(json.dumps({"keys": [jwk]}))
    token = jwt.encode(claims(NOW), private, algorithm="EdDSA", headers={"kid": "ed-1"})
    assert check(token, ed_keys).principal_name == "alice"


@pytest.mark.parametrize(
    ("path", "claim_set", "groups"),
    [
        ("groups", {"groups": ["a", "b", "a"]}, ("a", "b")),
        ("groups", {"groups": "solo"}, ("solo",)),
        ("groups", {}, ()),
        ("realm_access.roles", {"realm_access": {"roles": [" ops "]}}, ("ops",)),
        ("realm_access.roles", {"realm_access": "flat"}, ()),
        ("https://example.com/groups", {"https://example.com/groups": ["ns"]}, ("ns",)),
    ],
)
def test_groups_claim(keys: KeySet, path: str, claim_set: dict[str, object], groups: tuple[str, ...]) -> None:
    expectations = TokenExpectations(expected_audience=("kafka",), groups_claim=path)
    assert check(signed(claims(NOW, **claim_set)), keys, expectations).groups == groups


@pytest.mark.parametrize("value", [5, ["a", 5], {"a": 1}, ["a", " "]])
def test_groups_of_another_shape_refuse_the_token(keys: KeySet, value: object) -> None:
    expectations = TokenExpectations(expected_audience=("kafka",), groups_claim="groups")
    with pytest.raises(TokenRejected, match="groups claim"):
        check(signed(claims(NOW, groups=value)), keys, expectations)


def test_token_key_id() -> None:
    assert token_key_id(signed(claims(NOW), session_keys().rsa_1, kid="rsa-9")) == "rsa-9"
    assert token_key_id(signed(claims(NOW), session_keys().rsa_1, kid=None)) is None
    assert token_key_id("garbage") is None


def test_validated_token_holds_no_token(keys: KeySet) -> None:
    token = signed(claims(NOW))
    validated = check(token, keys)
    assert token not in repr(validated)
    assert token.split(".")[2] not in repr(validated)


def test_works_at_the_real_time(keys: KeySet) -> None:
    now = int(time.time())
    token = signed(claims(now))
    assert validate_token(token, keys, EXPECTATIONS, int(time.time() * 1000)).principal_name == "alice"

"""An OAUTHBEARER access token validated as Kafka 3.9's broker validates it: ``OAuthBearerValidatorCallbackHandler``
→ ``ValidatorAccessTokenValidator`` → jose4j's ``JwtConsumer`` (built with ``DISALLOW_NONE``,
``setRequireExpirationTime``, ``setRequireIssuedAt``, the expected audiences and issuer, the clock skew), then Kafka's
own claim checks (``ClaimValidationUtils``). I/O-free: the keys come in as a :class:`KeySet` snapshot
(``identity.jwks`` keeps one up to date).

The checks, in Kafka's order (any failure raises :class:`TokenRejected`)::

    SerializedJwt      trimmed, non-empty, three '.'-separated sections, none blank
    header             alg an asymmetric algorithm (RS*, PS*, ES*, EdDSA; never none, never HS*), kid a string
    key selection      jose4j's VerificationJwkSelector over the JWKS: kid (when the token has one), key type of the
                       alg, use sig or absent; then alg, then the EC curve, only to break ties; first key wins
    key checks         RSA keys of at least 2048 bits, EC curve of the alg (jose4j validates the key)
    signature          PyJWT's JWS verification with that key and only the header's alg
    claims JSON        an object, no duplicate member names (jose4j's JsonUtil refuses them)
    aud                expected audiences set: aud required, one of its strings must be expected;
                       none set: a token WITH an aud claim is refused (jose4j's AudValidator)
    iss                expected issuer set: iss required and equal; iss must be a string when present
    exp, iat, nbf      exp and iat required, numbers (seconds, truncated like Java's longValue):
                       refused when now - skew >= exp, when now + skew < nbf, when exp < iat or exp < nbf
    sub, jti           when present, strings (jose4j reads them whatever sub.claim.name says)
    scope              a string is ONE scope (Kafka does not split on spaces), a list its strings, anything else
                       none; each trimmed, non-empty, not blank, no duplicates
    principal          the sub claim (sub_claim_name): a string, non-empty, not blank; trimmed
    exp, iat           non-negative

Worked example (expectations: audience "kafka", issuer "https://issuer.test", skew 30 s; now = 1 000 000 s)::

    header  {"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}
    claims  {"sub": " alice ", "aud": ["other", "kafka"], "iss": "https://issuer.test",
             "iat": 999 990, "exp": 1 000 010, "scope": "read write"}
    → ValidatedToken(principal_name="alice", scopes={"read write"}, expires_at_ms=1 000 010 000,
                     issued_at_ms=999 990 000, groups=())
    exp = 999 975 instead:  999 975 > 1 000 000 - 30, still accepted (inside the skew)
    exp = 999 970 instead:  1 000 000 - 30 >= 999 970, refused

``groups_claim`` is kafkaguard's addition (not in Kafka): the claim (or a dotted path through nested objects, e.g.
``realm_access.roles``; a top-level claim whose name contains dots, as Auth0's namespaced claims do, is found by
its full name first) whose string, or list of strings, names the session's groups. Absent: no groups. Any other
shape, or an empty or blank name, refuses the token: a group may carry a DENY, so it is never silently dropped.

Where this differs from Kafka: only asymmetric keys are ever used (a JWKS ``oct`` key is skipped when the set is
loaded, so an HS256 token is refused even where jose4j would verify it); x5t/x5t#S256 header hints are not used to
select a key; duplicate member names in the *header* are not detected (PyJWT parses it); a scope list with a
non-string entry is refused here, where Kafka's validator throws a ClassCastException that escapes its callback
handler (the broker then closes the connection without an answer).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.api_jws import PyJWS

from kafkaguard.errors import OAuthBearerError

#: The algorithms a token may be signed with, and the JWK key type each needs (jose4j's ``getKeyType``).
KEY_TYPE_BY_ALGORITHM: Mapping[str, str] = {
    **{f"RS{bits}": "RSA" for bits in (256, 384, 512)},
    **{f"PS{bits}": "RSA" for bits in (256, 384, 512)},
    "ES256": "EC",
    "ES384": "EC",
    "ES512": "EC",
    "ES256K": "EC",
    "EdDSA": "OKP",
}
#: The curve each ECDSA algorithm is defined on (RFC 7518 §3.4, RFC 8812): jose4j refuses a key on another.
CURVE_BY_ALGORITHM: Mapping[str, str] = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521", "ES256K": "secp256k1"}
_CURVE_BY_CLASS: Mapping[type[ec.EllipticCurve], str] = {
    ec.SECP256R1: "P-256",
    ec.SECP384R1: "P-384",
    ec.SECP521R1: "P-521",
    ec.SECP256K1: "secp256k1",
}
#: jose4j's minimum RSA key size for every JOSE RSA algorithm.
MIN_RSA_KEY_BITS = 2048
#: Java's ``String.trim`` removes every character up to U+0020.
_JAVA_WHITESPACE = "".join(chr(code) for code in range(0x21))
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class TokenRejected(OAuthBearerError):
    """The token is not valid; the message is a reason for the log (Kafka's wording where it has one) and never
    contains the token. The client is told only ``{"status":"invalid_token"}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenExpectations:
    """Kafka's ``sasl.oauthbearer.*`` validation settings, plus ``groups_claim`` (see the module docstring)."""

    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30
    groups_claim: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidatedToken:
    """What a valid token says (Kafka's ``BasicOAuthBearerToken`` without the token itself)."""

    principal_name: str
    scopes: frozenset[str]
    expires_at_ms: int
    issued_at_ms: int
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VerificationKey:
    """One usable public key of a JWKS, with the JWK members jose4j selects by."""

    kid: str | None
    kty: str
    use: str | None
    alg: str | None
    crv: str | None
    key: Any = field(repr=False)  # a cryptography public key object


@dataclass(frozen=True, slots=True)
class KeySet:
    """An immutable snapshot of a JWKS's usable keys, in the document's order (the order decides ties)."""

    keys: tuple[VerificationKey, ...] = ()

    def key_ids(self) -> frozenset[str]:
        return frozenset(key.kid for key in self.keys if key.kid is not None)

    def select(self, kid: str | None, alg: str) -> VerificationKey | None:
        """jose4j's ``VerificationJwkSelector.select``: filter by kid (required when given), key type and use; if
        more than one is left, by alg (absent is fine), then for EC by curve (absent is fine); the first wins."""
        kty = KEY_TYPE_BY_ALGORITHM.get(alg)
        found = [
            key for key in self.keys if (kid is None or key.kid == kid) and key.kty == kty and key.use in (None, "sig")
        ]
        if len(found) > 1:
            found = [key for key in found if key.alg in (None, alg)]
        if len(found) > 1 and kty == "EC":
            found = [key for key in found if key.crv in (None, CURVE_BY_ALGORITHM.get(alg))]
        return found[0] if found else None


def token_key_id(token: str) -> str | None:
    """The token's ``kid`` header, read without verifying anything (to choose whether a JWKS refresh is worth it);
    None when the token has none or cannot be read."""
    try:
        kid = jwt.get_unverified_header(token.strip(_JAVA_WHITESPACE)).get("kid")
    except jwt.PyJWTError:
        return None
    return kid if isinstance(kid, str) else None


def validate_token(token: str, keys: KeySet, expectations: TokenExpectations, now_ms: int) -> ValidatedToken:
    """Validate ``token`` as Kafka 3.9's broker does (module docstring), at ``now_ms`` (epoch milliseconds).

    :raises TokenRejected: the token is not valid; the message says why, without the token.
    """
    token = _check_sections(token)
    header = _read_header(token)
    alg, kid = header["alg"], header.get("kid")
    selected = keys.select(kid, alg)
    if selected is None:
        raise TokenRejected(
            f"Could not validate the access token: no suitable verification key for a JWS with alg {alg} and kid "
            f"{kid!r} among {len(keys.keys)} keys"
        )
    _check_key(selected, alg)
    try:
        payload = _JWS.decode_complete(token, key=selected.key, algorithms=[alg])["payload"]
    except jwt.InvalidSignatureError:
        raise TokenRejected("Could not validate the access token: JWS signature is invalid") from None
    except jwt.PyJWTError as e:
        raise TokenRejected(f"Could not validate the access token: {e}") from None
    claims = _parse_claims(payload)
    exp, iat = _check_registered_claims(claims, expectations, now_ms // 1000)
    scope_raw = claims.get(expectations.scope_claim_name)
    sub_raw = claims.get(expectations.sub_claim_name)
    if sub_raw is not None and not isinstance(sub_raw, str):
        raise TokenRejected(f"Could not extract the '{expectations.sub_claim_name}' claim from the access token")
    scopes = _validate_scopes(expectations.scope_claim_name, scope_raw)
    if exp < 0:
        raise TokenRejected(f'exp value must be non-negative; value given was "{exp * 1000}"')
    principal = _validate_string(expectations.sub_claim_name, sub_raw)
    if iat < 0:
        raise TokenRejected(f'iat value must be null or non-negative; value given was "{iat * 1000}"')
    groups = _groups(claims, expectations.groups_claim)
    return ValidatedToken(
        principal_name=principal, scopes=scopes, expires_at_ms=exp * 1000, issued_at_ms=iat * 1000, groups=groups
    )


_JWS = PyJWS(options={"enforce_minimum_key_length": True})

#: The longest token whose claims are read unverified (``accepted_token_claims``): a JWT's payload is decoded only
#: below this many characters (tokens with hundreds of groups are ~10 KiB; Kafka bounds the whole SASL message).
MAX_UNVERIFIED_TOKEN_CHARS = 64 * 1024


def accepted_token_claims(token: str, expectations: TokenExpectations) -> tuple[str, tuple[str, ...]]:
    """(the principal name, the groups) of a token that the BROKER has verified and accepted, read without checking
    its signature: ``upstream_authentication: passthrough``, where the broker's verdict is the login's and
    kafkaguard only needs the name the broker derived (``sub_claim_name``, trimmed and checked as Kafka's
    ``ClaimValidationUtils.validateString``) and the groups claim. Never call it on a token nobody verified: it
    decides nothing about validity. The token is bounded before anything is decoded (hostile input), and anything
    kafkaguard cannot read the same way fails closed. Cost: one base64 decode and one JSON parse of the payload,
    at most ``MAX_UNVERIFIED_TOKEN_CHARS``.

    :raises TokenRejected: too long, not three sections, a payload that is not base64url JSON, no usable sub
        claim, or a groups claim of the wrong shape (the message never holds the token).
    """
    if len(token) > MAX_UNVERIFIED_TOKEN_CHARS:
        raise TokenRejected(f"the access token is longer than {MAX_UNVERIFIED_TOKEN_CHARS} characters")
    payload = _check_sections(token).split(".")[1]
    try:
        decoded = base64.b64decode(
            payload.replace("-", "+").replace("_", "/") + "=" * (-len(payload) % 4), validate=True
        )
    except (binascii.Error, ValueError):
        raise TokenRejected("the access token's payload is not base64url") from None
    claims = _parse_claims(decoded)
    sub_raw = claims.get(expectations.sub_claim_name)
    if sub_raw is not None and not isinstance(sub_raw, str):
        raise TokenRejected(f"Could not extract the '{expectations.sub_claim_name}' claim from the access token")
    principal = _validate_string(expectations.sub_claim_name, sub_raw)
    return principal, _groups(claims, expectations.groups_claim)


def _check_sections(token: str) -> str:
    """Kafka's ``SerializedJwt``: Java's ``split("\\.")`` drops trailing empty sections."""
    token = token.strip(_JAVA_WHITESPACE)
    if not token:
        raise TokenRejected("Empty JWT provided; expected three sections (header, payload, and signature)")
    sections = token.split(".")
    while len(sections) > 1 and sections[-1] == "":
        sections.pop()
    if len(sections) != 3:
        raise TokenRejected(
            "Malformed JWT provided; expected three sections (header, payload, and signature), but "
            f"{len(sections)} sections provided"
        )
    for section, name in zip(sections, ("header", "payload", "signature"), strict=True):
        if not section.strip(_JAVA_WHITESPACE):
            raise TokenRejected(
                "Malformed JWT provided; expected at least three sections (header, payload, and signature), but "
                f"{name} section missing"
            )
    return token


def _read_header(token: str) -> dict[str, Any]:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise TokenRejected(f"Could not validate the access token: unreadable JOSE header ({e})") from None
    alg = header.get("alg")
    if alg == "none":
        raise TokenRejected("Could not validate the access token: 'none' is not a permitted algorithm (DISALLOW_NONE)")
    if not isinstance(alg, str) or alg not in KEY_TYPE_BY_ALGORITHM:
        raise TokenRejected(f"Could not validate the access token: alg {alg!r} is not an asymmetric JWS algorithm")
    if "kid" in header and not isinstance(header["kid"], str):
        raise TokenRejected("Could not validate the access token: the kid header is not a string")
    return header


def _check_key(selected: VerificationKey, alg: str) -> None:
    key = selected.key
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_KEY_BITS:
        raise TokenRejected(
            f"Could not validate the access token: an RSA key of size {MIN_RSA_KEY_BITS} bits or larger must be used "
            f"(key {selected.kid!r} is only {key.key_size} bits)"
        )
    if isinstance(key, ec.EllipticCurvePublicKey):
        curve = _CURVE_BY_CLASS.get(type(key.curve))
        if curve != CURVE_BY_ALGORITHM.get(alg):
            raise TokenRejected(
                f"Could not validate the access token: {alg} needs a {CURVE_BY_ALGORITHM.get(alg)} key, "
                f"key {selected.kid!r} is on {curve or key.curve.name}"
            )


def _parse_claims(payload: bytes) -> dict[str, Any]:
    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name, value in pairs:
            if name in result:
                raise TokenRejected(f"Could not validate the access token: the claim {name!r} appears twice")
            result[name] = value
        return result

    def refuse_constant(name: str) -> Any:
        raise TokenRejected(f"Could not validate the access token: {name} is not JSON")

    try:
        claims = json.loads(payload, object_pairs_hook=refuse_duplicates, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        raise TokenRejected("Could not validate the access token: the JWT claims are not valid JSON") from None
    if not isinstance(claims, dict):
        raise TokenRejected("Could not validate the access token: the JWT claims are not a JSON object")
    # JSON null reads as absent everywhere (jose4j's getClaimValue returns null for both).
    return {name: value for name, value in claims.items() if value is not None}


def _check_registered_claims(
    claims: Mapping[str, object], expectations: TokenExpectations, now: int
) -> tuple[int, int]:
    """jose4j's default validators, in its order: aud, iss, the dates, sub, jti. Returns (exp, iat) in seconds."""
    aud = claims.get("aud")
    if aud is None:
        if expectations.expected_audience:
            raise TokenRejected("Could not validate the access token: No Audience (aud) claim present.")
    else:
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or not all(isinstance(item, str) for item in audiences):
            raise TokenRejected(
                "Could not validate the access token: The value of the 'aud' claim is not an array of strings or a "
                "single string value."
            )
        if not any(item in expectations.expected_audience for item in audiences):
            if expectations.expected_audience:
                raise TokenRejected(
                    f"Could not validate the access token: Audience (aud) claim {audiences} doesn't contain an "
                    f"acceptable identifier. Expected one of {list(expectations.expected_audience)} as an aud value."
                )
            raise TokenRejected(
                f"Could not validate the access token: Audience (aud) claim {audiences} present in the JWT but no "
                "expected audience value(s) were provided to the JWT Consumer."
            )
    iss = _string_claim(claims, "iss")
    if iss is None and expectations.expected_issuer is not None:
        raise TokenRejected("Could not validate the access token: No Issuer (iss) claim present.")
    if expectations.expected_issuer is not None and iss != expectations.expected_issuer:
        raise TokenRejected(
            f"Could not validate the access token: Issuer (iss) claim value ({iss}) doesn't match expected value "
            f"of {expectations.expected_issuer}"
        )
    exp, iat, nbf = (_numeric_date(claims, name) for name in ("exp", "iat", "nbf"))
    if exp is None:
        raise TokenRejected("Could not validate the access token: No Expiration Time (exp) claim present.")
    if iat is None:
        raise TokenRejected("Could not validate the access token: No Issued At (iat) claim present.")
    skew = expectations.clock_skew_seconds
    if now - skew >= exp:
        raise TokenRejected(
            f"Could not validate the access token: The JWT is no longer valid - the evaluation time {now} is on or "
            f"after the Expiration Time (exp={exp}) claim value (even when providing {skew} seconds of leeway to "
            "account for clock skew)."
        )
    if exp < iat:
        raise TokenRejected(
            f"Could not validate the access token: The Expiration Time (exp={exp}) claim value cannot be before the "
            f"Issued At (iat={iat}) claim value."
        )
    if nbf is not None and exp < nbf:
        raise TokenRejected(
            f"Could not validate the access token: The Expiration Time (exp={exp}) claim value cannot be before the "
            f"Not Before (nbf={nbf}) claim value."
        )
    if nbf is not None and now + skew < nbf:
        raise TokenRejected(
            f"Could not validate the access token: The JWT is not yet valid as the evaluation time {now} is before "
            f"the Not Before (nbf={nbf}) claim time (even when providing {skew} seconds of leeway to account for "
            "clock skew)."
        )
    _string_claim(claims, "sub")
    _string_claim(claims, "jti")
    return exp, iat


def _string_claim(claims: Mapping[str, object], name: str) -> str | None:
    value = claims.get(name)
    if value is not None and not isinstance(value, str):
        raise TokenRejected(
            f"Could not validate the access token: The value of the '{name}' claim is not the expected type"
        )
    return value


def _numeric_date(claims: Mapping[str, object], name: str) -> int | None:
    """jose4j's ``getNumericDateClaimValue``: a JSON number, truncated to whole seconds (Java's ``longValue``)."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TokenRejected(
            f"Could not validate the access token: The value of the '{name}' claim is not the expected type"
        )
    seconds = int(value)
    if not _LONG_MIN <= seconds <= _LONG_MAX:
        raise TokenRejected(f"Could not validate the access token: {value} is unreasonable for a NumericDate")
    return seconds


def _validate_scopes(name: str, raw: object) -> frozenset[str]:
    """Kafka's scope handling: a string is one scope; a list, its items; anything else, no scope."""
    items: Sequence[object] = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else ()
    scopes: set[str] = set()
    for item in items:
        if item is not None and not isinstance(item, str):
            raise TokenRejected(f"{name} value must contain only strings")
        scope = _validate_string(name, item)
        if scope in scopes:
            raise TokenRejected(f"{name} value must not contain duplicates - {scope} already present")
        scopes.add(scope)
    return frozenset(scopes)


def _validate_string(name: str, value: str | None) -> str:
    """Kafka's ``ClaimValidationUtils.validateString``."""
    if value is None:
        raise TokenRejected(f"{name} value must be non-null")
    if not value:
        raise TokenRejected(f"{name} value must be non-empty")
    value = value.strip(_JAVA_WHITESPACE)
    if not value:
        raise TokenRejected(f"{name} value must not contain only whitespace")
    return value


def _groups(claims: Mapping[str, object], path: str | None) -> tuple[str, ...]:
    if path is None:
        return ()
    value: object = claims.get(path)
    if value is None and "." in path:
        value = claims
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise TokenRejected(f"the groups claim {path!r} is neither a string nor a list of strings")
    groups: list[str] = []
    for item in items:
        group = item.strip(_JAVA_WHITESPACE)
        if not group:
            raise TokenRejected(f"the groups claim {path!r} names an empty or blank group")
        if group not in groups:
            groups.append(group)
    return tuple(groups)

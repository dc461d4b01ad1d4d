"""Reusable OAUTHBEARER test material: key pairs (RSA made once per session: slow), a JWKS writer, and a table of
named token cases for one set of expectations (audience "kafka", issuer "https://issuer.test", skew 30 s), each
built relative to a ``now`` (epoch seconds) given to it, with what Kafka 3.9's validator decides for it.

The JWKS (:func:`jwks_document`) holds, in this order: ``rsa-1`` (RSA 2048), ``ec-1`` (P-256), ``rsa-2`` (RSA 2048, the
rotated key). ``rsa-other`` signs tokens but is in no JWKS. Order matters: jose4j picks the first RSA key for a
token without ``kid``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from kafkaguard.identity.oauth import TokenExpectations

AUDIENCE = "kafka"
ISSUER = "https://issuer.test"
SKEW = 30
EXPECTATIONS = TokenExpectations(expected_audience=(AUDIENCE,), expected_issuer=ISSUER, clock_skew_seconds=SKEW)

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True)
class SessionKeys:
    rsa_1: rsa.RSAPrivateKey
    rsa_2: rsa.RSAPrivateKey
    rsa_other: rsa.RSAPrivateKey
    ec_1: ec.EllipticCurvePrivateKey


@functools.cache
def session_keys() -> SessionKeys:
    """The session's keys (RSA generation takes ~0.1-1 s a key)."""
    return SessionKeys(
        rsa_1=rsa.generate_private_key(public_exponent=65537, key_size=2048),
        rsa_2=rsa.generate_private_key(public_exponent=65537, key_size=2048),
        rsa_other=rsa.generate_private_key(public_exponent=65537, key_size=2048),
        ec_1=ec.generate_private_key(ec.SECP256R1()),
    )


def public_jwk(key: PrivateKey, kid: str | None, **members: str) -> dict[str, Any]:
    """The public JWK of ``key`` with ``kid`` (and ``use``, ``alg`` … as given)."""
    if isinstance(key, rsa.RSAPrivateKey):
        jwk: dict[str, Any] = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    if kid is not None:
        jwk["kid"] = kid
    jwk.update(members)
    return jwk


def jwks_document(keys: SessionKeys | None = None) -> dict[str, Any]:
    keys = keys or session_keys()
    return {
        "keys": [
            public_jwk(keys.rsa_1, "rsa-1", use="sig"),
            public_jwk(keys.ec_1, "ec-1", use="sig"),
            public_jwk(keys.rsa_2, "rsa-2"),
        ]
    }


def write_jwks(path: Path, keys: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> Path:
    """Write a JWKS file: ``keys`` is a whole document ({"keys": [...]}) or the list of JWKs."""
    document = keys if isinstance(keys, Mapping) else {"keys": list(keys)}
    path.write_text(json.dumps(document))
    return path


def sign(claims: Mapping[str, Any], key: PrivateKey | None, alg: str = "RS256", kid: str | None = "rsa-1") -> str:
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode(dict(claims), key, algorithm=alg, headers=headers)  # type: ignore[arg-type]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_with_public_key(claims: Mapping[str, Any], key: rsa.RSAPrivateKey, kid: str) -> str:
    """The key-confusion attack: HS256 with the RSA *public* key's PEM as the HMAC secret (PyJWT refuses to make it,
    so it is made by hand)."""
    secret = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = f"{_b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': kid}).encode())}."
    signing_input += _b64(json.dumps(dict(claims)).encode())
    return f"{signing_input}.{_b64(hmac.digest(secret, signing_input.encode(), hashlib.sha256))}"


def claims(now: int, **changes: Any) -> dict[str, Any]:
    """A valid claim set at ``now``; ``changes`` replace claims, a value of ``DROP`` removes one."""
    base: dict[str, Any] = {
        "sub": "alice",
        "aud": AUDIENCE,
        "iss": ISSUER,
        "iat": now - 60,
        "exp": now + 3600,
        "scope": "kafka-access",
    }
    for name, value in changes.items():
        if value is DROP:
            base.pop(name, None)
        else:
            base[name] = value
    return base


DROP = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCase:
    name: str
    make: Callable[[SessionKeys, int], str]
    accepted: bool
    principal: str | None = None
    scopes: frozenset[str] = frozenset({"kafka-access"})
    groups: tuple[str, ...] = ()
    #: Changes to EXPECTATIONS for this case (sub_claim_name, expected_audience, groups_claim).
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def expectations(self) -> TokenExpectations:
        values = {
            "expected_audience": EXPECTATIONS.expected_audience,
            "expected_issuer": EXPECTATIONS.expected_issuer,
            "sub_claim_name": EXPECTATIONS.sub_claim_name,
            "scope_claim_name": EXPECTATIONS.scope_claim_name,
            "clock_skew_seconds": EXPECTATIONS.clock_skew_seconds,
            "groups_claim": EXPECTATIONS.groups_claim,
            **self.overrides,
        }
        return TokenExpectations(**values)


def _ok(name: str, make: Callable[[SessionKeys, int], str], **kwargs: Any) -> TokenCase:
    return TokenCase(name=name, make=make, accepted=True, principal=kwargs.pop("principal", "alice"), **kwargs)


def _refused(name: str, make: Callable[[SessionKeys, int], str], **kwargs: Any) -> TokenCase:
    return TokenCase(name=name, make=make, accepted=False, scopes=frozenset(), **kwargs)


CASES: tuple[TokenCase, ...] = (
    _ok("valid_rs256", lambda k, now: sign(claims(now), k.rsa_1)),
    _ok("valid_es256", lambda k, now: sign(claims(now), k.ec_1, "ES256", "ec-1")),
    _ok("valid_ps256", lambda k, now: sign(claims(now), k.rsa_1, "PS256")),
    _refused("expired", lambda k, now: sign(claims(now, exp=now - 120), k.rsa_1)),
    _ok("expired_within_skew", lambda k, now: sign(claims(now, exp=now - 10), k.rsa_1)),
    _refused("not_yet_valid", lambda k, now: sign(claims(now, nbf=now + 120), k.rsa_1)),
    _ok("nbf_within_skew", lambda k, now: sign(claims(now, nbf=now + 10), k.rsa_1)),
    _refused("missing_exp", lambda k, now: sign(claims(now, exp=DROP), k.rsa_1)),
    _refused("missing_iat", lambda k, now: sign(claims(now, iat=DROP), k.rsa_1)),
    _refused("exp_before_iat", lambda k, now: sign(claims(now, iat=now + 600, exp=now + 300), k.rsa_1)),
    _refused("wrong_audience", lambda k, now: sign(claims(now, aud="other"), k.rsa_1)),
    _refused("missing_audience", lambda k, now: sign(claims(now, aud=DROP), k.rsa_1)),
    _ok("audience_list_with_expected", lambda k, now: sign(claims(now, aud=["other", AUDIENCE]), k.rsa_1)),
    _refused(
        "audience_without_expected_audience",
        lambda k, now: sign(claims(now), k.rsa_1),
        overrides={"expected_audience": ()},
    ),
    _refused("wrong_issuer", lambda k, now: sign(claims(now, iss="https://evil.test"), k.rsa_1)),
    _refused("missing_issuer", lambda k, now: sign(claims(now, iss=DROP), k.rsa_1)),
    _ok(
        "other_sub_claim_name",
        lambda k, now: sign(claims(now, client_id="svc-orders"), k.rsa_1),
        principal="svc-orders",
        overrides={"sub_claim_name": "client_id"},
    ),
    _refused("missing_sub", lambda k, now: sign(claims(now, sub=DROP), k.rsa_1)),
    _refused("empty_sub", lambda k, now: sign(claims(now, sub=""), k.rsa_1)),
    _refused("blank_sub", lambda k, now: sign(claims(now, sub="   "), k.rsa_1)),
    _refused("non_string_sub", lambda k, now: sign(claims(now, sub=42), k.rsa_1)),
    _ok("sub_trimmed", lambda k, now: sign(claims(now, sub="  alice "), k.rsa_1)),
    _refused("unknown_kid", lambda k, now: sign(claims(now), k.rsa_other, kid="rsa-unknown")),
    _ok("no_kid", lambda k, now: sign(claims(now), k.rsa_1, kid=None)),
    _refused("no_kid_signed_by_second_key", lambda k, now: sign(claims(now), k.rsa_2, kid=None)),
    _ok("rotated_key", lambda k, now: sign(claims(now), k.rsa_2, kid="rsa-2")),
    _refused("alg_none", lambda k, now: sign(claims(now), None, "none", kid="rsa-1")),
    _refused("alg_none_with_signature", lambda k, now: sign(claims(now), None, "none", kid="rsa-1") + "c2lnbmF0dXJl"),
    _refused("hs256_with_rsa_public_key", lambda k, now: hs256_with_public_key(claims(now), k.rsa_1, "rsa-1")),
    _refused("bad_signature", lambda k, now: sign(claims(now), k.rsa_other, kid="rsa-1")),
    _refused("es256_with_rsa_kid", lambda k, now: sign(claims(now), k.ec_1, "ES256", "rsa-1")),
    _refused("malformed_two_sections", lambda k, now: ".".join(sign(claims(now), k.rsa_1).split(".")[:2])),
    _ok(
        "scope_string",
        lambda k, now: sign(claims(now, scope="read write"), k.rsa_1),
        scopes=frozenset({"read write"}),
    ),
    _ok(
        "scope_list",
        lambda k, now: sign(claims(now, scope=["read", "write"]), k.rsa_1),
        scopes=frozenset({"read", "write"}),
    ),
    _ok("scope_missing", lambda k, now: sign(claims(now, scope=DROP), k.rsa_1), scopes=frozenset()),
    _refused("scope_blank_entry", lambda k, now: sign(claims(now, scope=["read", " "]), k.rsa_1)),
    _refused("scope_duplicate_after_trim", lambda k, now: sign(claims(now, scope=["read", " read"]), k.rsa_1)),
    _ok(
        "groups_claim_nested",
        lambda k, now: sign(claims(now, realm_access={"roles": ["admins", "ops"]}), k.rsa_1),
        groups=("admins", "ops"),
        overrides={"groups_claim": "realm_access.roles"},
    ),
)
CASES_BY_NAME: Mapping[str, TokenCase] = {case.name: case for case in CASES}

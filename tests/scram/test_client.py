"""The SASL/SCRAM client session: known answers, kafkaguard's own server and scramp's, refusals, order, the cache."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections.abc import Callable

import pytest
import scramp  # type: ignore[import-untyped]

import kafkaguard.scram.client as client_module
from kafkaguard.errors import (
    InvalidConfigError,
    ScramAuthenticationError,
    ScramError,
    ScramProtocolError,
    ScramStateError,
)
from kafkaguard.scram import (
    MAX_SERVER_ITERATIONS,
    SaltedPasswordCache,
    ScramClientSession,
    ScramClientStage,
    ScramCredential,
    ScramMechanism,
    ScramServerSession,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)

SHA_256 = ScramMechanism.SCRAM_SHA_256
SHA_512 = ScramMechanism.SCRAM_SHA_512
SECRET = b"0123456789abcdef-decoy-secret"
PASSWORD = "pencil"  # noqa: S105 - RFC 7677's example password

# RFC 7677 §3 and its SCRAM-SHA-512 twin (/work/shared/scram_vectors.txt, tests/scram/test_server.py).
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_FINAL_WITHOUT_PROOF = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_PROOFS = {
    SHA_256: b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    SHA_512: b"gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ==",
}
RFC_SERVER_SIGNATURES = {
    SHA_256: b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    SHA_512: b"ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
}
# scram_vectors.txt: the salted passwords of the same exchange.
RFC_SALTED_PASSWORDS = {
    SHA_256: "c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d",
    SHA_512: "f16efe1be67f1d09502ebd5ed9262fddffba5a377ab4f0b687e5ed5ba0f50686"
    "b8a4ae166476da8ab3b951d2fa9238b63998f45461bc33a464814949cec9631d",
}


def rfc_session(mechanism: ScramMechanism) -> ScramClientSession:
    return ScramClientSession(mechanism, "user", PASSWORD, nonce=RFC_CLIENT_NONCE)


def server_for(
    mechanism: ScramMechanism, users: dict[str, ScramCredential], nonce: str | None = None
) -> ScramServerSession:
    if nonce is None:
        return ScramServerSession(mechanism, users.get, decoy_secret=SECRET)
    fixed = nonce
    return ScramServerSession(mechanism, users.get, decoy_secret=SECRET, nonce_factory=lambda: fixed)


def server_first_with(*, nonce: str = RFC_CLIENT_NONCE + RFC_SERVER_NONCE, iterations: int = 4096) -> bytes:
    return f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}".encode()


# --- known answers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_rfc7677_exchange_byte_for_byte(mechanism: ScramMechanism) -> None:
    session = rfc_session(mechanism)
    stages = [session.stage]
    assert session.first_message() == RFC_CLIENT_FIRST
    stages.append(session.stage)
    assert session.final_message(RFC_SERVER_FIRST) == RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[mechanism]
    stages.append(session.stage)
    session.verify_server_final(b"v=" + RFC_SERVER_SIGNATURES[mechanism])
    stages.append(session.stage)
    assert stages == [
        ScramClientStage.FIRST,
        ScramClientStage.FINAL,
        ScramClientStage.SERVER_FINAL,
        ScramClientStage.AUTHENTICATED,
    ]


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_rfc_salted_password_from_the_vectors_is_what_the_cache_holds(mechanism: ScramMechanism) -> None:
    cache = SaltedPasswordCache()
    assert cache.salted_password(mechanism, PASSWORD, RFC_SALT, 4096).hex() == RFC_SALTED_PASSWORDS[mechanism]


def test_kafka_scram_parser_vector_alice_logs_in_to_kafkaguard() -> None:
    # scram_vectors.txt: Hi-SHA256('alice', salt='1lv4pdnw4fwq7notcxm0yy1k7q', 8192), stored as Kafka carries it.
    salted = base64.b64decode("mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=")
    credential = credential_from_salted_password(SHA_256, b"1lv4pdnw4fwq7notcxm0yy1k7q", salted, 8192)
    assert base64.b64encode(credential.stored_key) == b"XTIqoHHo3sscdYxycL07uh8utmHn9fXtjqyDF67CjSU="
    cache = SaltedPasswordCache()
    session = ScramClientSession(SHA_256, "alice", "alice", salted_password_cache=cache)
    server = server_for(SHA_256, {"alice": credential})
    session.verify_server_final(
        server.receive_client_final(session.final_message(server.receive_client_first(session.first_message())))
    )
    assert session.stage is ScramClientStage.AUTHENTICATED
    assert server.authenticated_user == "alice"
    assert cache.salted_password(SHA_256, "alice", b"1lv4pdnw4fwq7notcxm0yy1k7q", 8192) == salted


def test_user_name_is_escaped() -> None:
    session = ScramClientSession(SHA_256, "a,b=c", PASSWORD, nonce=RFC_CLIENT_NONCE)
    assert session.first_message() == b"n,,n=a=2Cb=3Dc,r=" + RFC_CLIENT_NONCE.encode()


def test_default_nonce_is_fresh() -> None:
    firsts = {ScramClientSession(SHA_256, "user", PASSWORD).first_message() for _ in range(20)}
    assert len(firsts) == 20


# --- against kafkaguard's server and scramp's ---------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize(
    ("username", "password", "iterations"),
    [("alice", "alice-secret", 4096), ("a,b=c", "p,w=d", 8192), ("\u00e9l\u00e8ve", "m\u00f8t de passe", 16384)],
)
def test_full_exchange_with_kafkaguards_server(
    mechanism: ScramMechanism, username: str, password: str, iterations: int
) -> None:
    server = server_for(mechanism, {username: credential_from_password(mechanism, password, iterations)})
    session = ScramClientSession(mechanism, username, password)
    server_first = server.receive_client_first(session.first_message())
    server_final = server.receive_client_final(session.final_message(server_first))
    session.verify_server_final(server_final)
    assert session.stage is ScramClientStage.AUTHENTICATED
    assert server.authenticated_user == username


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_full_exchange_with_scramps_server(mechanism: ScramMechanism) -> None:
    scram = scramp.ScramMechanism(mechanism.mechanism_name)
    auth_info = scram.make_auth_info(PASSWORD, iteration_count=4096)
    server = scram.make_server(lambda username: auth_info)
    session = ScramClientSession(mechanism, "user", PASSWORD)
    server.set_client_first(session.first_message().decode())
    client_final = session.final_message(server.get_server_first().encode())
    server.set_client_final(client_final.decode())  # scramp verifies the proof
    session.verify_server_final(server.get_server_final().encode())
    assert session.stage is ScramClientStage.AUTHENTICATED


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_wrong_password_server_refuses_and_client_never_claims_success(mechanism: ScramMechanism) -> None:
    credential = credential_from_password(mechanism, PASSWORD, 4096)
    server = server_for(mechanism, {"user": credential})
    session = ScramClientSession(mechanism, "user", "not-the-password")
    client_first = session.first_message()
    server_first = server.receive_client_first(client_first)
    client_final = session.final_message(server_first)
    with pytest.raises(ScramAuthenticationError):
        server.receive_client_final(client_final)
    stages = [session.stage]
    # Even the real credential's server signature over this exchange (what a server that wrongly accepted would
    # send) does not complete it: the client expects the signature of the password it holds.
    without_proof = client_final[: client_final.rindex(b",p=")]
    auth_message = client_first[len(b"n,,") :] + b"," + server_first + b"," + without_proof
    genuine = hmac.digest(credential.server_key, auth_message, mechanism.hash_name)
    with pytest.raises(ScramAuthenticationError, match="Invalid SCRAM server signature"):
        session.verify_server_final(b"v=" + base64.b64encode(genuine))
    stages.append(session.stage)
    assert stages == [ScramClientStage.SERVER_FINAL, ScramClientStage.FAILED]


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_unknown_user_decoy_is_refused_by_the_server(mechanism: ScramMechanism) -> None:
    server = server_for(mechanism, {})
    session = ScramClientSession(mechanism, "nobody", PASSWORD)
    client_final = session.final_message(server.receive_client_first(session.first_message()))
    with pytest.raises(ScramAuthenticationError):
        server.receive_client_final(client_final)
    assert session.stage is not ScramClientStage.AUTHENTICATED


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_tampered_server_signature_is_refused(mechanism: ScramMechanism) -> None:
    server = server_for(mechanism, {"user": credential_from_password(mechanism, PASSWORD, 4096)})
    session = ScramClientSession(mechanism, "user", PASSWORD)
    server_final = server.receive_client_final(
        session.final_message(server.receive_client_first(session.first_message()))
    )
    signature = bytearray(base64.b64decode(server_final[2:]))
    signature[-1] ^= 1
    with pytest.raises(ScramAuthenticationError, match="Invalid SCRAM server signature"):
        session.verify_server_final(b"v=" + base64.b64encode(bytes(signature)))
    assert session.stage is ScramClientStage.FAILED


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_server_that_does_not_know_the_credential_cannot_forge_success(mechanism: ScramMechanism) -> None:
    # A server holding another credential for the user (an impostor): it accepts nothing, and its signature fails.
    impostor = server_for(mechanism, {"user": credential_from_password(mechanism, "other", 4096)})
    session = ScramClientSession(mechanism, "user", PASSWORD)
    session.final_message(impostor.receive_client_first(session.first_message()))
    forged = hashlib.new(mechanism.hash_name, b"guess").digest()
    with pytest.raises(ScramAuthenticationError):
        session.verify_server_final(b"v=" + base64.b64encode(forged))


def test_server_error_is_reported() -> None:
    session = rfc_session(SHA_256)
    session.first_message()
    session.final_message(RFC_SERVER_FIRST)
    with pytest.raises(ScramAuthenticationError, match="'invalid-proof'") as caught:
        session.verify_server_final(b"e=invalid-proof")
    assert not isinstance(caught.value, ScramProtocolError)
    assert session.stage is ScramClientStage.FAILED


def test_malformed_server_final_is_a_protocol_error() -> None:
    session = rfc_session(SHA_256)
    session.first_message()
    session.final_message(RFC_SERVER_FIRST)
    with pytest.raises(ScramProtocolError):
        session.verify_server_final(b"x=nonsense")
    assert session.stage is ScramClientStage.FAILED


# --- server-first refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nonce",
    [
        "someone-elses-nonce" + RFC_SERVER_NONCE,  # does not start with ours
        RFC_CLIENT_NONCE,  # adds nothing
        RFC_CLIENT_NONCE[:-1],  # shorter
        "x" + RFC_CLIENT_NONCE + RFC_SERVER_NONCE,  # ours, but not as a prefix
    ],
)
def test_server_nonce_must_extend_ours(nonce: str) -> None:
    session = rfc_session(SHA_256)
    session.first_message()
    with pytest.raises(ScramProtocolError, match="does not extend the client nonce"):
        session.final_message(server_first_with(nonce=nonce))
    assert session.stage is ScramClientStage.FAILED


def test_server_nonce_not_extending_ours_from_a_real_server() -> None:
    # kafkaguard's server answering *another* client's client-first: its nonce extends that client's nonce.
    server = server_for(SHA_256, {"user": credential_from_password(SHA_256, PASSWORD, 4096)})
    other = ScramClientSession(SHA_256, "user", PASSWORD)
    server_first = server.receive_client_first(other.first_message())
    session = ScramClientSession(SHA_256, "user", PASSWORD)
    session.first_message()
    with pytest.raises(ScramProtocolError):
        session.final_message(server_first)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_too_few_iterations_are_refused(mechanism: ScramMechanism) -> None:
    session = rfc_session(mechanism)
    session.first_message()
    with pytest.raises(ScramProtocolError, match="at least 4096"):
        session.final_message(server_first_with(iterations=4095))
    assert session.stage is ScramClientStage.FAILED


def test_too_many_iterations_are_refused_before_deriving(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> bytes:
        raise AssertionError("derived")

    monkeypatch.setattr(client_module, "salted_password", fail)
    session = rfc_session(SHA_512)
    session.first_message()
    with pytest.raises(ScramProtocolError, match=f"at most {MAX_SERVER_ITERATIONS}"):
        session.final_message(server_first_with(iterations=MAX_SERVER_ITERATIONS + 1))


def test_iterations_above_kafkas_maximum_but_within_the_cap_are_accepted() -> None:
    session = rfc_session(SHA_256)
    session.first_message()
    session.final_message(server_first_with(iterations=SHA_256.max_iterations + 1))
    assert session.stage is ScramClientStage.SERVER_FINAL


@pytest.mark.parametrize(
    "server_first",
    [b"", b"garbage", b"m=ext," + RFC_SERVER_FIRST, RFC_SERVER_FIRST.replace(b"i=4096", b"i=0"), b"\xff"],
)
def test_malformed_server_first_is_a_protocol_error(server_first: bytes) -> None:
    session = rfc_session(SHA_256)
    session.first_message()
    with pytest.raises(ScramProtocolError):
        session.final_message(server_first)
    assert session.stage is ScramClientStage.FAILED


# --- steps out of order ---------------------------------------------------------------------------------------------


def _at_stage(stage: ScramClientStage) -> ScramClientSession:
    session = rfc_session(SHA_256)
    if stage is ScramClientStage.FIRST:
        return session
    session.first_message()
    if stage is ScramClientStage.FINAL:
        return session
    if stage is ScramClientStage.FAILED:
        with pytest.raises(ScramProtocolError):
            session.final_message(b"garbage")
        return session
    session.final_message(RFC_SERVER_FIRST)
    if stage is ScramClientStage.AUTHENTICATED:
        session.verify_server_final(b"v=" + RFC_SERVER_SIGNATURES[SHA_256])
    return session


STEPS: dict[str, Callable[[ScramClientSession], object]] = {
    "first_message": lambda session: session.first_message(),
    "final_message": lambda session: session.final_message(RFC_SERVER_FIRST),
    "verify_server_final": lambda session: session.verify_server_final(b"v=" + RFC_SERVER_SIGNATURES[SHA_256]),
}


@pytest.mark.parametrize("stage", list(ScramClientStage))
@pytest.mark.parametrize("step", list(STEPS))
def test_steps_out_of_order_raise_state_error(stage: ScramClientStage, step: str) -> None:
    session = _at_stage(stage)
    assert session.stage is stage
    if stage.value == step:
        return  # the expected step; covered by the RFC exchange
    with pytest.raises(ScramStateError, match=f"{step} is not allowed in stage {stage.name}"):
        STEPS[step](session)
    assert session.stage is stage  # a state error changes nothing


def test_state_error_is_not_an_authentication_error() -> None:
    # The caller's bug, not the server's refusal (Kafka ILLEGAL_SASL_STATE).
    assert not issubclass(ScramStateError, ScramAuthenticationError)


# --- construction -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("username", "password", "nonce"),
    [
        ("", PASSWORD, None),
        ("us\x00er", PASSWORD, None),
        ("user", "", None),
        ("user", "pen\ud800cil", None),
        ("user", PASSWORD, ""),
        ("user", PASSWORD, "with,comma"),
        ("user", PASSWORD, "caf\u00e9"),
    ],
)
def test_unusable_arguments_are_config_errors(username: str, password: str, nonce: str | None) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        ScramClientSession(SHA_256, username, password, nonce=nonce)
    if password:
        assert password not in str(caught.value)
    assert caught.value.__context__ is None  # the UnicodeEncodeError (holding the password) is not chained


# --- the password stays secret ------------------------------------------------------------------------------------

SECRET_PASSWORD = "hunter2-very-secret"  # noqa: S105 - the secret whose leaks the tests look for


def test_password_is_not_in_repr_or_str_at_any_stage() -> None:
    server = server_for(SHA_512, {"svc": credential_from_password(SHA_512, SECRET_PASSWORD, 4096)})
    session = ScramClientSession(SHA_512, "svc", SECRET_PASSWORD)
    texts = [repr(session), str(session)]
    server_first = server.receive_client_first(session.first_message())
    texts.append(repr(session))
    server_final = server.receive_client_final(session.final_message(server_first))
    texts.append(repr(session))
    session.verify_server_final(server_final)
    texts.append(repr(session))
    assert all(SECRET_PASSWORD not in text for text in texts)
    assert "svc" in texts[0]
    assert "SCRAM-SHA-512" in texts[0]


def test_password_is_not_in_errors_or_in_the_cache_repr() -> None:
    cache = SaltedPasswordCache()
    session = ScramClientSession(SHA_256, "svc", SECRET_PASSWORD, nonce=RFC_CLIENT_NONCE, salted_password_cache=cache)
    session.first_message()
    session.final_message(RFC_SERVER_FIRST)
    errors: list[ScramError] = []
    with pytest.raises(ScramAuthenticationError) as caught:
        session.verify_server_final(b"v=" + RFC_SERVER_SIGNATURES[SHA_256])
    errors.append(caught.value)
    with pytest.raises(ScramStateError) as state:
        session.final_message(RFC_SERVER_FIRST)
    errors.append(state.value)
    for error in errors:
        assert SECRET_PASSWORD not in str(error)
        assert SECRET_PASSWORD not in repr(error)
    assert SECRET_PASSWORD not in repr(cache)
    assert repr(cache) == "SaltedPasswordCache(entries=1, max_entries=16)"


def test_session_drops_the_password_once_the_proof_is_computed() -> None:
    session = rfc_session(SHA_256)
    session.first_message()
    session.final_message(RFC_SERVER_FIRST)
    assert session._password is None


# --- the salted password cache ------------------------------------------------------------------------------------


def counting_derivation(monkeypatch: pytest.MonkeyPatch) -> list[tuple[ScramMechanism, bytes, int]]:
    calls: list[tuple[ScramMechanism, bytes, int]] = []

    def counting(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
        calls.append((mechanism, salt, iterations))
        return salted_password(mechanism, password, salt, iterations)

    monkeypatch.setattr(client_module, "salted_password", counting)
    return calls


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_cache_derives_once_for_two_sessions_with_the_same_salt(
    mechanism: ScramMechanism, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting_derivation(monkeypatch)
    users = {"user": credential_from_password(mechanism, PASSWORD, 4096)}
    cache = SaltedPasswordCache()
    for _ in range(2):
        server = server_for(mechanism, users)
        session = ScramClientSession(mechanism, "user", PASSWORD, salted_password_cache=cache)
        server_final = server.receive_client_final(
            session.final_message(server.receive_client_first(session.first_message()))
        )
        session.verify_server_final(server_final)
        assert session.stage is ScramClientStage.AUTHENTICATED
    assert calls == [(mechanism, users["user"].salt, 4096)]


def test_without_a_cache_every_session_derives(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_derivation(monkeypatch)
    for _ in range(2):
        session = rfc_session(SHA_256)
        session.first_message()
        session.final_message(RFC_SERVER_FIRST)
    assert len(calls) == 2


def test_cache_key_includes_mechanism_salt_iterations_and_password(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_derivation(monkeypatch)
    cache = SaltedPasswordCache()
    base = (SHA_256, PASSWORD, RFC_SALT, 4096)
    variants = [
        base,
        (SHA_512, PASSWORD, RFC_SALT, 4096),
        (SHA_256, PASSWORD, RFC_SALT + b"x", 4096),
        (SHA_256, PASSWORD, RFC_SALT, 8192),
        (SHA_256, "rotated-password", RFC_SALT, 4096),  # a new password with the same salt is not the old one
        base,
    ]
    results = [cache.salted_password(*variant) for variant in variants]
    assert len(calls) == 5
    assert results[0] == results[-1]
    assert results[4] == salted_password(SHA_256, "rotated-password", RFC_SALT, 4096)
    assert len(set(results)) == 5


def test_cache_is_bounded_and_evicts_the_least_recently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_derivation(monkeypatch)
    cache = SaltedPasswordCache(max_entries=2)
    salts = [bytes([n]) * 16 for n in range(3)]
    cache.salted_password(SHA_256, PASSWORD, salts[0], 4096)
    cache.salted_password(SHA_256, PASSWORD, salts[1], 4096)
    cache.salted_password(SHA_256, PASSWORD, salts[0], 4096)  # salts[0] is now the most recent
    cache.salted_password(SHA_256, PASSWORD, salts[2], 4096)  # evicts salts[1]
    assert len(cache) == 2
    assert len(calls) == 3
    cache.salted_password(SHA_256, PASSWORD, salts[0], 4096)
    assert len(calls) == 3
    cache.salted_password(SHA_256, PASSWORD, salts[1], 4096)
    assert len(calls) == 4


def test_default_cache_holds_sixteen_entries() -> None:
    cache = SaltedPasswordCache()
    for n in range(20):
        cache.salted_password(SHA_256, PASSWORD, bytes([n]) * 16, 4096)
    assert len(cache) == 16


def test_cache_needs_at_least_one_entry() -> None:
    with pytest.raises(InvalidConfigError):
        SaltedPasswordCache(max_entries=0)


def test_concurrent_misses_derive_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_derivation(monkeypatch)
    cache = SaltedPasswordCache()
    start = threading.Barrier(8)
    results: list[bytes] = []

    def worker() -> None:
        start.wait()
        results.append(cache.salted_password(SHA_512, PASSWORD, RFC_SALT, 16384))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(set(results)) == 1
    assert len(results) == 8

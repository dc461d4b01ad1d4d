"""The SASL/SCRAM server session: known answers, a real client (scramp), no user enumeration, refusals, robustness."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac
from collections.abc import Callable, Iterator

import pytest
import scramp  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.errors import (
    InvalidConfigError,
    KafkaguardError,
    ScramAuthenticationError,
    ScramError,
    ScramProtocolError,
    ScramStateError,
)
from kafkaguard.scram import (
    AUTHORIZATION_ID_MISMATCH_MESSAGE,
    DEFAULT_ITERATIONS,
    DEFAULT_SALT_BYTES,
    MAX_SALT_BYTES,
    DecoyProfile,
    ScramCredential,
    ScramMechanism,
    ScramServerSession,
    ScramServerStage,
    authentication_failed_message,
    credential_from_password,
    credential_from_salted_password,
    parse_server_final,
    parse_server_first,
    salted_password,
)

SHA_256 = ScramMechanism.SCRAM_SHA_256
SHA_512 = ScramMechanism.SCRAM_SHA_512
SECRET = b"0123456789abcdef-decoy-secret"

# RFC 7677 §3 and its SCRAM-SHA-512 twin (SEMANTICS.md §12.1, §12.4; scram_vectors.txt).
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


def nobody(username: str) -> ScramCredential | None:
    return None


def fixed_nonce(nonce: str = RFC_SERVER_NONCE) -> Callable[[], str]:
    return lambda: nonce


def make_session(
    mechanism: ScramMechanism,
    users: dict[str, ScramCredential],
    *,
    nonce: str | None = RFC_SERVER_NONCE,
    secret: bytes = SECRET,
    reauthentication: bool = False,
) -> ScramServerSession:
    if nonce is None:
        return ScramServerSession(mechanism, users.get, decoy_secret=secret, reauthentication=reauthentication)
    return ScramServerSession(
        mechanism, users.get, decoy_secret=secret, nonce_factory=fixed_nonce(nonce), reauthentication=reauthentication
    )


@functools.cache
def rfc_credential(mechanism: ScramMechanism) -> ScramCredential:
    return credential_from_password(mechanism, "pencil", 4096, RFC_SALT)


def client_final_for(
    mechanism: ScramMechanism,
    password: str,
    gs2_header: bytes,
    client_first_bare: bytes,
    server_first: bytes,
) -> bytes:
    """A minimal client written from RFC 5802 §3, for the cases scramp cannot produce (authzid, gs2 flag y)."""
    parsed = parse_server_first(server_first)
    salted = salted_password(mechanism, password, parsed.salt, parsed.iterations)
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = b"c=" + base64.b64encode(gs2_header) + b",r=" + parsed.nonce.encode()
    auth_message = client_first_bare + b"," + server_first + b"," + without_proof
    signature = hmac.digest(stored_key, auth_message, mechanism.hash_name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return without_proof + b",p=" + base64.b64encode(proof)


def scramp_exchange(
    session: ScramServerSession, username: str, password: str, *, client_nonce: str | None = None
) -> tuple[scramp.ScramClient, bytes]:
    """Runs scramp's client against the session up to client-final; returns the client and client-final."""
    client = scramp.ScramClient([session.mechanism.mechanism_name], username, password, c_nonce=client_nonce)
    server_first = session.receive_client_first(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    return client, client.get_client_final().encode()


# --- known answers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_rfc7677_exchange_byte_for_byte(mechanism: ScramMechanism) -> None:
    session = make_session(mechanism, {"user": rfc_credential(mechanism)})
    stages = [session.stage]
    assert session.receive_client_first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    stages.append(session.stage)
    server_final = session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[mechanism])
    assert server_final == b"v=" + RFC_SERVER_SIGNATURES[mechanism]
    stages.append(session.stage)
    assert stages == [ScramServerStage.CLIENT_FIRST, ScramServerStage.CLIENT_FINAL, ScramServerStage.AUTHENTICATED]
    assert session.authenticated_user == "user"


def test_kafka_scram_parser_vector_authenticates_alice_with_a_real_client() -> None:
    # The stored form comes from the salted password alone, as AlterUserScramCredentials carries it (§12.3).
    salted = base64.b64decode("mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=")
    credential = credential_from_salted_password(SHA_256, b"1lv4pdnw4fwq7notcxm0yy1k7q", salted, 8192)
    session = make_session(SHA_256, {"alice": credential}, nonce=None)
    client, client_final = scramp_exchange(session, "alice", "alice")
    assert parse_server_first(client.server_first.encode()).iterations == 8192
    client.set_server_final(session.receive_client_final(client_final).decode())
    assert session.authenticated_user == "alice"


# --- a real, independent client ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize(
    ("username", "password", "iterations"),
    [("alice", "alice-secret", 4096), ("a,b=c", "p,w=d", 4096), ("\u00e9l\u00e8ve", "m\u00f8t de passe", 16384)],
)
def test_round_trip_with_scramp(mechanism: ScramMechanism, username: str, password: str, iterations: int) -> None:
    credential = credential_from_password(mechanism, password, iterations)
    session = make_session(mechanism, {username: credential}, nonce=None)
    client, client_final = scramp_exchange(session, username, password)
    server_final = session.receive_client_final(client_final)
    client.set_server_final(server_final.decode())  # scramp verifies the server signature
    assert session.authenticated_user == username
    assert session.username == username
    assert session.stage is ScramServerStage.AUTHENTICATED
    assert session.authenticated_credential is credential  # what a session is later checked against (not a copy)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_wrong_password_fails_with_kafkas_generic_message(mechanism: ScramMechanism) -> None:
    session = make_session(mechanism, {"alice": credential_from_password(mechanism, "right")}, nonce=None)
    _, client_final = scramp_exchange(session, "alice", "wrong")
    with pytest.raises(ScramAuthenticationError) as caught:
        session.receive_client_final(client_final)
    assert type(caught.value) is ScramAuthenticationError
    assert str(caught.value) == (
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )
    assert session.stage is ScramServerStage.FAILED
    with pytest.raises(ScramStateError):
        _ = session.authenticated_user
    with pytest.raises(ScramStateError):
        _ = session.authenticated_credential


def test_reauthentication_wording() -> None:
    session = make_session(SHA_512, {"alice": rfc_credential(SHA_512)}, reauthentication=True)
    _, client_final = scramp_exchange(session, "alice", "wrong")
    with pytest.raises(ScramAuthenticationError) as caught:
        session.receive_client_final(client_final)
    assert str(caught.value) == (
        "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    assert str(caught.value) == authentication_failed_message(SHA_512, reauthentication=True)


def test_server_nonce_extends_the_client_nonce_and_is_fresh() -> None:
    nonces = set()
    for _ in range(3):
        session = make_session(SHA_256, {"user": rfc_credential(SHA_256)}, nonce=None)
        server_first = parse_server_first(session.receive_client_first(RFC_CLIENT_FIRST))
        assert server_first.nonce.startswith(RFC_CLIENT_NONCE)
        assert len(server_first.nonce) == len(RFC_CLIENT_NONCE) + 32
        nonces.add(server_first.nonce)
    assert len(nonces) == 3


# --- no user enumeration -------------------------------------------------------------------------------------------


def failure_text(session: ScramServerSession, username: str, password: str) -> tuple[type[BaseException], str]:
    _, client_final = scramp_exchange(session, username, password)
    with pytest.raises(ScramError) as caught:
        session.receive_client_final(client_final)
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_unknown_user_fails_exactly_like_a_wrong_password(mechanism: ScramMechanism) -> None:
    users = {"alice": credential_from_password(mechanism, "right")}
    wrong_password = failure_text(make_session(mechanism, users, nonce=None), "alice", "wrong")
    unknown_user = failure_text(make_session(mechanism, users, nonce=None), "mallory", "right")
    assert unknown_user == wrong_password == (ScramAuthenticationError, authentication_failed_message(mechanism))


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_unknown_user_gets_a_well_formed_deterministic_server_first(mechanism: ScramMechanism) -> None:
    def server_first(name: str, *, secret: bytes = SECRET, of: ScramMechanism = mechanism) -> bytes:
        session = make_session(of, {}, secret=secret)
        return session.receive_client_first(b"n,,n=" + name.encode() + b",r=" + RFC_CLIENT_NONCE.encode())

    first = server_first("mallory")
    assert first == server_first("mallory")
    parsed = parse_server_first(first)
    assert parsed.nonce == RFC_CLIENT_NONCE + RFC_SERVER_NONCE
    # Without a profile: the shape kafkaguard gives the credentials it creates.
    assert (parsed.iterations, len(parsed.salt)) == (DEFAULT_ITERATIONS, DEFAULT_SALT_BYTES)
    assert first.startswith(b"r=" + (RFC_CLIENT_NONCE + RFC_SERVER_NONCE).encode() + b",s=")
    # Per name, per secret and per mechanism.
    salts = {
        parse_server_first(server_first("mallory")).salt,
        parse_server_first(server_first("mallorz")).salt,
        parse_server_first(server_first("mallory", secret=SECRET + b"!")).salt,
        parse_server_first(server_first("mallory", of=SHA_512 if mechanism is SHA_256 else SHA_256)).salt,
    }
    assert len(salts) == 4


@pytest.mark.parametrize(("iterations", "salt_bytes"), [(4096, 16), (8192, 64), (16384, MAX_SALT_BYTES), (5000, 33)])
def test_the_decoy_has_the_shape_of_its_profile(iterations: int, salt_bytes: int) -> None:
    # What a deployment's real users look like (e.g. confluent-kafka's 64-byte salts) is what unknown users get.
    profile = DecoyProfile(iterations=iterations, salt_bytes=salt_bytes)
    session = ScramServerSession(SHA_256, nobody, decoy_secret=SECRET, decoy_profile=profile)
    parsed = parse_server_first(session.receive_client_first(RFC_CLIENT_FIRST))
    assert (parsed.iterations, len(parsed.salt)) == (iterations, salt_bytes)


def test_a_decoy_salt_is_a_prefix_of_the_same_names_longer_one() -> None:
    # So a profile that grows (24 → 64 bytes) keeps what an observer saw before, as a real salt would not change.
    def salt(salt_bytes: int, name: bytes = b"user") -> bytes:
        profile = DecoyProfile(iterations=4096, salt_bytes=salt_bytes)
        session = ScramServerSession(SHA_512, nobody, decoy_secret=SECRET, decoy_profile=profile)
        return parse_server_first(session.receive_client_first(b"n,,n=" + name + b",r=abc")).salt

    assert salt(128).startswith(salt(64)) and salt(64).startswith(salt(24)) and salt(24).startswith(salt(16))
    assert len(set(salt(128)[i : i + 32] for i in range(0, 128, 32))) == 4
    assert salt(64, b"other") != salt(64)


def test_an_unknown_user_looks_like_a_known_one_of_the_same_shape() -> None:
    # A real user with confluent-kafka's shape (64-byte salt) and 8192 iterations; the decoy has the same shape.
    real = credential_from_password(SHA_256, "alice-secret", 8192, salt=b"\x07" * 64)
    profile = DecoyProfile(iterations=8192, salt_bytes=64)

    def shape(name: bytes) -> tuple[int, int, int]:
        session = ScramServerSession(SHA_256, {"alice": real}.get, decoy_secret=SECRET, decoy_profile=profile)
        first = session.receive_client_first(b"n,,n=" + name + b",r=" + RFC_CLIENT_NONCE.encode())
        parsed = parse_server_first(first)
        return parsed.iterations, len(parsed.salt), len(first) - len(name)

    assert shape(b"alice") == shape(b"mallo")  # same i=, same salt length, same message length
    assert shape(b"alice")[:2] == (8192, 64)


def test_unknown_user_cannot_authenticate_even_if_the_decoy_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make the decoy for an unknown "user" equal the real RFC credential, so the proof check itself passes:
    # the session must still refuse, because the user was not found.
    monkeypatch.setattr(ScramServerSession, "_decoy_credential", lambda self, username: rfc_credential(SHA_256))
    session = make_session(SHA_256, {})
    assert session.receive_client_first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    with pytest.raises(ScramAuthenticationError) as caught:
        session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])
    assert str(caught.value) == authentication_failed_message(SHA_256)


def test_credential_with_too_few_iterations_is_refused_like_an_unknown_user() -> None:
    weak_salt = b"weak-salt"
    salted = salted_password(SHA_256, "pencil", weak_salt, 1024)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    weak = ScramCredential(
        SHA_256, weak_salt, hashlib.sha256(client_key).digest(), hmac.digest(salted, b"Server Key", "sha256"), 1024
    )
    session = make_session(SHA_256, {"user": weak}, nonce=None)
    client, client_final = scramp_exchange(session, "user", "pencil")
    announced = parse_server_first(client.server_first.encode())
    assert (announced.iterations, announced.salt == weak_salt) == (DEFAULT_ITERATIONS, False)
    with pytest.raises(ScramAuthenticationError) as caught:
        session.receive_client_final(client_final)
    assert str(caught.value) == authentication_failed_message(SHA_256)


def test_credential_of_another_mechanism_is_refused() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_512)})
    session.receive_client_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramAuthenticationError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])


# --- authorization id, channel binding, tokens, nonces --------------------------------------------------------------


def test_authzid_equal_to_the_username_is_accepted() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    server_first = session.receive_client_first(b"n,a=user,n=user,r=" + RFC_CLIENT_NONCE.encode())
    client_final = client_final_for(
        SHA_256, "pencil", b"n,a=user,", b"n=user,r=" + RFC_CLIENT_NONCE.encode(), server_first
    )
    assert client_final.startswith(b"c=bixhPXVzZXIs,")
    session.receive_client_final(client_final)
    assert session.authenticated_user == "user"


def test_authzid_mismatch_gets_kafkas_message() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256), "admin": rfc_credential(SHA_256)})
    with pytest.raises(ScramAuthenticationError) as caught:
        session.receive_client_first(b"n,a=admin,n=user,r=" + RFC_CLIENT_NONCE.encode())
    assert type(caught.value) is ScramAuthenticationError
    assert str(caught.value) == AUTHORIZATION_ID_MISMATCH_MESSAGE
    assert str(caught.value) == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )
    assert session.stage is ScramServerStage.FAILED


def test_gs2_flag_y_authenticates_when_c_carries_it() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    server_first = session.receive_client_first(b"y,,n=user,r=" + RFC_CLIENT_NONCE.encode())
    client_final = client_final_for(SHA_256, "pencil", b"y,,", b"n=user,r=" + RFC_CLIENT_NONCE.encode(), server_first)
    assert client_final.startswith(b"c=eSws,")
    session.receive_client_final(client_final)
    assert session.authenticated_user == "user"


def test_channel_binding_data_must_be_the_gs2_header() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    session.receive_client_first(b"y,,n=user,r=" + RFC_CLIENT_NONCE.encode())
    with pytest.raises(ScramProtocolError, match="c= must be the base64 of the client-first gs2 header"):
        session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])  # c=biws is "n,,"


def test_channel_binding_is_refused() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    with pytest.raises(ScramProtocolError, match="channel binding"):
        session.receive_client_first(b"p=tls-server-end-point,,n=user,r=abc")
    assert session.stage is ScramServerStage.FAILED


def test_delegation_tokens_are_refused() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    with pytest.raises(ScramProtocolError, match="tokenauth=true"):
        session.receive_client_first(RFC_CLIENT_FIRST + b",tokenauth=true")


def test_extensions_are_ignored_but_part_of_the_auth_message() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    bare = b"n=user,r=" + RFC_CLIENT_NONCE.encode() + b",tokenauth=false,x=1"
    server_first = session.receive_client_first(b"n,," + bare)
    session.receive_client_final(client_final_for(SHA_256, "pencil", b"n,,", bare, server_first))
    assert session.authenticated_user == "user"


def test_final_nonce_must_be_the_combined_nonce() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    session.receive_client_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramAuthenticationError) as caught:
        session.receive_client_final(b"c=biws,r=" + RFC_CLIENT_NONCE.encode() + b",p=" + RFC_PROOFS[SHA_256])
    assert str(caught.value) == authentication_failed_message(SHA_256)


def test_proof_of_the_wrong_length_is_refused() -> None:
    session = make_session(SHA_512, {"user": rfc_credential(SHA_512)})
    session.receive_client_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramProtocolError, match="proof has 32 bytes; SCRAM-SHA-512 proofs have 64"):
        session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])


def test_over_long_messages_are_refused() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    with pytest.raises(ScramProtocolError, match="at most 4096"):
        session.receive_client_first(RFC_CLIENT_FIRST + b"a" * 4096)
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    session.receive_client_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramProtocolError, match="at most 4096"):
        session.receive_client_final(b"c=biws,r=" + b"a" * 4096 + b",p=" + RFC_PROOFS[SHA_256])


# --- the state machine and configuration ----------------------------------------------------------------------------


def test_steps_out_of_order_are_refused_clearly() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    with pytest.raises(
        ScramStateError, match="receive_client_final is not allowed in stage CLIENT_FIRST; the next step"
    ):
        session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])
    with pytest.raises(ScramStateError, match="authenticated_user is not allowed in stage CLIENT_FIRST"):
        _ = session.authenticated_user
    assert session.stage is ScramServerStage.CLIENT_FIRST  # a refused call changes nothing
    session.receive_client_first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramStateError, match="the next step is receive_client_final"):
        session.receive_client_first(RFC_CLIENT_FIRST)
    session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])
    with pytest.raises(ScramStateError, match="in stage AUTHENTICATED"):
        session.receive_client_final(RFC_FINAL_WITHOUT_PROOF + b",p=" + RFC_PROOFS[SHA_256])
    assert not issubclass(ScramStateError, ScramAuthenticationError)


def test_a_failed_session_refuses_everything() -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)})
    with pytest.raises(ScramProtocolError):
        session.receive_client_first(b"garbage")
    for step in (session.receive_client_first, session.receive_client_final):
        with pytest.raises(ScramStateError, match="in stage FAILED; the next step is nothing"):
            step(RFC_CLIENT_FIRST)


def test_lookup_errors_propagate_and_fail_the_session() -> None:
    class StoreDownError(KafkaguardError):
        pass

    def lookup(username: str) -> ScramCredential | None:
        raise StoreDownError("store unavailable")

    session = ScramServerSession(SHA_256, lookup, decoy_secret=SECRET)
    with pytest.raises(StoreDownError):
        session.receive_client_first(RFC_CLIENT_FIRST)
    assert session.stage is ScramServerStage.FAILED


@pytest.mark.parametrize("nonce", ["", "a,b", "a b", "\u00e9"])
def test_unusable_nonce_factory_is_a_configuration_error(nonce: str) -> None:
    session = make_session(SHA_256, {"user": rfc_credential(SHA_256)}, nonce=nonce)
    with pytest.raises(InvalidConfigError, match="nonce factory"):
        session.receive_client_first(RFC_CLIENT_FIRST)


def test_configuration_is_checked() -> None:
    with pytest.raises(InvalidConfigError, match="at least 16 random bytes; got 15"):
        ScramServerSession(SHA_256, nobody, decoy_secret=b"x" * 15)
    for iterations in (4095, 16385):
        profile = DecoyProfile(iterations=iterations, salt_bytes=24)
        with pytest.raises(InvalidConfigError, match="decoy's iterations must be between 4096 and 16384; got"):
            ScramServerSession(SHA_256, nobody, decoy_secret=SECRET, decoy_profile=profile)


# --- secrets never leak --------------------------------------------------------------------------------------------


def secret_forms(secret: bytes) -> Iterator[str]:
    yield base64.b64encode(secret).decode()
    yield base64.b64encode(secret).decode().rstrip("=")[:16]
    yield secret.hex()
    yield repr(secret)
    yield secret.decode("latin-1")


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_no_secret_in_any_repr_str_or_error(mechanism: ScramMechanism) -> None:
    password = "correct horse battery staple"  # noqa: S105 -- the secret whose leaks this test looks for
    salt = b"a-salt-long-enough-to-search"
    salted = salted_password(mechanism, password, salt, 4096)
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    credential = credential_from_password(mechanism, password, 4096, salt)
    secrets = [password.encode(), salt, salted, client_key, credential.stored_key, credential.server_key]
    texts: list[str] = [repr(credential), str(credential)]

    def collect(error: BaseException) -> None:
        texts.extend([str(error), repr(error)])
        for linked in (error.__cause__, error.__context__):
            if linked is not None:
                collect(linked)

    # A success: the session at every stage, and the parsed messages.
    session = make_session(mechanism, {"alice": credential}, nonce=None)
    texts.append(repr(session))
    client, client_final = scramp_exchange(session, "alice", password)
    texts += [repr(session), str(session), repr(parse_server_first(client.server_first.encode()))]
    proof = base64.b64decode(client_final.rsplit(b",p=", 1)[1])
    secrets.append(proof)
    server_final = session.receive_client_final(client_final)
    texts += [repr(session), repr(parse_server_final(server_final))]
    # Failures: wrong proofs, corrupted proofs, unknown users, malformed messages.
    for final in (
        client_final[:-8] + b"AAAAAAA=",
        client_final.replace(b"p=", b"p=!"),
        client_final[:-1],
        client_final + b",x=1",
        client_final + b"\xff",
        b"\xff" + client_final,
        client_final.replace(b"p=", "p=\u00e9".encode()),
    ):
        session = make_session(mechanism, {"alice": credential}, nonce=None)
        scramp_exchange(session, "alice", password, client_nonce="fixed")
        texts.append(repr(session))
        with pytest.raises(ScramError) as caught:
            session.receive_client_final(final)
        collect(caught.value)
        texts.append(repr(session))
    for first in (
        b"n,,n=alice,r=" + base64.b64encode(salted) + b",m=1",
        b"n,,n=alice,r=" + base64.b64encode(salted) + b"\xff",
        b"\xff" + salted,
        b"n,a=bob,n=alice,r=x",
    ):
        session = make_session(mechanism, {"alice": credential})
        with pytest.raises(ScramError) as caught:
            session.receive_client_first(first)
        collect(caught.value)

    for text in texts:
        for secret in secrets:
            for form in secret_forms(secret):
                assert form not in text, (text, secret)


# --- robustness: corrupted client messages ------------------------------------------------------------------------

_CLIENT_NONCE = "fyko+d2lbbFgONRv9qkxdawL"


@functools.cache
def recorded_exchange(mechanism: ScramMechanism) -> tuple[ScramCredential, bytes, bytes]:
    """One real scramp exchange (credential, client-first, client-final) that the server replays deterministically."""
    credential = credential_from_password(mechanism, "pencil", 4096, RFC_SALT)
    session = make_session(mechanism, {"user": credential})
    client = scramp.ScramClient([mechanism.mechanism_name], "user", "pencil", c_nonce=_CLIENT_NONCE)
    client_first = client.get_client_first().encode()
    client.set_server_first(session.receive_client_first(client_first).decode())
    client_final = client.get_client_final().encode()
    session.receive_client_final(client_final)
    assert session.authenticated_user == "user"
    return credential, client_first, client_final


@st.composite
def corrupted(draw: st.DrawFn, message: bytes) -> bytes:
    """A different message: one bit flipped, cut short, bytes inserted, deleted or replaced."""
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "replace"]))
    if kind == "truncate":
        return message[: draw(st.integers(0, len(message) - 1))]
    position = draw(st.integers(0, len(message) - 1))
    if kind == "flip":
        flipped = message[position] ^ (1 << draw(st.integers(0, 7)))
        return message[:position] + bytes([flipped]) + message[position + 1 :]
    if kind == "delete":
        end = draw(st.integers(position + 1, min(len(message), position + 8)))
        return message[:position] + message[end:]
    interesting = st.sampled_from([b",", b"=", b"=2C", b"\x00", b"\xff", b"a", b"A", b",x=1", b"p=", b",r=a"])
    inserted = draw(interesting | st.binary(min_size=1, max_size=6))
    if kind == "insert":
        return message[:position] + inserted + message[position:]
    replaced = message[:position] + inserted + message[position + len(inserted) :]
    return replaced if replaced != message else message + b"x"


@st.composite
def corrupted_client_first(draw: st.DrawFn) -> tuple[ScramMechanism, bytes]:
    mechanism = draw(st.sampled_from(list(ScramMechanism)))
    return mechanism, draw(corrupted(recorded_exchange(mechanism)[1]))


@st.composite
def corrupted_client_final(draw: st.DrawFn) -> tuple[ScramMechanism, bytes]:
    mechanism = draw(st.sampled_from(list(ScramMechanism)))
    return mechanism, draw(corrupted(recorded_exchange(mechanism)[2]))


@given(case=corrupted_client_first())
def test_corrupted_client_first_never_authenticates_and_fails_only_with_scram_errors(
    case: tuple[ScramMechanism, bytes],
) -> None:
    mechanism, client_first = case
    credential, original_first, original_final = recorded_exchange(mechanism)
    assert client_first != original_first
    session = make_session(mechanism, {"user": credential})
    try:
        session.receive_client_first(client_first)
    except ScramError:
        assert session.stage is ScramServerStage.FAILED
        return
    # Some corruptions still parse (another nonce, another name, an extension); the original proof cannot match.
    with pytest.raises(ScramAuthenticationError):
        session.receive_client_final(original_final)
    assert session.stage is ScramServerStage.FAILED


@given(case=corrupted_client_final())
def test_corrupted_client_final_is_always_rejected_with_scram_errors(case: tuple[ScramMechanism, bytes]) -> None:
    mechanism, client_final = case
    credential, client_first, original_final = recorded_exchange(mechanism)
    assert client_final != original_final
    session = make_session(mechanism, {"user": credential})
    session.receive_client_first(client_first)
    with pytest.raises(ScramAuthenticationError):
        session.receive_client_final(client_final)
    assert session.stage is ScramServerStage.FAILED


@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_fail_only_with_scram_errors(data: bytes) -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential, client_first, _ = recorded_exchange(mechanism)
    first = make_session(mechanism, {"user": credential})
    with contextlib.suppress(ScramError):
        first.receive_client_first(data)
    final = make_session(mechanism, {"user": credential})
    final.receive_client_first(client_first)
    with pytest.raises(ScramAuthenticationError):
        final.receive_client_final(data)

"""Parsing and formatting of the four SCRAM messages (RFC 5802 §7; SEMANTICS.md §11.2, §12.1)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaguard.errors import ScramAuthenticationError, ScramProtocolError
from kafkaguard.scram import (
    MAX_MESSAGE_BYTES,
    ClientFinalMessage,
    ClientFirstMessage,
    ServerFinalMessage,
    ServerFirstMessage,
    format_client_final,
    format_client_first,
    format_server_final,
    format_server_first,
    parse_client_final,
    parse_client_first,
    parse_server_final,
    parse_server_first,
)
from kafkaguard.scram.messages import decode_base64, escape_saslname, is_valid_nonce, unescape_saslname

# RFC 7677 §3.
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


# --- RFC 7677 messages -------------------------------------------------------------------------------------------


def test_rfc7677_client_first() -> None:
    message = parse_client_first(CLIENT_FIRST)
    assert message == ClientFirstMessage(username="user", nonce=CLIENT_NONCE)
    assert (message.gs2_flag, message.authzid, message.extensions) == ("n", None, ())
    assert message.gs2_header == "n,,"
    assert message.bare == "n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert format_client_first(message) == CLIENT_FIRST


def test_rfc7677_server_first() -> None:
    message = parse_server_first(SERVER_FIRST)
    assert message == ServerFirstMessage(nonce=NONCE, salt=SALT, iterations=4096)
    assert message.text.encode() == SERVER_FIRST
    assert format_server_first(message) == SERVER_FIRST


def test_rfc7677_client_final() -> None:
    message = parse_client_final(CLIENT_FINAL)
    assert message == ClientFinalMessage(channel_binding=b"n,,", nonce=NONCE, proof=PROOF)
    assert message.without_proof == "c=biws,r=" + NONCE
    assert format_client_final(message) == CLIENT_FINAL


def test_rfc7677_server_final() -> None:
    message = parse_server_final(SERVER_FINAL)
    assert message == ServerFinalMessage(verifier=base64.b64decode(SERVER_FINAL[2:]))
    assert message.error is None
    assert format_server_final(message) == SERVER_FINAL


# --- client-first ------------------------------------------------------------------------------------------------


def test_gs2_flag_y_is_accepted() -> None:
    message = parse_client_first(b"y,,n=user,r=abc")
    assert (message.gs2_flag, message.gs2_header) == ("y", "y,,")
    assert format_client_first(message) == b"y,,n=user,r=abc"


@pytest.mark.parametrize("header", [b"p=tls-unique,,", b"p=tls-server-end-point,a=user,", b"p=,,"])
def test_channel_binding_is_refused_clearly(header: bytes) -> None:
    with pytest.raises(ScramProtocolError, match=r"channel binding \(gs2 flag 'p='\) is not supported"):
        parse_client_first(header + b"n=user,r=abc")


@pytest.mark.parametrize("message", [b"x,,n=user,r=abc", b",,n=user,r=abc", b"nn,,n=user,r=abc", b"N,,n=user,r=abc"])
def test_unknown_gs2_flag_is_refused(message: bytes) -> None:
    with pytest.raises(ScramProtocolError, match="gs2 flag 'n,' or 'y,'"):
        parse_client_first(message)


def test_authzid_is_parsed_and_unescaped() -> None:
    message = parse_client_first(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc")
    assert (message.authzid, message.username) == ("a,b=c", "a,b=c")
    assert message.gs2_header == "n,a=a=2Cb=3Dc,"
    assert format_client_first(message) == b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc"


@pytest.mark.parametrize("message", [b"n,a=,n=user,r=abc", b"n,b=user,n=user,r=abc", b"n,user,n=user,r=abc"])
def test_malformed_authzid_is_refused(message: bytes) -> None:
    with pytest.raises(ScramProtocolError):
        parse_client_first(message)


def test_username_escaping() -> None:
    assert escape_saslname("a,b=c") == "a=2Cb=3Dc"
    assert escape_saslname("=2C") == "=3D2C"
    assert unescape_saslname("=3D2C") == "=2C"
    assert unescape_saslname("a=2Cb=3Dc") == "a,b=c"
    assert parse_client_first(b"n,,n=\xc3\xa9l\xc3\xa8ve=3D1,r=abc").username == "\u00e9l\u00e8ve=1"


@pytest.mark.parametrize("name", ["", "=", "a=", "a=2", "a=2c", "a=3d", "a=41", "a==3D", "=2D", "a\x00b"])
def test_any_other_equals_sequence_or_nul_in_a_username_is_refused(name: str) -> None:
    with pytest.raises(ScramProtocolError, match="Malformed SCRAM user name"):
        unescape_saslname(name)
    with pytest.raises(ScramProtocolError):
        parse_client_first(b"n,,n=" + name.encode() + b",r=abc")


@pytest.mark.parametrize(
    "message",
    [
        b"n,,n=user",
        b"n,,r=abc,n=user",
        b"n,,n=user,x=abc",
        b"n,,user,r=abc",
        b"n,n=user,r=abc",
        b"n,,n=user,r=abc,",
        b"n,,n=user,r=abc,x",
        b"n,,n=user,r=abc,x=",
        b"n,,n=user,r=abc,1=a",
        b"n,,n=user,r=abc,r=def",
        b"n,,n=user,r=abc,p=abc",
        b"n,,n=user,r=abc,ext=1,ext=2",
    ],
)
def test_malformed_client_first_is_refused(message: bytes) -> None:
    with pytest.raises(ScramProtocolError, match="SCRAM"):
        parse_client_first(message)


@pytest.mark.parametrize("nonce", [b"", b"a b", b"a\x7fb", b"a\x00b", b"\xc3\xa9", b"a\tb"])
def test_nonce_must_be_printable_ascii(nonce: bytes) -> None:
    with pytest.raises(ScramProtocolError, match="nonce"):
        parse_client_first(b"n,,n=user,r=" + nonce)


def test_nonce_rule_is_rfc5802_printable() -> None:
    printable = "".join(chr(c) for c in range(0x21, 0x7F) if c != 0x2C)
    assert is_valid_nonce(printable)
    assert not is_valid_nonce("")
    assert not is_valid_nonce(",")
    assert not is_valid_nonce(" ")
    assert not is_valid_nonce("\x7f")


def test_extensions_are_kept_and_otherwise_ignored() -> None:
    message = parse_client_first(b"n,,n=user,r=abc,tokenauth=false,x=a=b")
    assert message.extensions == (("tokenauth", "false"), ("x", "a=b"))
    assert not message.token_authentication
    assert message.bare == "n=user,r=abc,tokenauth=false,x=a=b"


@pytest.mark.parametrize("value", [b"true", b"TRUE", b"True"])
def test_delegation_token_extension_is_refused(value: bytes) -> None:
    with pytest.raises(ScramProtocolError, match=r"tokenauth=true \(delegation token authentication\)"):
        parse_client_first(b"n,,n=user,r=abc,tokenauth=" + value)


def test_mandatory_extension_is_refused() -> None:
    with pytest.raises(ScramProtocolError, match=r"mandatory extension \(m=\)"):
        parse_client_first(b"n,,m=ext,n=user,r=abc")


def test_length_limit() -> None:
    prefix = b"n,,n=user,r="
    longest = prefix + b"a" * (MAX_MESSAGE_BYTES - len(prefix))
    assert parse_client_first(longest).nonce == "a" * (MAX_MESSAGE_BYTES - len(prefix))
    with pytest.raises(ScramProtocolError, match=f"is {MAX_MESSAGE_BYTES + 1} bytes long; at most 4096"):
        parse_client_first(longest + b"a")
    for parse in (parse_server_first, parse_client_final, parse_server_final):
        with pytest.raises(ScramProtocolError, match="at most 4096"):
            parse(b"r=" + b"a" * MAX_MESSAGE_BYTES)


def test_empty_and_non_utf8_messages_are_refused() -> None:
    for parse in (parse_client_first, parse_server_first, parse_client_final, parse_server_final):
        with pytest.raises(ScramProtocolError, match="is empty"):
            parse(b"")
    with pytest.raises(ScramProtocolError, match="not valid UTF-8"):
        parse_client_first(b"n,,n=\xff,r=abc")


def test_protocol_errors_are_authentication_errors() -> None:
    # The server maps the whole family to SASL_AUTHENTICATION_FAILED.
    assert issubclass(ScramProtocolError, ScramAuthenticationError)


# --- server-first ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        b"r=abc,s=c2FsdA==",
        b"r=abc,s=c2FsdA==,i=0",
        b"r=abc,s=c2FsdA==,i=04096",
        b"r=abc,s=c2FsdA==,i=-1",
        b"r=abc,s=c2FsdA==,i=+4096",
        b"r=abc,s=c2FsdA==,i=4096.0",
        b"r=abc,s=c2FsdA==,i=12345678901",
        b"r=abc,s=,i=4096",
        b"r=abc,s=c2FsdA,i=4096",
        b"r=abc,s=c2FsdB==,i=4096",
        b"r=abc,s=c2F sdA==,i=4096",
        b"s=c2FsdA==,r=abc,i=4096",
        b"r=,s=c2FsdA==,i=4096",
        b"m=x,r=abc,s=c2FsdA==,i=4096",
        b"e=other-error",
    ],
)
def test_malformed_server_first_is_refused(message: bytes) -> None:
    with pytest.raises(ScramProtocolError):
        parse_server_first(message)


def test_server_first_repr_hides_the_salt() -> None:
    message = ServerFirstMessage(nonce=NONCE, salt=SALT, iterations=4096)
    assert repr(message) == f"ServerFirstMessage(nonce={NONCE!r}, iterations=4096, extensions=())"
    assert "W22ZaJ0SNY7soEsUEjb6gQ" not in repr(message)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nonce": "", "salt": b"s", "iterations": 1},
        {"nonce": "a,b", "salt": b"s", "iterations": 1},
        {"nonce": "ab", "salt": b"", "iterations": 1},
        {"nonce": "ab", "salt": b"s", "iterations": 0},
    ],
)
def test_server_first_is_validated_on_construction(kwargs: dict[str, object]) -> None:
    with pytest.raises(ScramProtocolError):
        ServerFirstMessage(**kwargs)  # type: ignore[arg-type]


# --- client-final ------------------------------------------------------------------------------------------------


def test_client_final_extensions_sit_between_nonce_and_proof() -> None:
    message = parse_client_final(b"c=biws,r=abc,x=1,p=" + base64.b64encode(PROOF))
    assert message.extensions == (("x", "1"),)
    assert message.without_proof == "c=biws,r=abc,x=1"


@pytest.mark.parametrize(
    "message",
    [
        b"c=biws,r=abc",
        b"c=biws,p=AAAA",
        b"r=abc,c=biws,p=AAAA",
        b"c=biws,r=abc,p=AAAA,x=1",
        b"c=biws,r=abc,p=",
        b"c=,r=abc,p=AAAA",
        b"c=biws,r=,p=AAAA",
        b"c=biws,r=abc,p=AAA",
        b"c=biws,r=abc,p=AAB=",
        b"c=biws,r=abc,p=AB==",
        b"c=biws,r=abc,p=AA\xc3\xa9A",
        b"c=biws,r=abc,p=AAAA,p=AAAA",
        b"c=biws,r=abc,r=abc,p=AAAA",
    ],
)
def test_malformed_client_final_is_refused(message: bytes) -> None:
    with pytest.raises(ScramProtocolError):
        parse_client_final(message)


def test_client_final_repr_hides_the_proof() -> None:
    message = parse_client_final(CLIENT_FINAL)
    for text in (repr(message), str(message)):
        assert "dHzbZapWIk4jUhN" not in text
        assert PROOF.hex() not in text
        assert "proof" not in text


@pytest.mark.parametrize("text", ["AB==", "AAB=", "YQ", "YQ=", "Y Q==", "YQ==\n", "-_==", "\u00e9"])
def test_base64_must_be_canonical(text: str) -> None:
    with pytest.raises(ScramProtocolError, match=r"^Malformed SCRAM thing: not"):
        decode_base64(text, "thing")


# --- server-final ------------------------------------------------------------------------------------------------


def test_server_final_error() -> None:
    message = parse_server_final(b"e=invalid-proof")
    assert (message.verifier, message.error) == (None, "invalid-proof")
    assert format_server_final(message) == b"e=invalid-proof"


@pytest.mark.parametrize("message", [b"e=", b"v=", b"v=AB==", b"x=1", b"v=AAAA,v=AAAA", b"e=a,e=b"])
def test_malformed_server_final_is_refused(message: bytes) -> None:
    with pytest.raises(ScramProtocolError):
        parse_server_final(message)


def test_server_final_carries_exactly_one_of_verifier_and_error() -> None:
    with pytest.raises(ScramProtocolError, match="exactly one of v= and e="):
        ServerFinalMessage()
    with pytest.raises(ScramProtocolError, match="exactly one of v= and e="):
        ServerFinalMessage(verifier=b"x", error="other-error")


def test_server_final_repr_hides_the_verifier() -> None:
    message = parse_server_final(SERVER_FINAL)
    assert "6rriTRBi23Wp" not in repr(message)


# --- properties --------------------------------------------------------------------------------------------------

# Small alphabets so that commas, escapes and attribute letters collide often.
_names = st.text(alphabet=st.sampled_from("ab,=2C3D\u00e9\u4e2d "), min_size=1, max_size=8)
_nonces = st.text(alphabet=st.sampled_from("aZ09+/=%$)~!"), min_size=1, max_size=12)
_extensions = st.lists(
    st.tuples(st.sampled_from(["x", "ext", "tokenauth", "y"]), st.text(alphabet="ab=1", min_size=1, max_size=4)),
    max_size=3,
    unique_by=lambda extension: extension[0],
).map(lambda extensions: tuple((n, "false" if n == "tokenauth" else v) for n, v in extensions))
_secrets = st.binary(min_size=1, max_size=70)


@given(
    flag=st.sampled_from(["n", "y"]),
    authzid=st.none() | _names,
    username=_names,
    nonce=_nonces,
    extensions=_extensions,
)
def test_client_first_round_trips(
    flag: str, authzid: str | None, username: str, nonce: str, extensions: tuple[tuple[str, str], ...]
) -> None:
    message = ClientFirstMessage(gs2_flag=flag, authzid=authzid, username=username, nonce=nonce, extensions=extensions)
    data = format_client_first(message)
    assert parse_client_first(data) == message
    assert data == (message.gs2_header + message.bare).encode()


@given(nonce=_nonces, salt=_secrets, iterations=st.integers(1, 10**10 - 1), extensions=_extensions)
def test_server_first_round_trips(
    nonce: str, salt: bytes, iterations: int, extensions: tuple[tuple[str, str], ...]
) -> None:
    message = ServerFirstMessage(nonce=nonce, salt=salt, iterations=iterations, extensions=extensions)
    assert parse_server_first(format_server_first(message)) == message


@given(channel_binding=_secrets, nonce=_nonces, extensions=_extensions, proof=_secrets)
def test_client_final_round_trips(
    channel_binding: bytes, nonce: str, extensions: tuple[tuple[str, str], ...], proof: bytes
) -> None:
    message = ClientFinalMessage(channel_binding=channel_binding, nonce=nonce, extensions=extensions, proof=proof)
    data = format_client_final(message)
    assert parse_client_final(data) == message
    assert data.startswith(message.without_proof.encode() + b",p=")


@given(verifier=st.none() | _secrets, error=st.sampled_from(["invalid-proof", "other-error", "x=y"]))
def test_server_final_round_trips(verifier: bytes | None, error: str) -> None:
    message = ServerFinalMessage(verifier=verifier) if verifier is not None else ServerFinalMessage(error=error)
    assert parse_server_final(format_server_final(message)) == message


# Messages assembled from the grammar's own pieces reach the accepting paths far more often than random bytes.
_values = st.sampled_from(
    [
        "",
        "abc",
        "user",
        "a=2Cb",
        "a=3D",
        "a=2c",
        "biws",
        "eSws",
        "AAAA",
        "YQ==",
        "YQ",
        "4096",
        "0",
        "true",
        "\u00e9",
        "\x00",
        " ",
        "=",
        "x=y",
    ]
)
_attributes = st.sampled_from(["n", "y", "", "p=tls", "a=user", "n=user"]) | st.builds(
    "{}={}".format, st.sampled_from(["a", "n", "r", "c", "p", "s", "i", "v", "e", "m", "x", "tokenauth"]), _values
)
_tails = st.lists(_attributes, max_size=2).map(lambda parts: "".join("," + part for part in parts))
_shaped = st.one_of(
    st.builds("{},{},n={},r={}{}".format, st.sampled_from(["n", "y", "p=tls"]), _attributes, _values, _values, _tails),
    st.builds("r={},s={},i={}{}".format, _values, _values, _values, _tails),
    st.builds("c={},r={}{},p={}".format, _values, _values, _tails, _values),
    st.builds("{}={}{}".format, st.sampled_from(["v", "e"]), _values, _tails),
)
_message_texts = _shaped | st.lists(_attributes, min_size=1, max_size=6).map(",".join)
_message_bytes = st.binary(max_size=64) | _message_texts.map(str.encode)


@given(data=_message_bytes)
def test_parsing_arbitrary_input_either_refuses_or_is_the_exact_inverse_of_formatting(data: bytes) -> None:
    for parse, format_message in (
        (parse_client_first, format_client_first),
        (parse_server_first, format_server_first),
        (parse_client_final, format_client_final),
        (parse_server_final, format_server_final),
    ):
        try:
            message = parse(data)
        except ScramProtocolError:
            continue
        assert format_message(message) == data  # type: ignore[arg-type]

"""Known-answer tests for the credential derivation (SEMANTICS.md §11.2, §12) and KIP-554 validation."""

from __future__ import annotations

import base64

import pytest

from kafkaguard.errors import ScramError, UnacceptableCredentialError
from kafkaguard.scram import (
    DEFAULT_ITERATIONS,
    DEFAULT_SALT_BYTES,
    MAX_SALT_BYTES,
    MIN_SALT_BYTES,
    ScramCredential,
    ScramMechanism,
    check_iterations,
    check_salt,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)

SHA_256 = ScramMechanism.SCRAM_SHA_256
SHA_512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 §3 (SEMANTICS.md §12.1).
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_SALTED_PASSWORD = bytes.fromhex("c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d")
RFC7677_STORED_KEY = "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
RFC7677_SERVER_KEY = "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="

# Kafka's ScramParserTest (SEMANTICS.md §12.3).
KAFKA_SALT = b"1lv4pdnw4fwq7notcxm0yy1k7q"
KAFKA_SALTED_PASSWORD = base64.b64decode("mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_rfc7677_salted_password_and_keys() -> None:
    assert salted_password(SHA_256, "pencil", RFC7677_SALT, 4096) == RFC7677_SALTED_PASSWORD
    credential = credential_from_password(SHA_256, "pencil", 4096, RFC7677_SALT)
    assert credential == ScramCredential(
        SHA_256, RFC7677_SALT, base64.b64decode(RFC7677_STORED_KEY), base64.b64decode(RFC7677_SERVER_KEY), 4096
    )
    assert credential.stored_key.hex() == "586e5df283e6dceb5c3e791d8b8528ec191e664045ce971792e2e6b5bb13e2a6"
    assert credential.server_key.hex() == "c1f3cbc1c13a9d35a14c0990eed97629ea225863e566a4314ab99f3f00e5d9d5"


def test_rfc7677_keys_from_the_salted_password_alone() -> None:
    credential = credential_from_salted_password(SHA_256, RFC7677_SALT, RFC7677_SALTED_PASSWORD, 4096)
    assert (b64(credential.stored_key), b64(credential.server_key)) == (RFC7677_STORED_KEY, RFC7677_SERVER_KEY)


def test_kafka_scram_parser_vector_is_hi_sha256_of_alice() -> None:
    assert base64.b64encode(KAFKA_SALT).decode() == "MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E="
    assert salted_password(SHA_256, "alice", KAFKA_SALT, 8192) == KAFKA_SALTED_PASSWORD


@pytest.mark.parametrize(
    ("mechanism", "stored_key", "server_key"),
    [
        (SHA_256, "XTIqoHHo3sscdYxycL07uh8utmHn9fXtjqyDF67CjSU=", "Za53R2yENISN7fHL7WUxriFkV7cfbrO3+CtEptMbTPE="),
        (
            SHA_512,
            "OTJaI0xrVVArw2MNM35eGNVvo7ZObfdmB6j25TPoky/3TryBqVyDO+xwZ9ayp2b8vlAyTuh3zIGiJpXG5PlNBQ==",
            "SAFtavLze+JBSMhVmVxQOuH5mRkdsrE4CjtIl/LA+59pwoSC4fkJx8n+JnF+LKedPZWTai2bvkCoctFtn9zZxw==",
        ),
    ],
)
def test_kafka_vector_keys_for_both_mechanisms(mechanism: ScramMechanism, stored_key: str, server_key: str) -> None:
    # Kafka feeds the same 32-byte salted password to both formatters; no length check (SEMANTICS.md §12.3).
    credential = credential_from_salted_password(mechanism, KAFKA_SALT, KAFKA_SALTED_PASSWORD, 8192)
    assert (b64(credential.stored_key), b64(credential.server_key)) == (stored_key, server_key)
    assert (credential.mechanism, credential.salt, credential.iterations) == (mechanism, KAFKA_SALT, 8192)


def test_derived_sha512_vector_with_rfc7677_inputs() -> None:
    expected_salted = (
        "f16efe1be67f1d09502ebd5ed9262fddffba5a377ab4f0b687e5ed5ba0f50686"
        "b8a4ae166476da8ab3b951d2fa9238b63998f45461bc33a464814949cec9631d"
    )
    assert salted_password(SHA_512, "pencil", RFC7677_SALT, 4096).hex() == expected_salted
    credential = credential_from_password(SHA_512, "pencil", 4096, RFC7677_SALT)
    assert b64(credential.stored_key) == (
        "6AAub3065EYRmyFpM2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg=="
    )
    assert b64(credential.server_key) == (
        "jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nLDfKF24mvD5nmE6rA=="
    )


@pytest.mark.parametrize(
    ("mechanism", "stored_key", "server_key"),
    [
        (
            SHA_256,
            "630575eb88404461d1b8ac1c7774ab4b6e4ba45fbd93f2c8d08952d67c6a97cb",
            "4aba19d2ac4f3293881b65b0646155bc619a0ff003587a07dbf8d244540e681f",
        ),
        (
            SHA_512,
            "1b3e39a563dd84834158bb967ff4fb041a9bb98e701b8f84148cc10ec58abbfad2d6d1abf7ea76c8582e16089e2d8920931c570d3e"
            "d36b35212607760f5ecf55",
            "52992190da855cc8e3a695959344eaaaf70a88e5ba7f9f530792381af19da55372159ecc61f2aa600a9374b58fbf675198f2e4fe3c"
            "bc7e5d186344eccde61fe9",
        ),
    ],
)
def test_controller_side_derivation_of_alter_user_scram_credentials_request_test(
    mechanism: ScramMechanism, stored_key: str, server_key: str
) -> None:
    credential = credential_from_salted_password(mechanism, b"salt", b"saltedPassword", 4096)
    assert (credential.stored_key.hex(), credential.server_key.hex()) == (stored_key, server_key)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize("iterations", [4096, 8192, 16384])
def test_iterations_within_bounds_are_accepted(mechanism: ScramMechanism, iterations: int) -> None:
    check_iterations(mechanism, iterations)
    credential = credential_from_salted_password(mechanism, b"salt", b"salted", iterations)
    assert credential.iterations == iterations


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize(
    ("iterations", "message"),
    [
        (4095, "Too few iterations"),
        (0, "Too few iterations"),
        (-1, "Too few iterations"),
        (16385, "Too many iterations"),
    ],
)
def test_iterations_out_of_bounds_are_refused_with_kafkas_messages(
    mechanism: ScramMechanism, iterations: int, message: str
) -> None:
    with pytest.raises(UnacceptableCredentialError) as caught:
        check_iterations(mechanism, iterations)
    assert str(caught.value) == message
    with pytest.raises(UnacceptableCredentialError, match=f"^{message}$"):
        credential_from_salted_password(mechanism, b"salt", b"salted", iterations)
    with pytest.raises(UnacceptableCredentialError, match=f"^{message}$"):
        credential_from_password(mechanism, "pencil", iterations, b"salt")


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_empty_salt_or_salted_password_is_refused(mechanism: ScramMechanism) -> None:
    # SEMANTICS.md §16.5: refused rather than stored (Kafka would fail with UNKNOWN_SERVER_ERROR).
    with pytest.raises(UnacceptableCredentialError, match=r"^Salt must not be empty$"):
        credential_from_salted_password(mechanism, b"", b"salted", 4096)
    with pytest.raises(UnacceptableCredentialError, match=r"^Salted password must not be empty$"):
        credential_from_salted_password(mechanism, b"salt", b"", 4096)
    with pytest.raises(UnacceptableCredentialError, match=r"^Salt must not be empty$"):
        credential_from_password(mechanism, "pencil", 4096, b"")


def test_empty_password_is_refused_with_kafkas_message() -> None:
    with pytest.raises(UnacceptableCredentialError, match=r"^Password must not be empty$") as caught:
        credential_from_password(SHA_256, "")
    assert isinstance(caught.value, ScramError)


def test_password_is_not_saslprepped() -> None:
    # Kafka hashes the password's UTF-8 bytes as they are: U+2168 (ROMAN NUMERAL NINE) is not mapped to "IX".
    assert salted_password(SHA_256, "\u2168", b"salt", 4096) != salted_password(SHA_256, "IX", b"salt", 4096)


def test_default_salt_is_fresh_and_random() -> None:
    first = credential_from_password(SHA_256, "pencil")
    second = credential_from_password(SHA_256, "pencil")
    assert len(first.salt) == len(second.salt) == DEFAULT_SALT_BYTES == 24
    assert first.salt != second.salt
    assert first.stored_key != second.stored_key
    assert first.iterations == DEFAULT_ITERATIONS == 8192


@pytest.mark.parametrize("length", [MIN_SALT_BYTES, 24, 64, MAX_SALT_BYTES])
def test_salts_of_16_to_128_bytes_are_accepted(length: int) -> None:
    assert (MIN_SALT_BYTES, MAX_SALT_BYTES) == (16, 128)
    check_salt(b"s" * length)


@pytest.mark.parametrize("length", [1, MIN_SALT_BYTES - 1, MAX_SALT_BYTES + 1, 1 << 20])
def test_salts_outside_16_to_128_bytes_are_refused_naming_the_range(length: int) -> None:
    with pytest.raises(UnacceptableCredentialError) as caught:
        check_salt(b"\x9c" * length)
    assert str(caught.value) == f"Salt must be 16 to 128 bytes long; got {length} bytes"
    with pytest.raises(UnacceptableCredentialError, match=r"^Salt must not be empty$"):
        check_salt(b"")


def test_repr_and_str_mask_every_secret() -> None:
    credential = credential_from_password(SHA_512, "pencil", 4096, RFC7677_SALT)
    texts = [repr(credential), str(credential), f"{credential}", f"{credential!r}"]
    secrets = [credential.salt, credential.stored_key, credential.server_key, b"pencil"]
    for text in texts:
        assert text == "ScramCredential(mechanism=SCRAM-SHA-512, iterations=4096, secrets=<masked>)"
        for secret in secrets:
            for form in (b64(secret), secret.hex(), secret.decode("latin-1"), repr(secret)):
                assert form not in text

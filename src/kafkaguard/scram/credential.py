"""Stored SCRAM credentials and their derivation (RFC 5802 / RFC 7677, Kafka's ScramFormatter, SEMANTICS.md §11.2).

Only (salt, StoredKey, ServerKey, iterations) is ever stored: never the password, never the salted password.
The repr masks every secret field so a credential can be logged or printed by mistake without leaking.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from kafkaguard.errors import UnacceptableCredentialError
from kafkaguard.scram.mechanism import ScramMechanism

#: The iteration count kafkaguard uses wherever none is given: ``CredentialService.upsert_password``,
#: ``kafkaguard users add``, ``kafkaguard configs --add-config`` without ``iterations=``, the console's
#: ``PUT /api/users``, and the SCRAM decoy of a store without credentials. (kafka-configs.sh uses 4096.)
DEFAULT_ITERATIONS = 8192
#: Bytes of random salt kafkaguard generates (Kafka's Java client uses a 130-bit random number, librdkafka 64 bytes,
#: kafka-python 24).
DEFAULT_SALT_BYTES = 24
#: The salt lengths an upsertion may carry, inclusive (Kafka checks none; kafkaguard refuses the rest, because the
#: salt is sent to anyone who names the user: a 1 MiB salt would make a 1.4 MB server-first message).
MIN_SALT_BYTES = 16
MAX_SALT_BYTES = 128


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: ScramMechanism
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(mechanism={self.mechanism}, iterations={self.iterations}, secrets=<masked>)"

    __str__ = __repr__


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2-HMAC over the password's UTF-8 bytes (Kafka applies no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored form, from what AlterUserScramCredentials carries (salt and salted password).

    :raises UnacceptableCredentialError: empty salt or salted password (SEMANTICS.md §16.5), or iterations
        outside the mechanism's bounds.
    """
    if not salt:
        raise UnacceptableCredentialError("Salt must not be empty")
    if not salted:
        raise UnacceptableCredentialError("Salted password must not be empty")
    check_iterations(mechanism, iterations)
    server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
    return ScramCredential(mechanism, salt, stored_key_of(mechanism, salted), server_key, iterations)


def stored_key_of(mechanism: ScramMechanism, salted: bytes) -> bytes:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")): what the server keeps to check proofs (and passwords)."""
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    return hashlib.new(mechanism.hash_name, client_key).digest()


def credential_from_password(
    mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """Derive a credential from a password with a fresh random salt (for the CLI and the console).

    :raises UnacceptableCredentialError: empty password or iterations out of bounds.
    """
    if not password:
        raise UnacceptableCredentialError("Password must not be empty")
    check_iterations(mechanism, iterations)
    salt = salt if salt is not None else secrets.token_bytes(DEFAULT_SALT_BYTES)
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def check_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    """Kafka's inclusive bounds, with Kafka's messages.

    :raises UnacceptableCredentialError: "Too few iterations" / "Too many iterations".
    """
    if iterations < mechanism.min_iterations:
        raise UnacceptableCredentialError("Too few iterations")
    if iterations > mechanism.max_iterations:
        raise UnacceptableCredentialError("Too many iterations")


def check_salt(salt: bytes) -> None:
    """The salt of a new credential: ``MIN_SALT_BYTES`` to ``MAX_SALT_BYTES`` long (the message never shows it).

    :raises UnacceptableCredentialError: "Salt must not be empty", or the allowed range and the length given.
    """
    if not salt:
        raise UnacceptableCredentialError("Salt must not be empty")
    if not MIN_SALT_BYTES <= len(salt) <= MAX_SALT_BYTES:
        raise UnacceptableCredentialError(
            f"Salt must be {MIN_SALT_BYTES} to {MAX_SALT_BYTES} bytes long; got {len(salt)} bytes"
        )

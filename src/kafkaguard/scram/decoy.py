"""Decoy credentials: what the SCRAM server announces for a user it does not have (no user enumeration).

SCRAM's server-first message carries the user's salt and iteration count before any proof is checked, so a server
must answer a name it does not know with *something*. kafkaguard answers with a decoy credential whose salt,
StoredKey and ServerKey are derived by HMAC from a server-wide secret, the mechanism and the name (the same answer
every time for the same name, as a real user's is), and whose *shape* — iteration count and salt length — is a
:class:`DecoyProfile` taken from the stored credentials of that mechanism: the most common (iterations, salt
length) pair among them, ties going to the larger pair, or ``DEFAULT_DECOY_PROFILE`` when there is none. A name
then gives away nothing through ``i=`` or the length of ``s=`` unless its real credential has an unusual shape.

Worked example: 40 SCRAM-SHA-256 credentials made by ``kafkaguard users add`` (8192 iterations, 24-byte salts) and
3 made by confluent-kafka (4096 iterations, 64-byte salts) give the profile (8192, 24) for SCRAM-SHA-256; with no
SCRAM-SHA-512 credential at all, SCRAM-SHA-512's profile is the default (8192, 24).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kafkaguard.errors import InvalidConfigError
from kafkaguard.scram.credential import DEFAULT_ITERATIONS, DEFAULT_SALT_BYTES, MAX_SALT_BYTES, ScramCredential
from kafkaguard.scram.mechanism import ScramMechanism

_SALT_BLOCK = hashlib.sha256().digest_size


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoyProfile:
    """The shape of a decoy credential: its iteration count and the length of its salt, in bytes.

    :raises InvalidConfigError: iterations below 1, or a salt length outside 1..``MAX_SALT_BYTES``.
    """

    iterations: int
    salt_bytes: int

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise InvalidConfigError(f"A decoy profile needs at least 1 iteration; got {self.iterations}")
        if not 1 <= self.salt_bytes <= MAX_SALT_BYTES:
            raise InvalidConfigError(
                f"A decoy profile's salt must be 1 to {MAX_SALT_BYTES} bytes long; got {self.salt_bytes}"
            )


#: The profile of a mechanism without stored credentials: what kafkaguard itself would create.
DEFAULT_DECOY_PROFILE = DecoyProfile(iterations=DEFAULT_ITERATIONS, salt_bytes=DEFAULT_SALT_BYTES)


def decoy_profile_of(mechanism: ScramMechanism, credentials: Iterable[ScramCredential]) -> DecoyProfile:
    """The most common (iterations, salt length) among ``credentials`` of ``mechanism`` that a SCRAM server would
    announce (iterations within the mechanism's bounds, salt of 1 to ``MAX_SALT_BYTES`` bytes); ties go to the
    larger pair, so the result does not depend on the order of ``credentials``. ``DEFAULT_DECOY_PROFILE`` when
    none qualifies."""
    counts = Counter(
        (credential.iterations, len(credential.salt))
        for credential in credentials
        if credential.mechanism is mechanism
        and mechanism.min_iterations <= credential.iterations <= mechanism.max_iterations
        and 1 <= len(credential.salt) <= MAX_SALT_BYTES
    )
    if not counts:
        return DEFAULT_DECOY_PROFILE
    (iterations, salt_bytes), _count = max(counts.items(), key=lambda item: (item[1], item[0]))
    return DecoyProfile(iterations=iterations, salt_bytes=salt_bytes)


#: Names whose decoys are remembered (least recently used out first): a login derives its name's decoy whether the
#: name is known or not (``ScramServerSession``), four HMACs, a few per cent of a SCRAM login's server time.
DECOY_CACHE_NAMES = 4096


@functools.lru_cache(maxsize=DECOY_CACHE_NAMES)
def decoy_credential(secret: bytes, mechanism: ScramMechanism, username: str, profile: DecoyProfile) -> ScramCredential:
    """A credential for ``username`` that no password matches: salt and keys derived by HMAC-SHA-256 from
    ``secret``, the mechanism and the name; iterations and salt length from ``profile``.

    The salt is HMAC(key, "salt") followed, when ``profile`` asks for more than 32 bytes, by HMAC(key, "salt" ‖ i)
    for i = 1, 2, …; so a shorter profile gives a prefix of a longer one's salt.

    Remembered for the last ``DECOY_CACHE_NAMES`` arguments: a pure function of them, so a remembered answer is the
    one derived again, and known and unknown names are remembered alike (the work a login does still does not tell
    them apart). A flood of new names costs what it cost before the memo: a derivation each.
    """
    label = b"kafkaguard SCRAM decoy\x00" + mechanism.mechanism_name.encode() + b"\x00" + username.encode()
    key = hmac.digest(secret, label, "sha256")
    blocks = -(-profile.salt_bytes // _SALT_BLOCK)
    salt = b"".join(hmac.digest(key, b"salt" + (bytes([i]) if i else b""), "sha256") for i in range(blocks))
    hash_name = mechanism.hash_name
    return ScramCredential(
        mechanism=mechanism,
        salt=salt[: profile.salt_bytes],
        stored_key=hmac.digest(key, b"stored key", hash_name),
        server_key=hmac.digest(key, b"server key", hash_name),
        iterations=profile.iterations,
    )

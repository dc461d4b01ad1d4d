"""The two SCRAM mechanisms Kafka supports, with Kafka's wire type bytes (SEMANTICS.md §1.6, §11.1)."""

from __future__ import annotations

from enum import Enum

from kafkaguard.errors import UnsupportedMechanismError


class ScramMechanism(Enum):
    """``value`` is Kafka's type byte (never renumbered); ``mechanism_name`` the SASL name."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def code(self) -> int:
        return int(self.value)

    @property
    def mechanism_name(self) -> str:
        return _NAMES[self]

    @property
    def hash_name(self) -> str:
        """The hashlib name."""
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def digest_size(self) -> int:
        return 32 if self is ScramMechanism.SCRAM_SHA_256 else 64

    @property
    def min_iterations(self) -> int:
        return 4096

    @property
    def max_iterations(self) -> int:
        return 16384

    @classmethod
    def from_code(cls, code: int) -> ScramMechanism:
        """:raises UnsupportedMechanismError: Kafka's "Unknown SCRAM mechanism" for any other byte."""
        for mechanism in cls:
            if mechanism.value == code:
                return mechanism
        raise UnsupportedMechanismError(
            f"Unknown SCRAM mechanism (type {code}); expected 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)"
        )

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (case-insensitive; ``_`` accepted for ``-``).

        :raises UnsupportedMechanismError: any other name.
        """
        for mechanism in cls:
            if mechanism.mechanism_name == name.strip().upper().replace("_", "-"):
                return mechanism
        raise UnsupportedMechanismError(f"Unknown SCRAM mechanism {name!r}; expected SCRAM-SHA-256 or SCRAM-SHA-512")

    def __str__(self) -> str:
        return self.mechanism_name


#: The SASL names, made once: several are asked for per login.
_NAMES = {mechanism: mechanism.name.replace("_", "-") for mechanism in ScramMechanism}

"""Kafka principals: ``Type:Name`` strings, split at the first colon (SEMANTICS.md §2)."""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.errors import InvalidConfigError

#: The only principal wildcard Kafka knows. It matches principals of every type, not only ``User``.
WILDCARD_PRINCIPAL = "User:*"
#: The principal of an unauthenticated (PLAINTEXT) connection.
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"`` → ``KafkaPrincipal("User", "alice")``; the name may itself contain colons.

        :raises InvalidConfigError: the text has no colon or an empty type.
        """
        reason = principal_error(text)
        if reason is not None:
            raise InvalidConfigError(reason)
        principal_type, _, name = text.partition(":")
        return cls(principal_type, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


def principal_error(text: str) -> str | None:
    """Why ``text`` is not a usable ``Type:Name`` principal, or None when it is.

    Two principal strings denote the same principal exactly when the strings are equal (type and name are split
    at the first colon and compared exactly), so the authorizer compares strings and never needs to parse.
    """
    principal_type, colon, _ = text.partition(":")
    if not colon or not principal_type:
        return f"Invalid principal {text!r}: expected Type:Name, for example User:alice"
    return None

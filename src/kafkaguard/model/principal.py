"""Kafka principals: ``Type:Name`` strings, split at the first colon (SEMANTICS.md §2)."""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.errors import InvalidConfigError

#: The only principal wildcard Kafka knows. It matches principals of every type, not only ``User``.
WILDCARD_PRINCIPAL = "User:*"
#: The principal type of kafkaguard's principal groups: an ACL for ``Group:ops`` applies to every member of ops.
GROUP_TYPE = "Group"
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


def is_group(principal: str) -> bool:
    """Whether a principal names a principal group (``Group:ops``) rather than one client."""
    return principal.startswith(GROUP_TYPE + ":")


def principal_matches(acl_principal: str, principal: str, member_of: tuple[str, ...] = ()) -> bool:
    """Whether an ACL's principal covers the caller: the same principal, ``User:*``, or one of the caller's groups
    (``member_of``, kafkaguard's principal groups such as ``Group:ops``)."""
    return acl_principal in (principal, WILDCARD_PRINCIPAL) or acl_principal in member_of


def principal_error(text: str) -> str | None:
    """Why ``text`` is not a usable ``Type:Name`` principal, or None when it is.

    Two principal strings denote the same principal exactly when the strings are equal (type and name are split
    at the first colon and compared exactly), so the authorizer compares strings and never needs to parse.
    """
    principal_type, colon, _ = text.partition(":")
    if not colon or not principal_type:
        return f"Invalid principal {text!r}: expected Type:Name, for example User:alice"
    return None

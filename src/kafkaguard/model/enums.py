"""Kafka's four ACL enumerations, with Kafka's int8 wire codes (SEMANTICS.md §1).

The codes are the model's codes and are never renumbered. A code this version does not know (a newer client's)
is not lost: ``AclOperation(42)`` is an UNKNOWN member that still carries 42, so it is told apart from the code 0
(refused differently, ``model.binding.validate_new_binding``) and shown as it came instead of being flattened to 0.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Self, TypeVar

from kafkaguard.errors import InvalidCodeError, InvalidNameError

_INT8_MIN, _INT8_MAX = -128, 127


def _squash(name: str) -> str:
    """``TransactionalId``, ``TRANSACTIONAL_ID``, ``transactional-id`` → ``TRANSACTIONALID``."""
    return re.sub(r"[_\-\s]", "", name).upper()


class KafkaEnum(IntEnum):
    """An IntEnum whose unknown int8 codes become UNKNOWN members that keep their code."""

    @classmethod
    def _missing_(cls, value: object) -> Self | None:
        if isinstance(value, int) and not isinstance(value, bool) and _INT8_MIN <= value <= _INT8_MAX:
            # A pseudo-member, cached like Flag's: named UNKNOWN, valued with the original code.
            pseudo = int.__new__(cls, value)
            pseudo._name_ = "UNKNOWN"
            pseudo._value_ = value
            member = cls._value2member_map_.setdefault(value, pseudo)
            assert isinstance(member, cls)  # noqa: S101 - cls's own map holds only cls's members
            return member
        return None

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member for a wire code; codes this version does not know give UNKNOWN carrying the code.

        :raises InvalidCodeError: the code is not an int8 (booleans are not codes, though Python's True == 1).
        """
        if isinstance(code, bool) or not isinstance(code, int):
            raise InvalidCodeError(f"{cls.__name__} code {code!r} is not an int8 (-128..127)")
        try:
            return cls(code)
        except ValueError as e:
            raise InvalidCodeError(f"{cls.__name__} code {code!r} is not an int8 (-128..127)") from e

    @classmethod
    def from_string(cls, name: str) -> Self:
        """Kafka's names in upper case (``TRANSACTIONAL_ID``) or PascalCase (``TransactionalId``).

        Case, ``_`` and ``-`` are not significant. Unlike Kafka's ``fromString``, an unknown name is an error
        that lists the valid names, never a silent UNKNOWN.

        :raises InvalidNameError: no member has that name.
        """
        found = _lookup(cls).get(_squash(name))
        if found is None:
            valid = ", ".join(m.name for m in cls if m.name != "UNKNOWN")
            raise InvalidNameError(f"{name!r} is not a valid {cls.__name__} name; expected one of {valid}")
        return found

    @property
    def code(self) -> int:
        """The int8 wire code (for an UNKNOWN member, the code it was decoded from)."""
        return int(self)

    @property
    def is_unknown(self) -> bool:
        return self._name_ == "UNKNOWN"

    @property
    def pascal_name(self) -> str:
        """Kafka's PascalCase form, as its logs and SecurityUtils print it (``TransactionalId``)."""
        return "".join(part.capitalize() for part in self._name_.split("_"))

    def __str__(self) -> str:
        return self._name_

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self._name_}" + (f"({int(self)})" if self.is_unknown else "")


_LOOKUPS: dict[type[KafkaEnum], dict[str, KafkaEnum]] = {}
_E = TypeVar("_E", bound=KafkaEnum)


def _lookup(cls: type[_E]) -> dict[str, _E]:
    table = _LOOKUPS.get(cls)
    if table is None:
        table = {_squash(m.name): m for m in cls}
        _LOOKUPS[cls] = table
    # _LOOKUPS[cls] only ever holds cls's own members, a per-key value type a dict annotation cannot say.
    return table  # type: ignore[return-value]


class ResourceType(KafkaEnum):
    """What an ACL protects (Kafka ``ResourceType``)."""

    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4  # the only legal name is "kafka-cluster"
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def is_filter_only(self) -> bool:
        return self is ResourceType.ANY


class PatternType(KafkaEnum):
    """How an ACL's resource name is matched (Kafka ``PatternType``)."""

    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, name compared exactly
    MATCH = 2  # filters only: the stored patterns that apply to a concrete name
    LITERAL = 3  # exact name; the literal name "*" is every resource of the type
    PREFIXED = 4  # the resource name starts with the ACL's name

    @property
    def is_specific(self) -> bool:
        """True for the two pattern types a stored ACL can have."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(KafkaEnum):
    """What an ACL permits or denies (Kafka ``AclOperation``, plus AUTO_CREATE from KIP-755)."""

    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    # KIP-755 proposed 13, which Kafka later gave CREATE_TOKENS; kafkaguard uses the next free code
    # (SEMANTICS.md §16.1). ALLOW CREATE/ALL imply it; DENY CREATE denies it.
    AUTO_CREATE = 15


class AclPermissionType(KafkaEnum):
    """Whether an ACL allows or denies (Kafka ``AclPermissionType``)."""

    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3

"""What the authorizer is asked: who (RequestContext), what (Action), and its answer (AuthorizationResult)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kafkaguard.model.enums import AclOperation
from kafkaguard.model.resource import ResourcePattern


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The authenticated caller: ``principal`` as ``Type:Name`` and the client's IP address as Java prints it
    (IPv4 dotted quad; IPv6 uncompressed, e.g. ``0:0:0:0:0:0:0:1``). ``groups``: the group principals
    (``Group:ops``) its login brought with it — an OAUTHBEARER token's groups claim — beside those the store keeps
    (kafkaguard's, beyond Kafka)."""

    principal: str
    host: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Action:
    """One operation on one concrete resource (its pattern type must be LITERAL)."""

    operation: AclOperation
    resource_pattern: ResourcePattern
    resource_reference_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


class AuthorizationResult(Enum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"

    def __str__(self) -> str:
        return self.value

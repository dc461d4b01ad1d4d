"""HTTP Basic credentials and the console's authenticated caller; the password itself is checked by
``kafkaguard.passwords.checker`` (against the SCRAM credentials in the store), as SASL/PLAIN's are.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass

from kafkaguard.model import Actor, RequestContext


@dataclass(frozen=True, slots=True)
class BasicCredentials:
    user: str
    password: str

    def __repr__(self) -> str:
        return f"BasicCredentials(user={self.user!r}, password=<masked>)"


def parse_basic(header: str | None) -> BasicCredentials | None:
    """``Basic base64(user:password)`` (UTF-8, RFC 7617) → credentials; None when absent or malformed."""
    if not header:
        return None
    scheme, _, param = header.strip().partition(" ")
    if scheme.lower() != "basic" or not param:
        return None
    try:
        decoded = base64.b64decode(param.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    user, colon, password = decoded.partition(":")
    if not colon or not user:
        return None
    return BasicCredentials(user, password)


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated console user: the principal ``User:<name>`` from the client's address."""

    user: str
    host: str

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    @property
    def context(self) -> RequestContext:
        return RequestContext(self.principal, self.host)

    def actor(self) -> Actor:
        """This user as the actor of a management change made through the console's REST API; the request id is
        a fresh UUID (the console reads no client-chosen header for it, which a client could forge)."""
        return Actor(principal=self.principal, address=self.host, interface="rest", request_id=uuid.uuid4().hex)

"""L1: SCRAM-SHA-256/512 credentials (RFC 5802 / RFC 7677, KIP-554) and the server side of the SASL exchange."""

from __future__ import annotations

from kafkaguard.scram.credential import (
    ScramCredential,
    check_iterations,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from kafkaguard.scram.mechanism import ScramMechanism

__all__ = [
    "ScramCredential",
    "ScramMechanism",
    "check_iterations",
    "credential_from_password",
    "credential_from_salted_password",
    "salted_password",
]

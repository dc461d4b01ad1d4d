"""L1: SCRAM-SHA-256/512 credentials (RFC 5802 / RFC 7677, KIP-554) and the server side of the SASL exchange."""

from __future__ import annotations

from kafkaguard.scram.credential import (
    DEFAULT_ITERATIONS,
    DEFAULT_SALT_BYTES,
    MAX_SALT_BYTES,
    MIN_SALT_BYTES,
    ScramCredential,
    check_iterations,
    check_salt,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from kafkaguard.scram.decoy import DEFAULT_DECOY_PROFILE, DecoyProfile, decoy_credential, decoy_profile_of
from kafkaguard.scram.mechanism import ScramMechanism
from kafkaguard.scram.messages import (
    MAX_MESSAGE_BYTES,
    ClientFinalMessage,
    ClientFirstMessage,
    ServerFinalMessage,
    ServerFirstMessage,
    format_client_final,
    format_client_first,
    format_server_final,
    format_server_first,
    parse_client_final,
    parse_client_first,
    parse_server_final,
    parse_server_first,
)
from kafkaguard.scram.server import (
    AUTHORIZATION_ID_MISMATCH_MESSAGE,
    CredentialLookup,
    NonceFactory,
    ScramServerSession,
    ScramServerStage,
    authentication_failed_message,
)

__all__ = [
    "AUTHORIZATION_ID_MISMATCH_MESSAGE",
    "DEFAULT_DECOY_PROFILE",
    "DEFAULT_ITERATIONS",
    "DEFAULT_SALT_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_SALT_BYTES",
    "MIN_SALT_BYTES",
    "ClientFinalMessage",
    "ClientFirstMessage",
    "CredentialLookup",
    "DecoyProfile",
    "NonceFactory",
    "ScramCredential",
    "ScramMechanism",
    "ScramServerSession",
    "ScramServerStage",
    "ServerFinalMessage",
    "ServerFirstMessage",
    "authentication_failed_message",
    "check_iterations",
    "check_salt",
    "credential_from_password",
    "credential_from_salted_password",
    "decoy_credential",
    "decoy_profile_of",
    "format_client_final",
    "format_client_first",
    "format_server_final",
    "format_server_first",
    "parse_client_final",
    "parse_client_first",
    "parse_server_final",
    "parse_server_first",
    "salted_password",
]

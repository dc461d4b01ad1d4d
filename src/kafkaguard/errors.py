"""The one error tree of kafkaguard.

Every error raised across a layer boundary is a ``KafkaguardError``; the mapping to Kafka error codes and HTTP
statuses happens once, at the edges (server and console). Messages say what is wrong and what to do about it,
and never contain secret material (passwords, salts, keys, proofs).

::

    KafkaguardError
     ├── InvalidNameError          (also ValueError)  an enum name that is not one of Kafka's
     ├── InvalidCodeError          (also ValueError)  an enum wire code outside int8
     ├── InvalidAclError           (also ValueError)  a binding, pattern, entry or filter that cannot exist
     ├── InvalidActionError        (also ValueError)  an authorize() argument Kafka rejects (non-literal, ANY, …)
     ├── InvalidConfigError        (also ValueError)  e.g. a super user that is not Type:Name
     ├── AuthorizerNotReadyError                       the initial ACL load has not completed
     └── ScramError                                    SCRAM credentials and the SASL/SCRAM exchange
          ├── UnsupportedMechanismError                 not SCRAM-SHA-256/512 (Kafka UNSUPPORTED_SASL_MECHANISM)
          ├── UnacceptableCredentialError               KIP-554 validation (Kafka UNACCEPTABLE_CREDENTIAL)
          ├── ScramAuthenticationError                  a failed exchange (Kafka SASL_AUTHENTICATION_FAILED)
          │    └── ScramProtocolError                   a malformed or refused SCRAM message
          └── ScramStateError                           a session step called out of order (ILLEGAL_SASL_STATE)

Layers add their own subtrees under KafkaguardError: ``store.errors.StoreError`` (the store cannot be read or
written), ``server.errors.ProtocolError`` (bytes that are not a valid Kafka request; closes that connection).
"""

from __future__ import annotations


class KafkaguardError(Exception):
    """Root of every error kafkaguard raises on purpose."""


class InvalidNameError(KafkaguardError, ValueError):
    """A name that does not denote a member of a Kafka enumeration."""


class InvalidCodeError(KafkaguardError, ValueError):
    """A wire code that cannot be a Kafka enumeration code (outside the int8 range)."""


class InvalidAclError(KafkaguardError, ValueError):
    """A resource pattern, entry, binding or filter that cannot be built as given."""


class InvalidActionError(KafkaguardError, ValueError):
    """An authorization question Kafka refuses to answer (e.g. a PREFIXED resource or operation ANY)."""


class InvalidConfigError(KafkaguardError, ValueError):
    """A configuration value that cannot be used, with the value and what is expected."""


class AuthorizerNotReadyError(KafkaguardError):
    """The authorizer has not finished loading its ACLs; only super users are answered until it has."""


class ScramError(KafkaguardError):
    """Root of SCRAM credential and exchange errors. Messages never carry salts, keys, proofs or passwords."""


class UnsupportedMechanismError(ScramError, ValueError):
    """A mechanism other than SCRAM-SHA-256 or SCRAM-SHA-512."""


class UnacceptableCredentialError(ScramError, ValueError):
    """A credential that KIP-554 refuses: empty user name or password, iterations out of bounds, …"""


class ScramAuthenticationError(ScramError):
    """The SASL/SCRAM exchange failed; the message is safe to send to the client."""


class ScramProtocolError(ScramAuthenticationError):
    """A SASL/SCRAM message that breaks RFC 5802's grammar, is too long, or asks for what kafkaguard refuses
    (channel binding ``p=``, delegation tokens ``tokenauth=true``, mandatory extensions ``m=``).

    Kafka answers SASL_AUTHENTICATION_FAILED. The message names the part at fault and never echoes proofs or keys.
    """


class ScramStateError(ScramError):
    """A step of a SCRAM session called out of order, or after the session has finished or failed
    (Kafka ILLEGAL_SASL_STATE). A programming error in the caller, not something a client can cause by itself."""

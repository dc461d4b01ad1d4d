"""The one error tree of kafkaguard.

Every error raised across a layer boundary is a ``KafkaguardError``; the mapping to Kafka error codes and HTTP
statuses happens once, at the edges (server and console). Messages say what is wrong and what to do about it,
and never contain secret material (passwords, salts, keys, proofs).

Every subclass of ``KafkaguardError`` in the package, with the module (under ``kafkaguard.``) that defines it;
``tests/test_errors.py`` imports every module and fails if this drawing and the classes differ::

    KafkaguardError                       errors            root of every error kafkaguard raises on purpose
     ├── InvalidNameError                 errors            (also ValueError) an enum name that is not Kafka's
     ├── InvalidCodeError                 errors            (also ValueError) an enum wire code outside int8
     ├── InvalidAclError                  errors            (also ValueError) a binding, pattern, entry or filter
     │    └── AclJsonError                model.acl_json    an ACL JSON document with bad entries (all listed)
     ├── InvalidActionError               errors            (also ValueError) authorize() on PREFIXED, ANY, …
     ├── InvalidConfigError               errors            (also ValueError) e.g. a super user not Type:Name
     ├── InvalidGroupError                errors            (also ValueError) a principal group or member refused
     ├── AuthorizerNotReadyError          errors            the initial ACL load has not completed
     ├── ScramError                       errors            SCRAM credentials and the SASL/SCRAM exchange
     │    ├── UnsupportedMechanismError   errors            (also ValueError) not SCRAM-SHA-256/512
     │    ├── UnacceptableCredentialError errors            (also ValueError) KIP-554 validation
     │    ├── ScramAuthenticationError    errors            a failed exchange (SASL_AUTHENTICATION_FAILED)
     │    │    └── ScramProtocolError     errors            a malformed or refused SCRAM message
     │    └── ScramStateError             errors            a session step called out of order
     ├── PrincipalMappingError            identity.ssl_mapping a certificate's DN the mapping rules cannot map
     │    ├── NoMatchingRule              identity.ssl_mapping no rule applies (Kafka's NoMatchingRule)
     │    └── ReplacementError            identity.ssl_mapping a matching rule's replacement Java cannot expand
     ├── KerberosMappingError             identity.kerberos_names a Kerberos principal the to-local rules cannot map
     │    ├── NoMatchingKerberosRule      identity.kerberos_names no rule gives a simple name (Kafka's NoMatchingRule)
     │    └── BadFormatString             identity.kerberos_names a rule's [n:format] the name cannot fill
     ├── KerberosError                    identity.kerberos a Kerberos or SASL/GSSAPI step failed (GSSAPI's reason)
     ├── OAuthBearerError                 errors            SASL/OAUTHBEARER: its exchange, tokens and keys
     │    ├── OAuthBearerAuthenticationError errors         a failed exchange (SASL_AUTHENTICATION_FAILED)
     │    │    └── OAuthBearerProtocolError errors          a malformed client response (generic client message)
     │    ├── OAuthBearerStateError       errors            a session step called out of order
     │    ├── TokenRejected               identity.oauth    a token Kafka's validator would refuse (invalid_token)
     │    └── JwksUnavailableError        identity.jwks     the JWKS cannot be read or parsed
     ├── StoreError                       store.errors      the store cannot be opened, read or written
     │    ├── SchemaVersionError          store.errors      the database was written by a newer kafkaguard
     │    └── StoreUnavailableError       store.errors      PostgreSQL unreachable or restarting (retriable)
     ├── ProtocolError                    protocol.errors   bytes that are not a valid Kafka request
     │    ├── FrameError                  protocol.errors   a bad or oversized frame length, or a cut frame
     │    │    └── FrameTooLargeError     protocol.errors   a frame above its limit (per API before login)
     │    ├── HeaderError                 protocol.errors   a request header that cannot be decoded
     │    ├── ProxyHeaderError            node.proxy_header a malformed or refused PROXY protocol header
     │    ├── LengthError                 protocol.lengths  a declared length or count the bytes cannot hold
     │    │    └── TooManyItemsError      protocol.lengths  more array elements than max_request_items
     │    ├── UnsupportedRequest          protocol.codec    an API or version this server does not offer
     │    ├── MalformedProduce            proxy.produce_request a Produce request its bytes cannot hold
     │    ├── UpstreamProtocolError       proxy.wire        an upstream answer the proxy cannot read
     │    │    └── Malformed              proxy.walks       a length or count a relayed answer's walk cannot fit
     │    ├── TaggedFieldsError           protocol.errors   too many tagged fields, or one past its end (as below)
     │    └── VarintTooLong               protocol.errors   a varint beyond 5 bytes (each reader turns it into its own)
     ├── CloseConnection                  protocol.connection control flow: ends one connection's loop, with a reason
     │    └── Drained                     protocol.connection a graceful drain ends the connection at a request boundary
     ├── CertificateNotMapped             protocol.identity no mapping rule applies to a client certificate
     ├── OutboxClosed                     protocol.outbox   passing an answer on failed: the connection is ending
     ├── UpstreamUnavailable              proxy.upstream    the upstream cannot be reached or does not answer
     ├── ClientGone                       proxy.wire        the client went away while its answer was passed on
     ├── LoginUnavailable                 protocol.passthrough a passed-through login's broker cannot be reached
     ├── _FetchFailed                     proxy.upstream_tokens one token fetch failed (private: retried, or the above)
     ├── SettingUnreadable                proxy.broker_settings an upstream broker did not tell a setting
     ├── LoginThrottledError              identity.failure_budget a login refused unchecked (budget, pool; 429)
     ├── ItemRefusedError                 console.item_errors a per-item Kafka error answered over REST
     ├── _FilterError                     service.quotas    a malformed quota filter (private: answered as an ItemError)
     ├── CliError                         cli.client        reported by the CLI as one line, with an exit code
     │    ├── KafkaCallError              cli.client        the cluster answered a call with a Kafka error
     │    └── UnsupportedByClientError    cli.client        a binding librdkafka cannot express
     ├── AclFileError                     cli.aclfile       an ACL file (acls.yaml) that cannot be used
     ├── _Unmapped                        cli.whois         no rule names an identity (private: answered as exit 1)
     └── PipelineError                    pipeline.errors   bad input or environment of an audit job
          └── SparkFailed                 pipeline.jobs.entry a job failed inside Spark (exit 1, not 2)

The classes outside this module live in the layer that raises them: a ``ProtocolError`` closes only the
connection it happened on; the CLI, the console and the pipeline turn theirs into one message each. The private
ones (``_FetchFailed``, ``_FilterError``, and ``CloseConnection`` in effect) never leave their module: each is caught
there, before any ``except KafkaguardError``.

Deliberately outside the tree (``tests/test_errors.py`` lists them, with why): ``protocol.build.WideningRequestError``
and the bare ``TypeError`` of ``protocol.build``/``protocol.lengths`` — a programming error in kafkaguard's own code
that the tests find, the same whatever a client sends, so no ``except KafkaguardError`` may mistake it for an answer.
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


class InvalidGroupError(KafkaguardError, ValueError):
    """A principal group name or member that cannot be stored, with what to write instead."""


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


#: Kafka's generic message for an OAUTHBEARER response its SaslServer refused with a SaslException
#: (``SaslServerAuthenticator``).
OAUTHBEARER_GENERIC_FAILURE_MESSAGE = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
)


class OAuthBearerError(KafkaguardError):
    """Root of SASL/OAUTHBEARER errors. Messages never carry a token."""


class OAuthBearerAuthenticationError(OAuthBearerError):
    """The OAUTHBEARER exchange failed. ``client_message`` is what Kafka sends the client in SaslAuthenticate's
    error message (with SASL_AUTHENTICATION_FAILED); the message itself is for the log."""

    def __init__(self, message: str, *, client_message: str) -> None:
        super().__init__(message)
        self.client_message = client_message


class OAuthBearerProtocolError(OAuthBearerAuthenticationError):
    """A client response Kafka's parser refuses (its ``SaslException``): the message is Kafka's, for the log; the
    client is told only Kafka's generic "Authentication failed during authentication due to invalid credentials
    with SASL mechanism OAUTHBEARER"."""

    def __init__(self, message: str) -> None:
        super().__init__(message, client_message=OAUTHBEARER_GENERIC_FAILURE_MESSAGE)


class OAuthBearerStateError(OAuthBearerError):
    """A step of an OAUTHBEARER session called out of order, or after the session has finished or failed."""


class ScramStateError(ScramError):
    """A step of a SCRAM session called out of order, or after the session has finished or failed
    (Kafka ILLEGAL_SASL_STATE). A programming error in the caller, not something a client can cause by itself."""

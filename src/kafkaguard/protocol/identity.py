"""How a server tells who its clients are, built once per process from the settings: the SASL mechanisms its
listeners can offer (``mechanisms``: SCRAM, PLAIN's password check, OAUTHBEARER's token check with the identity
provider's keys, GSSAPI's acceptor with the node's keytab and the principal-to-local rules) and the rules that turn a
client certificate into a principal.

The connection (``protocol.connection``) asks: after the TLS handshake of an SSL listener, ``certificate_principal``;
after a SASL login, the ``mechanisms.Login``. Server and proxy decide identity here alike. Every mechanism draws on
the process's one failed-login budget, ``Services.login_budget`` (the TLS handshake's share is taken by
``node.listening``). At start the server warns of every super user a client certificate can log in as
(``certificate_super_user_warnings``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.authorizer import parse_super_users
from kafkaguard.bootstrap import Services
from kafkaguard.config import SecurityProtocol
from kafkaguard.config.sections import KerberosSettings, ListenerSettings
from kafkaguard.errors import InvalidConfigError, KafkaguardError, OAuthBearerError
from kafkaguard.identity.jwks import JwksSource
from kafkaguard.identity.kerberos import Acceptor, KerberosError, default_realm
from kafkaguard.identity.kerberos_names import KerberosShortNamer
from kafkaguard.identity.oauth import TokenExpectations
from kafkaguard.identity.ssl_mapping import PrincipalMappingError, SslPrincipalMapper
from kafkaguard.identity.super_user_reach import certificate_super_users
from kafkaguard.identity.x500 import rfc2253_name
from kafkaguard.model import ANONYMOUS_PRINCIPAL
from kafkaguard.passwords.checker import PasswordChecker
from kafkaguard.passwords.throttle import DerivationPool
from kafkaguard.protocol.mechanisms import KerberosCheck, Mechanisms, TokenCheck


class CertificateNotMapped(KafkaguardError):
    """No ``ssl.principal.mapping.rules`` rule maps a client certificate's subject (none applies, or the one that
    applies cannot expand its replacement): as in Kafka, the client gets no principal and its connection closes."""


@dataclass(frozen=True, slots=True)
class Identity:
    mechanisms: Mechanisms
    #: OAUTHBEARER's token check (None without OAUTHBEARER): its keys are loaded at ``start``.
    tokens: TokenCheck | None
    #: ``ssl_principal_mapping_rules``, parsed once.
    ssl_mapper: SslPrincipalMapper
    #: PLAIN's PBKDF2 pool (None without PLAIN): closed with the server.
    pool: DerivationPool | None = None
    #: GSSAPI's acceptor pool (None without GSSAPI): closed with the server.
    kerberos_pool: DerivationPool | None = None

    def certificate_principal(self, certificate_der: bytes | None) -> str:
        """The principal of a client on an SSL listener: ``User:ANONYMOUS`` without a certificate (client auth
        ``none`` or ``requested``), else ``User:`` + its subject in Java's RFC 2253 form mapped by the rules
        (Kafka's ``DefaultKafkaPrincipalBuilder``). Pure CPU in microseconds: called on the event loop.

        :raises CertificateNotMapped: no rule applies to the subject.
        """
        if certificate_der is None:
            return ANONYMOUS_PRINCIPAL
        name = rfc2253_name(certificate_der)
        try:
            return f"User:{self.ssl_mapper.name_of(name)}"
        except PrincipalMappingError as e:  # no rule applies, or the rule's replacement cannot be expanded
            raise CertificateNotMapped(str(e)) from None

    @classmethod
    def from_services(cls, services: Services) -> Identity:
        """The identity rules of ``services.sections.identity``."""
        identity = services.sections.identity
        pool = checker = None
        if "PLAIN" in identity.sasl_mechanisms:
            # Shares the console's bounds: a PLAIN login costs what a console login costs (one PBKDF2 derivation).
            console = services.sections.console
            pool = DerivationPool(console.login_workers, console.login_max_pending, name="sasl-plain-pbkdf2")
            checker = PasswordChecker(services.credentials, pool, services.login_budget, mechanism="PLAIN")
        tokens = None
        oauthbearer = identity.oauthbearer
        if oauthbearer is not None:
            expectations = TokenExpectations(
                expected_audience=oauthbearer.expected_audience,
                expected_issuer=oauthbearer.expected_issuer,
                sub_claim_name=oauthbearer.sub_claim_name,
                scope_claim_name=oauthbearer.scope_claim_name,
                clock_skew_seconds=oauthbearer.clock_skew_seconds,
                groups_claim=oauthbearer.groups_claim_name,
            )
            keys = JwksSource(
                oauthbearer.jwks_endpoint_url,
                refresh_ms=oauthbearer.jwks_endpoint_refresh_ms,
                cafile=oauthbearer.jwks_endpoint_cafile,
                expedited_refreshes_per_minute=oauthbearer.jwks_expedited_refreshes_per_minute,
                statistics=services.jwks,
            )
            tokens = TokenCheck(keys, expectations)
        mapper = SslPrincipalMapper.from_rules(identity.ssl_principal_mapping_rules)
        kerberos = _kerberos_check(identity.kerberos)
        mechanisms = Mechanisms(
            services.credentials, services.server_secret, services.login_budget, checker, tokens, kerberos
        )
        return cls(mechanisms, tokens, mapper, pool, None if kerberos is None else kerberos.pool)

    async def start(self) -> None:
        """Load the identity provider's keys (OAUTHBEARER) and keep them fresh.

        :raises InvalidConfigError: they cannot be loaded: a server must not start unable to check tokens.
        """
        if self.tokens is not None:
            try:
                await self.tokens.keys.start()
            except OAuthBearerError as e:
                raise InvalidConfigError(str(e)) from None

    async def close(self) -> None:
        if self.tokens is not None:
            await self.tokens.keys.close()
        if self.pool is not None:
            self.pool.close()
        if self.kerberos_pool is not None:
            self.kerberos_pool.close()


def _kerberos_check(kerberos: KerberosSettings | None) -> KerberosCheck | None:
    """GSSAPI's acceptor, rules and pool, or None without GSSAPI. The rules' ``DEFAULT`` realm is krb5.conf's
    ``default_realm``, as Kafka's.

    :raises InvalidConfigError: the keytab cannot be read or holds no key of the principal.
    """
    if kerberos is None:
        return None
    try:
        acceptor = Acceptor(kerberos.keytab, kerberos.principal)
    except KerberosError as e:
        raise InvalidConfigError(f"sasl_kerberos_keytab: {e}") from None
    namer = KerberosShortNamer.from_rules(default_realm(), list(kerberos.principal_to_local_rules))
    # Accepting a ticket costs a keytab read and a replay-cache write: off the loop, bounded.
    pool = DerivationPool(kerberos.accept_workers, kerberos.accept_max_pending, name="sasl-gssapi")
    return KerberosCheck(acceptor, namer, pool)


def certificate_super_user_warnings(
    listening: ListenerSettings, super_users: str, mapper: SslPrincipalMapper
) -> list[str]:
    """One sentence per super user that a client certificate on an SSL listener can log in as: some subject maps to
    it under ``ssl_principal_mapping_rules`` (``identity.super_user_reach``, which says what the search cannot see).
    None without an SSL listener that asks for certificates (``ssl_client_auth`` ``none``: the rules never run)."""
    listeners = [str(listener) for listener in listening.listeners if listener.protocol is SecurityProtocol.SSL]
    if not listeners or listening.ssl_client_auth == "none":
        return []
    warnings = []
    for reach in certificate_super_users(mapper, sorted(parse_super_users(super_users))):
        confirmed = "" if reach.writable else " (a subject string the check could not confirm a certificate can carry)"
        warnings.append(
            f"super user {reach.super_user} can log in with a client certificate on {', '.join(listeners)}: "
            f"ssl_principal_mapping_rules map the subject {reach.subject!r}{confirmed} to it (rule {reach.rule}), so "
            "any certificate with such a subject from a CA of ssl_cafile is a super user's. Map certificates to names "
            "no super user has (for example RULE:^CN=([^,]*),OU=ServiceUsers,.*$/cert-$1/L) or give super users "
            "names no rule makes (README: Keeping super users off certificate logins)"
        )
    return warnings

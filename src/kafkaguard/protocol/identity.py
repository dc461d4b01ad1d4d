"""How a server tells who its clients are, built once per process from the settings: the SASL mechanisms its
listeners can offer (``mechanisms``) and the rules that turn a client certificate into a principal.

The connection (``protocol.connection``) asks: after the TLS handshake of an SSL listener, ``certificate_principal``;
after a SASL login, the ``mechanisms.Login``. Server and proxy decide identity here alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.bootstrap import Services
from kafkaguard.passwords.checker import PasswordChecker
from kafkaguard.passwords.throttle import DerivationPool, FailedLoginBudget
from kafkaguard.protocol.mechanisms import Mechanisms


@dataclass(frozen=True, slots=True)
class Identity:
    mechanisms: Mechanisms
    #: PLAIN's PBKDF2 pool (None without PLAIN): closed with the server.
    pool: DerivationPool | None = None

    @classmethod
    def from_services(cls, services: Services) -> Identity:
        """The identity rules of ``services.settings``."""
        settings = services.settings
        pool = checker = None
        if "PLAIN" in settings.sasl_mechanisms:
            # Shares the console's bounds: a PLAIN login costs what a console login costs (one PBKDF2 derivation).
            pool = DerivationPool(settings.console_login_workers, settings.console_login_max_pending,
                                  name="sasl-plain-pbkdf2")  # fmt: skip
            budget = FailedLoginBudget(settings.console_login_failure_burst, settings.console_login_failures_per_minute)
            checker = PasswordChecker(services.credentials, pool, budget)
        return cls(Mechanisms(services.credentials, services.server_secret, checker), pool)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

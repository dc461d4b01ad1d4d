"""Every refused console login is answered at one fixed time after its request arrived, so the time to a 401 (or a
429) tells nothing: not whether the user exists, not how heavy its credential is, not whether the header parsed.

Why: a failure used to be answered a fixed *delay* after its check, and the check's own cost showed through — an unknown
user (a decoy derivation), a known one and one with more PBKDF2 iterations gave medians a few ms apart, nearly disjoint
(see docs/benchmarks.md, "Figures from the code"). Now the answer is due at ``arrival + console_login_failure_seconds``
whatever came before.

How: ``RequestArrival``, the app's outermost middleware, stamps the arrival time in the ASGI scope; whatever refuses
a login (a 401 from the route's dependency, a 429 from ``LoginGate`` or the dependency) awaits
``wait_for_fixed_time`` before answering: a timer on the event loop, never a sleeping thread. A success is answered
at once (usually from the cache of verified logins).

The fixed time is a floor, kept out of reach by bounding the work before it: at most one PBKDF2 derivation per
login, on the console's bounded ``DerivationPool``, of at most the mechanism's ``max_iterations`` (16384, Kafka's
bound, which every credential kafkaguard stores respects). A stored credential outside the bounds (only other
tooling writing the store could make one) is never derived: ``PasswordChecker`` treats its user as unknown.
The heaviest derivation left, SCRAM-SHA-512 at 16384 iterations, takes milliseconds of one core; the default 0.25 s
leaves room for a full pool queue and a loaded machine. A check that still outlasts it (a starved machine, or a
fixed time set too low) is answered when it ends — refusing it early could refuse a right password — and counted
in ``kafkaguard_console_late_login_failures_total``, so the setting can be raised.

Worked example, fixed time 0.25 s: a request arriving at t = 10.000 for an unknown user gets its decoy derivation
done at 10.002 and is answered 401 at 10.250; a wrong password for a 16384-iteration user, derived by 10.007,
is answered 401 at 10.250; a header that does not parse, refused at 10.0003, is answered 401 at 10.250; the
right password, derived by 10.007, is answered 200 at once.
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Receive, Scope, Send

#: The ASGI scope key holding the request's arrival (``time.monotonic()``); an extension key, dotted as ASGI asks.
ARRIVAL_KEY = "kafkaguard.arrival"


class RequestArrival:
    """Stamps ``scope[ARRIVAL_KEY]`` when an HTTP request enters the app. Installed outermost, so the stamp is as
    early as the app can take it (uvicorn has parsed the request head, nothing else has run)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[ARRIVAL_KEY] = time.monotonic()
        await self.app(scope, receive, send)


async def wait_for_fixed_time(scope: Scope, seconds: float) -> bool:
    """Sleep until ``seconds`` after the request of ``scope`` arrived; False when that time had already passed
    (the answer is late). Without a stamp (an app built without ``RequestArrival``) the time counts from now."""
    now = time.monotonic()
    arrival = scope.get(ARRIVAL_KEY)
    remaining = (arrival if isinstance(arrival, float) else now) + seconds - now
    if remaining <= 0:
        return False
    await asyncio.sleep(remaining)
    return True

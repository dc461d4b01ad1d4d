"""``LoginGate``: a throttled login is refused (429) before routing, at half the event loop's cost.

A client that has used up its failed logins and sends a password the cache does not know would be refused by the
route's dependency anyway (``PasswordChecker.refuse_early``); answering it here skips FastAPI's routing,
dependency resolution and exception handling. In a flood of wrong passwords that is nearly every request, and
the event loop those requests take time from is the Kafka listener's too. The answer is the dependency's: the
same 429 body, ``Retry-After``, count and fixed answer time. Only ``/api/`` needs a login; other paths pass
untouched.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kafkaguard.console.auth import parse_basic
from kafkaguard.console.dependencies import ConsoleState, client_host, throttled
from kafkaguard.passwords.throttle import LoginThrottledError

_API_PREFIX = "/api/"


class LoginGate:
    def __init__(self, app: ASGIApp, state: ConsoleState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(_API_PREFIX):
            given = parse_basic(Headers(scope=scope).get("authorization"))
            if given is not None:
                try:
                    self.state.authenticator.refuse_early(
                        given.user, given.password, client_host(HTTPConnection(scope))
                    )
                except LoginThrottledError as e:
                    headers = await throttled(self.state, e, scope)
                    await JSONResponse({"detail": str(e)}, status_code=429, headers=headers)(scope, receive, send)
                    return
        await self.app(scope, receive, send)

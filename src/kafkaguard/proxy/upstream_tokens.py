"""The proxy's OAUTHBEARER tokens for the upstream: the OAuth 2.0 client-credentials grant (RFC 6749 §4.4), as Kafka's
``OAuthBearerLoginCallbackHandler`` and ``HttpAccessTokenRetriever`` get them.

::

    tokens = AccessTokenSource(url, client_id, client_secret, scope="kafka")   # one per proxy, shared
    token = await tokens.token()          # a new upstream connection logs in with the current token

A fetch is a POST of ``grant_type=client_credentials`` (and ``scope``) with HTTP Basic client authentication,
``base64(urlencode(client_id) ":" urlencode(client_secret))`` as Kafka sends it, and reads ``access_token`` and its
lifetime (``expires_in``; else the token's own ``exp`` claim, the only one Kafka reads).

When: the first ``token()`` fetches; a token is used until 80% of its lifetime has passed (Kafka's
``sasl.login.refresh.window.factor`` 0.8), then the next ``token()`` fetches a new one. Fetches are serialized
(concurrent connections wait for the one fetch instead of each making their own).

Failures:

* without a token still valid, a fetch is retried with a backoff from ``retry_backoff`` doubling up to
  ``retry_backoff_max`` (Kafka's ``sasl.login.retry.backoff.ms`` 100 and ``.max.ms`` 10000) while the time spent
  stays under ``retry_backoff_max``, then ``UpstreamUnavailable`` (the connection that asked fails; the next one
  tries again). An answer that retrying cannot change (a 4xx other than 408/429, e.g. a wrong client secret, or an
  answer without a token) is not retried, as in Kafka;
* with the current token still valid (a refresh failed), that token is used, and the refresh is tried again by the
  first ``token()`` after a backoff (the same doubling), so an identity provider's outage never delays a login
  while the token lasts.

Each failure is logged at WARNING with the endpoint, the client id and the HTTP status or error (``error`` and
``error_description`` of an OAuth error answer); never the secret, the Authorization header or a token.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jwt

from kafkaguard.errors import KafkaguardError
from kafkaguard.proxy.upstream import UpstreamUnavailable

if TYPE_CHECKING:  # imported by the one fetch below: a proxy without a token endpoint does not carry it (~5 MiB)
    import httpx

log = logging.getLogger(__name__)

#: Kafka's sasl.login.refresh.window.factor: a token is refreshed once this share of its lifetime has passed.
REFRESH_WINDOW_FACTOR = 0.8
#: Kafka's sasl.login.retry.backoff.ms and sasl.login.retry.backoff.max.ms, in seconds.
RETRY_BACKOFF_SECONDS = 0.1
RETRY_BACKOFF_MAX_SECONDS = 10.0
#: Kafka's sasl.login.connect.timeout.ms/read.timeout.ms are unset by default (the JDK's); a bound here.
REQUEST_TIMEOUT_SECONDS = 10.0
#: HTTP statuses worth asking again (the server may answer differently next time).
_RETRIABLE_STATUSES = frozenset({408, 429})
_MAX_ERROR_TEXT = 200


@dataclass(frozen=True, slots=True)
class AccessToken:
    """A token, and when (on the source's clock) it should be refreshed and when it expires."""

    value: str = field(repr=False)
    refresh_at: float
    expires_at: float


class _FetchFailed(KafkaguardError):
    """One fetch failed; ``retriable`` says whether asking again may help. The message holds no secret."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


class AccessTokenSource:
    """The proxy's access tokens from one token endpoint (see the module docstring). One per proxy; not shared
    between event loops."""

    def __init__(
        self,
        url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        verify: ssl.SSLContext | bool = True,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        refresh_window_factor: float = REFRESH_WINDOW_FACTOR,
        retry_backoff: float = RETRY_BACKOFF_SECONDS,
        retry_backoff_max: float = RETRY_BACKOFF_MAX_SECONDS,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self.url = url
        self.client_id = client_id
        self._authorization = "Basic " + base64.b64encode(
            f"{urllib.parse.quote_plus(client_id)}:{urllib.parse.quote_plus(client_secret)}".encode()
        ).decode("ascii")
        self._form = {"grant_type": "client_credentials"} | ({"scope": scope} if scope else {})
        self._verify = verify
        self._clock, self._sleep = clock, sleep  # a test's clock advances by its own sleep
        self._refresh_window_factor = refresh_window_factor
        self._retry_backoff = retry_backoff
        self._retry_backoff_max = retry_backoff_max
        self._request_timeout = request_timeout
        self._current: AccessToken | None = None
        self._failures = 0
        self._next_attempt = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AccessTokenSource(url={self.url!r}, client_id={self.client_id!r})"

    __str__ = __repr__

    @property
    def current(self) -> AccessToken | None:
        """The token held now (None before the first fetch)."""
        return self._current

    async def token(self) -> str:
        """The token a new upstream connection should log in with: the current one, or a new one when there is
        none yet, or it is due for refresh (see the module docstring).

        :raises UpstreamUnavailable: no valid token, and the endpoint did not give one (the message says why).
        """
        async with self._lock:
            now = self._clock()
            current = self._current
            if current is not None and now < current.refresh_at:
                return current.value
            if current is not None and now < current.expires_at:
                if now >= self._next_attempt:
                    await self._refresh(current, now)
                return self._current.value if self._current is not None else current.value
            return (await self._fetch_with_retries()).value

    async def _refresh(self, current: AccessToken, now: float) -> None:
        """One attempt to replace the still-valid ``current``; a failure keeps it and schedules the next attempt."""
        try:
            self._keep(await self._fetch())
        except _FetchFailed as e:
            self._failures += 1
            delay = min(self._retry_backoff * 2 ** (self._failures - 1), self._retry_backoff_max)
            self._next_attempt = now + delay
            log.warning(
                "cannot refresh the upstream OAuth token from %s (client %s): %s; the current one is valid for "
                "%.0f s more, trying again in %.1f s",
                self.url,
                self.client_id,
                e,
                current.expires_at - now,
                delay,
            )

    async def _fetch_with_retries(self) -> AccessToken:
        """A new token, retried with backoff while that can help (see the module docstring)."""
        started = self._clock()
        delay = self._retry_backoff
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._keep(await self._fetch())
            except _FetchFailed as e:
                spent = self._clock() - started
                if not e.retriable or spent + delay > self._retry_backoff_max:
                    log.warning(
                        "cannot get an upstream OAuth token from %s (client %s) after %d attempt(s): %s",
                        self.url,
                        self.client_id,
                        attempt,
                        e,
                    )
                    raise UpstreamUnavailable(
                        f"cannot get an OAuth token from {self.url} for client {self.client_id}: {e}"
                    ) from None
                log.warning(
                    "cannot get an upstream OAuth token from %s (client %s): %s; trying again in %.1f s",
                    self.url,
                    self.client_id,
                    e,
                    delay,
                )
            await self._sleep(delay)
            delay = min(delay * 2, self._retry_backoff_max)

    def _keep(self, token: AccessToken) -> AccessToken:
        self._current = token
        self._failures = 0
        self._next_attempt = 0.0
        return token

    async def _fetch(self) -> AccessToken:
        """One POST to the endpoint.

        :raises _FetchFailed: unreachable, refused, or an answer without a usable token.
        """
        import httpx  # see the import at the top

        headers = {"Authorization": self._authorization, "Accept": "application/json", "Cache-Control": "no-cache"}
        sent = self._clock()
        try:
            async with httpx.AsyncClient(verify=self._verify, timeout=self._request_timeout) as client:
                response = await client.post(self.url, data=self._form, headers=headers)
        except httpx.HTTPError as e:
            raise _FetchFailed(f"{e.__class__.__name__}: {e}", retriable=True) from None
        if response.status_code != 200:
            retriable = response.status_code >= 500 or response.status_code in _RETRIABLE_STATUSES
            raise _FetchFailed(f"HTTP {response.status_code}{_oauth_error(response)}", retriable=retriable)
        try:
            document = response.json()
        except ValueError:
            raise _FetchFailed("the answer is not JSON", retriable=False) from None
        token = document.get("access_token") if isinstance(document, dict) else None
        if not isinstance(token, str) or not token:
            raise _FetchFailed("the answer has no access_token", retriable=False)
        lifetime = _lifetime(document, token)
        if lifetime is None or lifetime <= 0:
            raise _FetchFailed(
                "the answer says neither expires_in nor a future exp claim in the token", retriable=False
            )
        log.info(
            "got an upstream OAuth token from %s (client %s), valid for %.0f s", self.url, self.client_id, lifetime
        )
        return AccessToken(token, sent + lifetime * self._refresh_window_factor, sent + lifetime)


def _lifetime(document: dict[str, Any], token: str) -> float | None:
    """Seconds the token lasts: ``expires_in`` (RFC 6749 §5.1), else its JWT ``exp`` claim from now."""
    expires_in = document.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        return float(expires_in)
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    exp = claims.get("exp")
    if isinstance(exp, int | float) and not isinstance(exp, bool):
        return float(exp) - time.time()
    return None


def _oauth_error(response: httpx.Response) -> str:
    """``: error (error_description)`` of an OAuth error answer (RFC 6749 §5.2), cut short; empty otherwise."""
    try:
        document = response.json()
    except ValueError:
        return ""
    if not isinstance(document, dict) or not isinstance(document.get("error"), str):
        return ""
    text = document["error"]
    if isinstance(document.get("error_description"), str):
        text += f" ({document['error_description']})"
    return f": {text[:_MAX_ERROR_TEXT]}"

"""The identity provider's public keys (Kafka's ``sasl.oauthbearer.jwks.endpoint.url``), kept fresh in the
background: Kafka's ``RefreshingHttpsJwks`` on asyncio.

::

    source = JwksSource("https://idp.example/jwks", refresh_ms=3_600_000, cafile=None)
    await source.start()                          # loads once; raises JwksUnavailableError if it cannot
    keys = await source.keys_for(token_key_id(token))   # an unknown kid may wait for one expedited refresh
    validated = validate_token(token, keys, expectations, now_ms)
    await source.close()

Timing, as Kafka's: a refresh every ``refresh_ms`` after the start; a fetch that fails is retried with Kafka's
``Retry`` (``retry_backoff_ms`` doubling, for at most ``retry_backoff_max_ms`` in all), and if every attempt fails
the previous keys stay. A token whose ``kid`` is not in the keys asks for one expedited refresh, at most once per
kid every ``MISSING_KEY_ID_CACHE_IN_FLIGHT_MS`` (60 s), remembering the last ``MISSING_KEY_ID_CACHE_MAX_ENTRIES``
(16) such kids (least recently asked first out), and never for a kid longer than ``MISSING_KEY_ID_MAX_KEY_LENGTH``
(1000) characters; a refresh that finds a kid forgets it. Keys that cannot be used (unparseable, symmetric ``oct``,
unknown type) are skipped with a log line; a document without a ``keys`` list is a failed fetch.

Where this differs from Kafka:

* Kafka schedules the expedited refresh and refuses the token at once (the client's next login finds the key);
  here the caller awaits that one refresh (shared with any refresh already running), then validates against its
  result. A caller never awaits more than one refresh.
* A ``file:`` URL: Kafka's ``JwksFileVerificationKeyResolver`` reads the file once, at start, and never again;
  here the file is read again on the same schedule as an https endpoint (and for unknown kids), so keys can be
  rotated without a restart. A file that becomes unreadable keeps the previous keys, like a failed fetch.
* Kafka asks for a refresh whenever no key is *selected* (e.g. an ES256 token naming an RSA key's kid); here only
  for a kid the keys do not have: a known kid's keys do not change by fetching them again.
* A token without ``kid`` that no key matches: Kafka's resolver throws a NullPointerException (caught by jose4j:
  the token is refused); here it is refused too, and asks for no refresh either.
* kafkaguard's addition: **at most ``expedited_refreshes_per_minute`` expedited refreshes in any 60 s, for the whole
  source** (``sasl_oauthbearer_jwks_expedited_refreshes_per_minute``, default 6). Kafka's rule is per kid, so a
  token with a new kid every time (anyone can make one: the kid is read before the signature is checked) made a
  refresh every time, a read of a ``file:`` JWKS or a fetch from the identity provider per attempt. Kafka's per-kid
  rule still applies within the limit; an unknown kid beyond it gets no
  refresh (the token fails as one signed by an unknown key does, and its kid is not remembered, so a real new key's
  kid is refreshed for as soon as the limit allows). A refresh already running is shared, whatever the limit says.

Counted in ``JwksStatistics`` (``Services.jwks``; the console exports ``kafkaguard_jwks_refreshes_total{reason}`` —
``scheduled``, ``unknown_kid`` — and ``kafkaguard_jwks_refreshes_skipped_total{reason}`` — ``rate_limited``,
``kid_recently_asked``, ``kid_too_long``). Worked example (limit 6): 40 tokens, each with a new kid, in 10 s: the
first 6 each wait for a refresh, the other 34 are refused without one (``rate_limited`` 34); a minute after the
first refresh, the next unknown kid may refresh again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import jwt

from kafkaguard.errors import OAuthBearerError
from kafkaguard.identity.oauth import KeySet, VerificationKey

if TYPE_CHECKING:  # imported where an https:// JWKS is read: a node without one does not carry httpx (~5 MiB)
    import httpx

log = logging.getLogger(__name__)

#: Kafka's ``RefreshingHttpsJwks`` constants.
MISSING_KEY_ID_CACHE_MAX_ENTRIES = 16
MISSING_KEY_ID_CACHE_IN_FLIGHT_MS = 60_000
MISSING_KEY_ID_MAX_KEY_LENGTH = 1000
#: Kafka's defaults for sasl.oauthbearer.jwks.endpoint.{refresh.ms, retry.backoff.ms, retry.backoff.max.ms}.
DEFAULT_REFRESH_MS = 3_600_000
DEFAULT_RETRY_BACKOFF_MS = 100
DEFAULT_RETRY_BACKOFF_MAX_MS = 10_000
#: Largest JWKS document read, in bytes.
MAX_DOCUMENT_BYTES = 1 << 20
#: kafkaguard's limit on expedited (unknown-kid) refreshes of one source in any 60 s (the setting's default).
DEFAULT_EXPEDITED_REFRESHES_PER_MINUTE = 6
_MINUTE = 60.0


class RefreshReason(Enum):
    """Why a refresh ran; the value is the metric label."""

    SCHEDULED = "scheduled"
    UNKNOWN_KID = "unknown_kid"


class SkipReason(Enum):
    """Why a token's unknown kid got no refresh; the value is the metric label."""

    RATE_LIMITED = "rate_limited"  # kafkaguard's: expedited_refreshes_per_minute already used in the last 60 s
    KID_RECENTLY_ASKED = "kid_recently_asked"  # Kafka's: this kid asked for one within 60 s
    KID_TOO_LONG = "kid_too_long"  # Kafka's: a kid above MISSING_KEY_ID_MAX_KEY_LENGTH characters


class JwksStatistics:
    """Refreshes run by reason, and unknown-kid refreshes skipped by reason, of every JWKS source of a process
    (``Services.jwks``). Thread-safe; counts only grow."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[RefreshReason | SkipReason, int] = {}

    def __repr__(self) -> str:
        return f"JwksStatistics({', '.join(f'{k.value}={v}' for k, v in self.counts().items())})"

    def record(self, what: RefreshReason | SkipReason) -> None:
        with self._lock:
            self._counts[what] = self._counts.get(what, 0) + 1

    def count(self, what: RefreshReason | SkipReason) -> int:
        with self._lock:
            return self._counts.get(what, 0)

    def counts(self) -> dict[RefreshReason | SkipReason, int]:
        """A copy of every count so far."""
        with self._lock:
            return dict(self._counts)


class JwksUnavailableError(OAuthBearerError):
    """The JWKS could not be read or parsed (at start: the server cannot start; later: the old keys stay)."""


def parse_jwks(document: bytes | str, location: str = "JWKS") -> KeySet:
    """The usable public keys of a JWKS document, in its order; unusable keys are skipped with a log line.

    :raises JwksUnavailableError: not JSON, or no ``keys`` list.
    """
    try:
        data = json.loads(document)
    except ValueError as e:
        raise JwksUnavailableError(f"{location} is not JSON: {e}") from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise JwksUnavailableError(f"{location} has no 'keys' list")
    keys: list[VerificationKey] = []
    for position, entry in enumerate(entries):
        kid = entry.get("kid") if isinstance(entry, dict) else None
        try:
            keys.append(_verification_key(entry))
        except (jwt.PyJWTError, ValueError, TypeError, AttributeError) as e:
            log.warning("%s: skipping key %d (kid %r): %s", location, position, kid, e)
    return KeySet(tuple(keys))


def _verification_key(entry: Any) -> VerificationKey:
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    kty = entry.get("kty")
    if kty not in ("RSA", "EC", "OKP"):
        raise ValueError(f"key type {kty!r} is not an asymmetric key type (RSA, EC, OKP)")
    for member in ("kid", "use", "alg", "crv"):
        if member in entry and not isinstance(entry[member], str):
            raise ValueError(f"{member} is not a string")
    key = jwt.PyJWK(entry).key
    public = key.public_key() if hasattr(key, "public_key") else key
    return VerificationKey(
        kid=entry.get("kid"), kty=kty, use=entry.get("use"), alg=entry.get("alg"), crv=entry.get("crv"), key=public
    )


class JwksSource:
    """The keys of one JWKS URL (``https://…`` or ``file:/path``), refreshed in a background task.

    :param url: Kafka's sasl.oauthbearer.jwks.endpoint.url.
    :param refresh_ms: Kafka's sasl.oauthbearer.jwks.endpoint.refresh.ms.
    :param cafile: PEM CA bundle for an https endpoint (default: the system's trust store); TLS is always verified.
    :param expedited_refreshes_per_minute: kafkaguard's limit on unknown-kid refreshes in any 60 s (0: none).
    :param statistics: where refreshes and skipped refreshes are counted (``Services.jwks``).
    :param transport: for tests: an httpx transport to use instead of the network (TLS settings then unused).
    :param clock: monotonic seconds, injected so tests can move time.
    :raises JwksUnavailableError: a URL that is neither https:// nor file:, or a negative limit.
    """

    def __init__(
        self,
        url: str,
        *,
        refresh_ms: int = DEFAULT_REFRESH_MS,
        cafile: Path | str | None = None,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        retry_backoff_max_ms: int = DEFAULT_RETRY_BACKOFF_MAX_MS,
        timeout_seconds: float = 10.0,
        expedited_refreshes_per_minute: int = DEFAULT_EXPEDITED_REFRESHES_PER_MINUTE,
        statistics: JwksStatistics | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("https", "file"):
            raise JwksUnavailableError(f"JWKS URL {url!r} is neither https://… nor file:/path")
        if refresh_ms <= 0 or retry_backoff_ms < 0 or retry_backoff_max_ms < retry_backoff_ms:
            raise JwksUnavailableError("JWKS refresh_ms must be positive and 0 <= retry_backoff_ms <= its maximum")
        if expedited_refreshes_per_minute < 0:
            raise JwksUnavailableError("JWKS expedited_refreshes_per_minute must be 0 or more")
        self._url = url
        self._file = Path(unquote(parts.path)) if parts.scheme.lower() == "file" else None
        self._refresh_ms = refresh_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        if self._file is None:
            import httpx  # only https:// JWKS need it (see the import at the top)

            verify: ssl.SSLContext | bool = True
            if transport is None:
                verify = ssl.create_default_context(cafile=str(cafile) if cafile is not None else None)
            self._client = httpx.AsyncClient(
                verify=verify, timeout=timeout_seconds, transport=transport, follow_redirects=False
            )
        self._keys: KeySet | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()  # kid -> next time (clock seconds) it may refresh
        #: When the expedited refreshes of the last 60 s started (clock seconds), at most the limit's number.
        self._expedited: deque[float] = deque(maxlen=max(1, expedited_refreshes_per_minute))
        self._expedited_limit = expedited_refreshes_per_minute
        self.statistics = statistics if statistics is not None else JwksStatistics()
        self._refreshing: asyncio.Task[None] | None = None
        self._scheduler: asyncio.Task[None] | None = None
        #: How many fetches completed (successful or not), for tests and metrics.
        self.fetches = 0

    def __repr__(self) -> str:
        count = None if self._keys is None else len(self._keys.keys)
        return f"JwksSource(url={self._url!r}, keys={count})"

    @property
    def url(self) -> str:
        return self._url

    @property
    def keys(self) -> KeySet:
        """The current keys. :raises JwksUnavailableError: before :meth:`start`."""
        if self._keys is None:
            raise JwksUnavailableError("the JWKS source has not been started")
        return self._keys

    async def start(self) -> None:
        """Load the keys (one attempt: a server should not start on keys it cannot read) and start refreshing.

        :raises JwksUnavailableError: the JWKS cannot be fetched or parsed.
        """
        try:
            self._keys = await self._fetch()
        except JwksUnavailableError as e:
            raise JwksUnavailableError(f"Could not load the OAUTHBEARER JWKS from {self._url}: {e}") from None
        log.info("JWKS %s: %d keys; refreshing every %d ms", self._url, len(self._keys.keys), self._refresh_ms)
        self._scheduler = asyncio.create_task(self._refresh_periodically(), name=f"jwks-refresh {self._url}")

    async def close(self) -> None:
        for task in (self._scheduler, self._refreshing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._scheduler = self._refreshing = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def keys_for(self, kid: str | None) -> KeySet:
        """The keys to validate a token with ``kid``: the current ones; when ``kid`` is unknown, the keys after one
        refresh: the one already running, if any, else a new one if Kafka's missing-kid cache and the source's limit
        allow it (else the current keys: the token fails as one signed by an unknown key)."""
        keys = self.keys
        if kid is None or kid in keys.key_ids():
            return keys
        running = self._refreshing is not None and not self._refreshing.done()
        skipped = self._why_not_expedite(kid, sharing=running)
        if skipped is None:
            log.debug("JWKS %s: unknown kid %r; refreshing now", self._url, kid)
            await asyncio.shield(self._refresh(RefreshReason.UNKNOWN_KID))
            return self.keys
        if running and self._refreshing is not None:
            await asyncio.shield(self._refreshing)  # another caller's refresh, already on its way: share it
        else:
            self.statistics.record(skipped)
        return self.keys

    def _why_not_expedite(self, kid: str, *, sharing: bool) -> SkipReason | None:
        """None when ``kid`` may have an expedited refresh now (and then it is counted against both limits), else
        why not: Kafka's ``maybeExpediteRefresh`` (at most once per kid per in-flight period, for 16 kids, LRU),
        then kafkaguard's limit for the whole source (a refresh already running is shared, so it is not asked)."""
        if len(kid) > MISSING_KEY_ID_MAX_KEY_LENGTH:
            log.warning(
                "Key ID %s (trimmed to first %d characters out of %d total) was too long to cache",
                kid[:MISSING_KEY_ID_MAX_KEY_LENGTH],
                MISSING_KEY_ID_MAX_KEY_LENGTH,
                len(kid),
            )
            return SkipReason.KID_TOO_LONG
        now = self._clock()
        next_check = self._missing.get(kid)
        if next_check is not None:
            self._missing.move_to_end(kid)  # access order, as Kafka's LinkedHashMap
            if next_check > now:
                return SkipReason.KID_RECENTLY_ASKED
        if not sharing:
            expedited = self._expedited
            while expedited and expedited[0] <= now - _MINUTE:
                expedited.popleft()
            if self._expedited_limit == 0 or len(expedited) >= self._expedited_limit:
                return SkipReason.RATE_LIMITED  # not remembered: a real new kid may refresh once the limit allows
            expedited.append(now)
        self._missing[kid] = now + MISSING_KEY_ID_CACHE_IN_FLIGHT_MS / 1000
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KEY_ID_CACHE_MAX_ENTRIES:
            self._missing.popitem(last=False)
        return None

    def _refresh(self, reason: RefreshReason) -> asyncio.Task[None]:
        """The running refresh, or a new one (counted under ``reason``): concurrent askers share it."""
        if self._refreshing is None or self._refreshing.done():
            self.statistics.record(reason)
            self._refreshing = asyncio.create_task(self._refresh_with_retry(), name=f"jwks-fetch {self._url}")
        return self._refreshing

    async def _refresh_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_ms / 1000)
            await asyncio.shield(self._refresh(RefreshReason.SCHEDULED))

    async def _refresh_with_retry(self) -> None:
        """Kafka's ``Retry.execute``: attempts until ``retry_backoff_max_ms`` has passed, sleeping
        ``retry_backoff_ms * 2^(attempt-1)`` (capped by the time left) between them; all failed: keep the keys."""
        end = self._clock() + self._retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                keys = await self._fetch()
            except JwksUnavailableError as e:
                wait = min(self._retry_backoff_ms * 2 ** (attempt - 1) / 1000, end - self._clock())
                if wait <= 0:
                    log.warning(
                        "JWKS refresh of %s failed (%d attempts); keeping the previous keys: %s", self._url, attempt, e
                    )
                    return
                log.warning(
                    "JWKS refresh of %s: attempt %d failed (%s); retrying in %.0f ms",
                    self._url,
                    attempt,
                    e,
                    wait * 1000,
                )
                await asyncio.sleep(wait)
                continue
            for kid in keys.key_ids():
                self._missing.pop(kid, None)
            self._keys = keys
            log.info("JWKS refresh of %s complete: %d keys", self._url, len(keys.keys))
            return

    async def _fetch(self) -> KeySet:
        try:
            return parse_jwks(await self._read(), self._url)
        finally:
            self.fetches += 1

    async def _read(self) -> bytes:
        if self._file is not None:
            try:
                return await asyncio.to_thread(self._file.read_bytes)
            except OSError as e:
                raise JwksUnavailableError(f"cannot read {self._file}: {e.strerror or e}") from None
        client = self._client
        if client is None:  # closed
            raise JwksUnavailableError(f"the JWKS source of {self._url} is closed")
        import httpx  # loaded with the client, in __init__

        try:
            response = await client.get(self._url, headers={"Accept": "application/json"})
        except httpx.HTTPError as e:
            raise JwksUnavailableError(f"cannot fetch {self._url}: {type(e).__name__}: {e}") from None
        if response.status_code != 200:
            raise JwksUnavailableError(f"{self._url} answered HTTP {response.status_code}")
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise JwksUnavailableError(f"{self._url} sent more than {MAX_DOCUMENT_BYTES} bytes")
        return response.content

"""Logged-in sessions: they end when their user's credential does, and (KIP-368) when their lifetime is over.

A connection that completed a SASL login holds a ``Session``: the user, the mechanism, the exact stored credential the
client proved (salt, StoredKey, ServerKey, iterations) and, with ``connections_max_reauth_ms`` > 0, when the session
expires. The server's ``SessionRegistry`` indexes the open sessions by user and follows the credentials
(``CredentialService.on_change``): after every replacement of the credential snapshot — this process's own write
(AlterUserScramCredentials, the CLI, the console) at once, another process's at the poll that picks it up, within
``sync_interval_seconds`` — it is told which users' credentials changed, and ends each session of those users whose
credential is no longer the stored one (deleted, or replaced: a new password has a new salt and new keys). Ending a
session closes its connection and logs one INFO line (user, address, listener, reason; never a key). Adding a
mechanism to a user leaves that user's sessions open: the credential each of them proved is still stored.

Worked example::

    alice logs in twice with SCRAM-SHA-256 (credential C1), bob once      by user: {alice: {s1, s2}, bob: {s3}}
    admin adds a SCRAM-SHA-512 credential for alice     → told {alice}    s1, s2: SHA-256 is still C1 → both stay
    admin sets alice's SCRAM-SHA-256 password (C2)      → told {alice}    s1, s2: C2 ≠ C1 → both closed; s3 not read
    another process deletes bob                         → told {bob} at the next poll → s3 closed

Cost model: nothing per request but reading ``Session.ended`` (and, with a lifetime, one clock read). Per snapshot
change one check on the event loop: a set intersection of the changed users with the logged-in ones (in C, over the
smaller side), then one credential equality per session of a changed user. A change reaching many sessions is
checked in slices of ``CHECK_SLICE`` sessions, yielding to the loop between them, so the loop is held one slice at a
time however many sessions end (see docs/benchmarks.md, "Figures from the code"). The notification crosses threads with
``call_soon_threadsafe`` (the change happens on a writer's or the poll's worker thread); the check reads the
snapshot current when it runs, so notifications that arrive late or out of order still end exactly the sessions
whose credential is gone.

The login itself refuses a credential replaced between client-first and client-final (``protocol.sasl``), so a session
never starts with a credential that is already gone when it registers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from kafkaguard.scram import ScramCredential
from kafkaguard.service.credentials import CredentialService

log = logging.getLogger(__name__)

#: Kafka's ``KafkaChannel``: a session re-authenticates at most once a second (a faster attempt is refused).
MIN_REAUTHENTICATION_INTERVAL_SECONDS = 1.0
#: Sessions compared between two yields to the event loop when a change reaches many: about 1 ms of work, the
#: log line of each ended session included.
CHECK_SLICE = 128


class Session:
    """One logged-in connection. ``end(reason)`` closes the connection (once); times are ``time.monotonic()``."""

    __slots__ = (
        "_close",
        "_reauthenticated_at",
        "credential",
        "ended",
        "expires_at",
        "host",
        "lifetime_ms",
        "listener",
        "mechanism",
        "user",
    )

    def __init__(
        self,
        user: str,
        mechanism: str,
        credential: ScramCredential | None,
        *,
        host: str,
        listener: str,
        lifetime_ms: int | None,
        now: float,
        close: Callable[[], None],
    ) -> None:
        self.user = user
        self.mechanism = mechanism
        self.credential = credential
        self.host = host
        self.listener = listener
        #: How long the session lasts (``connections_max_reauth_ms``, or what its token had left, possibly 0); None:
        #: as long as the connection.
        self.lifetime_ms = lifetime_ms
        self.expires_at = _expiry(now, lifetime_ms)
        #: Why the session ended (the connection closes with this reason), or None while it is on.
        self.ended: str | None = None
        self._close = close
        self._reauthenticated_at: float | None = None

    def __repr__(self) -> str:
        return f"Session(user={self.user!r}, mechanism={self.mechanism}, host={self.host!r}, ended={self.ended!r})"

    def expired(self, now: float) -> bool:
        """Past its lifetime without re-authenticating (Kafka's ``serverAuthenticationSessionExpired``)."""
        return self.expires_at is not None and now > self.expires_at

    def begin_reauthentication(self, now: float) -> str | None:
        """Why this session may not re-authenticate now, or None (then the attempt is counted as begun): only a
        session with a lifetime may (Kafka), and at most once a second."""
        if self.expires_at is None:
            return "re-authentication is not enabled (connections_max_reauth_ms is 0)"
        last = self._reauthenticated_at
        if last is not None and now - last < MIN_REAUTHENTICATION_INTERVAL_SECONDS:
            return f"re-authentication again within {MIN_REAUTHENTICATION_INTERVAL_SECONDS:g} s"
        self._reauthenticated_at = now
        return None

    def renew(self, credential: ScramCredential | None, lifetime_ms: int | None, now: float) -> None:
        """A successful re-authentication (same user and mechanism): the credential it proved (None: a token), a
        new lifetime."""
        self.credential = credential
        self.lifetime_ms = lifetime_ms
        self.expires_at = _expiry(now, lifetime_ms)

    def end(self, reason: str) -> None:
        """End the session: log it, then close its connection (which then reports ``reason``)."""
        if self.ended is not None:
            return
        self.ended = reason
        log.info(
            "closing the session of User:%s from /%s (listener %s): %s", self.user, self.host, self.listener, reason
        )
        self._close()


def _expiry(now: float, lifetime_ms: int | None) -> float | None:
    return None if lifetime_ms is None else now + lifetime_ms / 1000


class SessionRegistry:
    """The open sessions of one server (or proxy), by user; ends those whose credential is gone (module docstring).

    ``add``, ``discard`` and ``check`` run on the server's event loop; ``start`` subscribes to the credential
    changes (on the running loop) and ``stop`` unsubscribes.
    """

    def __init__(self, credentials: CredentialService) -> None:
        self._credentials = credentials
        self._by_user: dict[str, set[Session]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._checks: set[asyncio.Task[int]] = set()

    def __len__(self) -> int:
        return sum(len(sessions) for sessions in self._by_user.values())

    def start(self) -> None:
        """Follow the credentials from now on (call on the server's running event loop)."""
        if self._unsubscribe is None:
            self._loop = asyncio.get_running_loop()
            self._unsubscribe = self._credentials.on_change(self._changed)

    def stop(self) -> None:
        """Stop following the credentials; a sliced check still under way is cancelled."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._loop = None
        for task in self._checks:
            task.cancel()

    def add(self, session: Session) -> None:
        self._by_user.setdefault(session.user, set()).add(session)

    def discard(self, session: Session) -> None:
        sessions = self._by_user.get(session.user)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._by_user[session.user]

    def sessions_of(self, user: str) -> frozenset[Session]:
        return frozenset(self._by_user.get(user, ()))

    def check(self, users: Iterable[str]) -> int:
        """End every session of ``users`` whose credential is no longer stored, at once; returns how many ended."""
        return sum(self._end_if_stale(session) for user in self._logged_in(users) for session in self.sessions_of(user))

    async def check_in_slices(self, users: Iterable[str]) -> int:
        """``check``, yielding to the event loop after every ``CHECK_SLICE`` sessions."""
        ended = compared = 0
        for user in self._logged_in(users):
            for session in self.sessions_of(user):
                ended += self._end_if_stale(session)
                compared += 1
                if compared % CHECK_SLICE == 0:
                    await asyncio.sleep(0)
        return ended

    def _logged_in(self, users: Iterable[str]) -> set[str]:
        """Those of ``users`` with an open session: one set intersection in C, over the smaller side (a reload
        after another process's bulk change may name thousands of users, of whom few are logged in here)."""
        wanted = users if isinstance(users, frozenset | set) else frozenset(users)
        return self._by_user.keys() & wanted

    def _end_if_stale(self, session: Session) -> bool:
        if session.ended is not None or session not in self._by_user.get(session.user, ()):
            return False  # ended already, or its connection closed while a sliced check yielded
        credential = session.credential
        if credential is None:  # an OAUTHBEARER session: its token, not a stored credential, bounds it
            return False
        mechanism = credential.mechanism
        if self._credentials.is_current(session.user, mechanism, credential):
            return False
        gone = self._credentials.lookup(session.user, mechanism) is None
        session.end(f"its {mechanism} credential was {'deleted' if gone else 'changed'}")
        return True

    def _changed(self, users: frozenset[str]) -> None:
        """``CredentialService.on_change``'s listener: any thread; the check runs on the server's loop."""
        loop = self._loop
        if loop is None:
            return
        # A loop already closed has no connection left to end.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._start_check, users)

    def _start_check(self, users: frozenset[str]) -> None:
        """On the loop: a change touching few sessions is checked at once, a larger one in slices."""
        if self._loop is None:  # stopped meanwhile
            return
        if len(users) <= CHECK_SLICE and sum(len(self._by_user.get(u, ())) for u in users) <= CHECK_SLICE:
            self.check(users)
            return
        task = asyncio.create_task(self.check_in_slices(users), name="session-check")
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

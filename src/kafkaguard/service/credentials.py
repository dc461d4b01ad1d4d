"""SCRAM credential use cases: KIP-554 alter and describe, a password convenience, and lookup for SASL.

Alter follows KIP-554 as SEMANTICS.md §11.3 describes it, amended by §16.5 and §16.6:

* deletions are checked first, in request order, then upsertions; the first error recorded for a user sticks and
  the user's later entries are ignored;
* DUPLICATE_RESOURCE for a user named both in a deletion and an upsertion, or with one mechanism twice (several
  mechanisms for one user in one request are fine, as KIP-554's own kafka-configs example needs);
* empty user name, iterations outside 4096..16384, a salt that is not 16..128 bytes long (Kafka checks none; see
  ``scram.MIN_SALT_BYTES``), an empty salted password → UNACCEPTABLE_CREDENTIAL; a mechanism other than 1/2 →
  UNSUPPORTED_SASL_MECHANISM; deleting what is not stored → RESOURCE_NOT_FOUND;
* all of a user's alterations are applied or none is, every user's in one transaction; errors of one user never
  affect another. One result per distinct user, in order of first mention (Kafka's order is a hash order).

Lookups for SASL never touch the store. The service holds every credential in an immutable in-memory snapshot
(user and mechanism → credential, plus each mechanism's decoy profile), read through one reference without a lock,
so an event loop that looks a user up never waits on the disk or on a writer. This process's writes replace the
snapshot after their durable commit; other processes' writes reach it through ``poll()`` (one cheap read of the
store's credential version; a reload of every credential when it moved), which the server calls every
``sync_interval_seconds`` on a worker thread.

Whoever holds a logged-in session follows the changes through ``on_change``: after every replacement of the
snapshot (this process's write, at once; another process's, at the poll that picks it up) each listener is told the
users whose credentials it changed, and ``is_current`` says whether the exact credential a session proved is still
the stored one (the server closes the sessions whose credential is gone, ``protocol.sessions``).

Secrets (salts, salted passwords, keys) never appear in results, logs, reprs or error messages.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from kafkaguard.errors import UnacceptableCredentialError, UnsupportedMechanismError
from kafkaguard.model import Actor, ItemError, KafkaErrorCode, ManagementEvent
from kafkaguard.scram import (
    DEFAULT_ITERATIONS,
    DEFAULT_SALT_BYTES,
    DecoyProfile,
    ScramCredential,
    ScramMechanism,
    check_iterations,
    check_salt,
    credential_from_salted_password,
    decoy_profile_of,
    salted_password,
)
from kafkaguard.service.events import EventRelay, scram_event, store_refused
from kafkaguard.service.outage import unavailable
from kafkaguard.service.polled import Polled
from kafkaguard.store import CredentialInfo, CredentialStore, CredentialWrite, StoreUnavailableError, UserAlteration

log = logging.getLogger(__name__)

DUPLICATE_ALTERATION = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
EMPTY_USER = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
#: Bytes of random salt for ``upsert_password``.
SALT_BYTES = DEFAULT_SALT_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramDeletion:
    """Delete ``user``'s credential for ``mechanism`` (a wire code, or a ScramMechanism)."""

    user: str
    mechanism: int | ScramMechanism


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramUpsertion:
    """Set ``user``'s credential for ``mechanism`` from what AlterUserScramCredentials carries."""

    user: str
    mechanism: int | ScramMechanism
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)

    def __repr__(self) -> str:
        return (
            f"ScramUpsertion(user={self.user!r}, mechanism={self.mechanism!r}, iterations={self.iterations}, "
            "secrets=<masked>)"
        )

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class UserAlterationResult:
    """One user's outcome: ``error`` is None when every alteration of that user was applied."""

    user: str
    error: ItemError | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class UserDescription:
    """One user's described credentials (mechanism and iterations only), or the error for that name."""

    user: str
    error: ItemError | None = None
    credentials: tuple[CredentialInfo, ...] = ()


def _mechanism(code: int | ScramMechanism) -> ScramMechanism | None:
    if isinstance(code, ScramMechanism):
        return code
    try:
        return ScramMechanism.from_code(code)
    except UnsupportedMechanismError:
        return None


def mechanism_name(code: int | ScramMechanism) -> str:
    """The mechanism's name for an event, or its unknown wire code."""
    mechanism = _mechanism(code)
    return mechanism.mechanism_name if mechanism is not None else f"UNKNOWN({_code(code)})"


def _code(mechanism: int | ScramMechanism) -> int:
    return mechanism.code if isinstance(mechanism, ScramMechanism) else int(mechanism)


_CredentialKey = tuple[str, ScramMechanism]
#: ``listener(users)``: the users whose credentials one replacement of the snapshot added, changed or deleted.
CredentialsChanged = Callable[[frozenset[str]], None]


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """Every credential at one credential version of the store, and each mechanism's decoy profile derived from
    them. Never mutated: a change builds a new one."""

    version: int
    credentials: Mapping[_CredentialKey, ScramCredential] = field(repr=False)
    profiles: Mapping[ScramMechanism, DecoyProfile]

    @classmethod
    def of(cls, version: int, credentials: dict[_CredentialKey, ScramCredential]) -> _Snapshot:
        """Owns ``credentials`` from now on (the caller must not keep changing it)."""
        values = credentials.values()
        profiles = {mechanism: decoy_profile_of(mechanism, values) for mechanism in ScramMechanism}
        return cls(version, MappingProxyType(credentials), MappingProxyType(profiles))


class _Request:
    """The per-user bookkeeping of one alter request."""

    def __init__(self) -> None:
        self.users: dict[str, None] = {}  # first-mention order
        self.errors: dict[str, ItemError] = {}
        self.deletions: dict[str, dict[int, ScramMechanism]] = {}
        self.upsertions: dict[str, dict[int, ScramCredential]] = {}

    def mention(self, user: str) -> bool:
        """Record the user; False if it already failed (its later entries are ignored)."""
        self.users.setdefault(user)
        return user not in self.errors

    def fail(self, user: str, error: ItemError) -> None:
        self.errors[user] = error
        self.deletions.pop(user, None)
        self.upsertions.pop(user, None)


class CredentialService(Polled):
    """SCRAM credentials backed by one store. Thread-safe; ``lookup``, ``lookup_for`` and ``decoy_profile`` read
    only the in-memory snapshot (see the module docstring) and never block."""

    def __init__(
        self,
        store: CredentialStore,
        *,
        salt_factory: Callable[[], bytes] | None = None,
        events: EventRelay | None = None,
    ) -> None:
        """Load every stored credential into the snapshot. ``events``: where management events go besides the
        store (``service.events``).

        :raises StoreError: the store cannot be read.
        """
        self._store = store
        self._events = events if events is not None else EventRelay()
        self._salt_factory = salt_factory or (lambda: secrets.token_bytes(SALT_BYTES))
        #: Held by writers and by ``sync`` only, never by readers: it orders snapshot replacements.
        self._lock = threading.RLock()
        self._snapshot = _Snapshot.of(-1, {})
        #: Replaced, never mutated (under ``_lock``): a notification iterates the tuple it read.
        self._listeners: tuple[CredentialsChanged, ...] = ()
        self.sync()

    @property
    def version(self) -> int:
        """The store's credential version the snapshot reflects."""
        return self._snapshot.version

    def alter(
        self,
        deletions: Sequence[ScramDeletion] = (),
        upsertions: Sequence[ScramUpsertion] = (),
        *,
        actor: Actor,
    ) -> list[UserAlterationResult]:
        """AlterUserScramCredentials (see the module docstring): one result per distinct user.

        Events: one ``scram.deleted``/``scram.upserted`` per credential deleted or set (user, mechanism and
        iterations: never a salt, key or password), written with the change; one per item of a refused user, with
        that user's error.

        :raises StoreError: nothing was changed (the whole request fails).
        """
        results = self._alter(deletions, upsertions, actor)
        errors = {result.user: result.error for result in results if result.error is not None}
        refused = [
            scram_event("scram.deleted", actor, d.user, mechanism_name(d.mechanism), None, errors[d.user])
            for d in deletions
            if d.user in errors
        ] + [
            scram_event("scram.upserted", actor, u.user, mechanism_name(u.mechanism), u.iterations, errors[u.user])
            for u in upsertions
            if u.user in errors
        ]
        store_refused(self._store, refused)
        self._events.publish(refused)
        return results

    def _alter(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion], actor: Actor
    ) -> list[UserAlterationResult]:
        request = _Request()
        for deletion in deletions:
            user, code = deletion.user, _code(deletion.mechanism)
            if not request.mention(user):
                continue
            pending = request.deletions.setdefault(user, {})
            if code in pending:
                request.fail(user, ItemError(KafkaErrorCode.DUPLICATE_RESOURCE, DUPLICATE_ALTERATION))
                continue
            error = self._check_deletion(user, deletion.mechanism)
            if error is not None:
                request.fail(user, error)
                continue
            mechanism = _mechanism(deletion.mechanism)
            if mechanism is not None:
                pending[code] = mechanism
        for upsertion in upsertions:
            user, code = upsertion.user, _code(upsertion.mechanism)
            if not request.mention(user):
                continue
            pending_upserts = request.upsertions.setdefault(user, {})
            if request.deletions.get(user) or code in pending_upserts:
                request.fail(user, ItemError(KafkaErrorCode.DUPLICATE_RESOURCE, DUPLICATE_ALTERATION))
                continue
            checked = _check_upsertion(upsertion)
            if isinstance(checked, ScramCredential):
                pending_upserts[code] = checked
            else:
                request.fail(user, checked)
        alterations = [
            UserAlteration(
                user,
                tuple(request.deletions.get(user, {}).values()),
                tuple(request.upsertions.get(user, {}).values()),
            )
            for user in request.users
            if user not in request.errors and (request.deletions.get(user) or request.upsertions.get(user))
        ]
        if alterations:
            # The store re-checks deletions inside its transaction (another process may have deleted meanwhile).
            events: list[ManagementEvent] = []

            def history(write: CredentialWrite) -> list[ManagementEvent]:
                events.clear()  # the events of this outcome only, however often the store asks
                for alteration in alterations:
                    if alteration.user in write.missing:
                        continue
                    events.extend(
                        scram_event("scram.deleted", actor, alteration.user, m.mechanism_name, None)
                        for m in alteration.deletions
                    )
                    events.extend(
                        scram_event("scram.upserted", actor, alteration.user, c.mechanism.mechanism_name, c.iterations)
                        for c in alteration.upsertions
                    )
                return events

            try:
                with self._lock:
                    write = self._store.alter_credentials(alterations, history=history)
                    changed = self._apply(write, alterations)
            except StoreUnavailableError as e:
                for alteration in alterations:
                    request.fail(alteration.user, unavailable(e))
                return [UserAlterationResult(user, request.errors.get(user)) for user in request.users]
            self._notify(changed)
            for user in write.missing:
                request.fail(user, ItemError(KafkaErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING))
            self._events.publish(events)
        return [UserAlterationResult(user, request.errors.get(user)) for user in request.users]

    def _check_deletion(self, user: str, mechanism_code: int | ScramMechanism) -> ItemError | None:
        if not user:
            return ItemError(KafkaErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
        mechanism = _mechanism(mechanism_code)
        if mechanism is None:
            return ItemError(KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
        if self._store.get_credential(user, mechanism) is None:
            return ItemError(KafkaErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING)
        return None

    def upsert_password(
        self,
        user: str,
        mechanism: int | ScramMechanism,
        password: str,
        iterations: int = DEFAULT_ITERATIONS,
        *,
        actor: Actor,
    ) -> UserAlterationResult:
        """Set a credential from a password with a fresh random salt (for the CLI and the console); the password
        is used for the derivation only and never stored. ``iterations`` defaults to ``scram.DEFAULT_ITERATIONS``.

        :raises StoreError: nothing was changed.
        """
        error = _check_fields(user, mechanism, iterations)
        if error is None and not password:
            error = ItemError(KafkaErrorCode.UNACCEPTABLE_CREDENTIAL, "Password must not be empty")
        resolved = _mechanism(mechanism)
        if error is not None or resolved is None:
            error = error or ItemError(KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
            refused = [scram_event("scram.upserted", actor, user, mechanism_name(mechanism), iterations, error)]
            store_refused(self._store, refused)
            self._events.publish(refused)
            return UserAlterationResult(user, error)
        salt = self._salt_factory()
        upsertion = ScramUpsertion(
            user=user,
            mechanism=resolved,
            iterations=iterations,
            salt=salt,
            salted_password=salted_password(resolved, password, salt, iterations),
        )
        return self.alter(upsertions=[upsertion], actor=actor)[0]

    def describe(self, users: Sequence[str] | None = None) -> list[UserDescription]:
        """DescribeUserScramCredentials (SEMANTICS.md §11.4): every user with a credential for None or an empty
        list; else one result per distinct name (mechanism and iterations only).

        :raises StoreError: the store cannot be read.
        """
        if not users:
            return [
                UserDescription(user, credentials=infos)
                for user, infos in sorted(self._store.credential_infos().items())
            ]
        counts = Counter(users)
        infos = self._store.credential_infos(set(counts))
        results: list[UserDescription] = []
        for user, count in counts.items():
            if count > 1:
                message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                results.append(UserDescription(user, ItemError(KafkaErrorCode.DUPLICATE_RESOURCE, message)))
            elif user in infos:
                results.append(UserDescription(user, credentials=infos[user]))
            else:
                message = f"Attempt to describe a user credential that does not exist: {user}"
                results.append(UserDescription(user, ItemError(KafkaErrorCode.RESOURCE_NOT_FOUND, message)))
        return results

    def lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """``user``'s credential for ``mechanism`` in the snapshot, or None. Reads no store and takes no lock:
        safe on an event loop. Another process's change is seen after the next ``poll()``."""
        return self._snapshot.credentials.get((user, mechanism))

    def lookup_for(self, mechanism: ScramMechanism) -> Callable[[str], ScramCredential | None]:
        """``lookup`` bound to one mechanism: the ``lookup(username)`` a ``ScramServerSession`` takes (reads only
        the snapshot current at each call)."""

        def lookup(user: str) -> ScramCredential | None:
            return self._snapshot.credentials.get((user, mechanism))

        return lookup

    def decoy_profile(self, mechanism: ScramMechanism) -> DecoyProfile:
        """The shape an unknown user's decoy credential must have to look like a stored one: the most common
        (iterations, salt length) among the stored credentials of ``mechanism``, or the default when there is
        none (``scram.decoy_profile_of``). Reads only the snapshot: safe on an event loop."""
        return self._snapshot.profiles[mechanism]

    def is_current(self, user: str, mechanism: ScramMechanism, credential: ScramCredential) -> bool:
        """Whether ``credential`` (salt, StoredKey, ServerKey and iterations) is still ``user``'s stored credential
        for ``mechanism`` in the snapshot: False once it was deleted or replaced (a new password has a new salt).
        Reads only the snapshot: safe on an event loop. Both sides are the server's own values, so a plain
        comparison leaks nothing."""
        return self._snapshot.credentials.get((user, mechanism)) == credential

    def on_change(self, listener: CredentialsChanged) -> Callable[[], None]:
        """Call ``listener(users)`` after every replacement of the snapshot that changed the credentials of
        ``users``, in the thread that replaced it (a writer's, or the poll's worker thread) with no lock held; a
        listener must be quick and must not raise. Returns the function that removes the listener."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

        def remove() -> None:
            with self._lock:
                self._listeners = tuple(known for known in self._listeners if known is not listener)

        return remove

    # ------------------------------------------------------------------------------------------- following

    def _stored_version(self) -> int:
        return self._store.credential_version()

    def sync(self) -> None:
        """Reload every stored credential into a new snapshot (the store's current version).

        :raises StoreError: the store cannot be read.
        """
        with self._lock:
            changed = self._reload()
        self._notify(changed)

    def _reload(self) -> frozenset[str]:
        """``sync`` without the notification: the users whose credentials the reload changed (O(credentials): the
        reload itself reads them all). Called with ``_lock`` held."""
        loaded = self._store.load_credentials()
        credentials = {(user, credential.mechanism): credential for user, credential in loaded.credentials}
        before = self._snapshot.credentials
        changed = frozenset(
            user
            for user, mechanism in before.keys() | credentials.keys()
            if before.get((user, mechanism)) != credentials.get((user, mechanism))
        )
        self._snapshot = _Snapshot.of(loaded.version, credentials)
        log.debug("loaded %d SCRAM credentials at version %d", len(credentials), loaded.version)
        return changed

    def _apply(self, write: CredentialWrite, alterations: Sequence[UserAlteration]) -> frozenset[str]:
        """After this process's durable write: apply it to a copy of the snapshot if the snapshot was at the
        write's base version, else (another process wrote in between) reload. Returns the users it changed (for
        ``_notify``). Called with ``_lock`` held."""
        snapshot = self._snapshot
        if write.version == write.base_version or write.version <= snapshot.version:
            return frozenset()
        if write.base_version != snapshot.version:
            return self._reload()
        credentials = dict(snapshot.credentials)
        changed: set[str] = set()
        for alteration in alterations:
            if alteration.user in write.missing:
                continue
            changed.add(alteration.user)
            for mechanism in alteration.deletions:
                credentials.pop((alteration.user, mechanism), None)
            for credential in alteration.upsertions:
                credentials[(alteration.user, credential.mechanism)] = credential
        self._snapshot = _Snapshot.of(write.version, credentials)
        return frozenset(changed)

    def _notify(self, users: frozenset[str]) -> None:
        """Tell every listener (``on_change``) which users' credentials changed; called without ``_lock``, after
        the new snapshot is in place, so a listener that looks sees it. A failing listener is logged: the change
        itself is durable and applied."""
        if not users:
            return
        for listener in self._listeners:
            try:
                listener(users)
            except Exception:
                log.exception("a listener of SCRAM credential changes failed")


def _check_fields(user: str, mechanism: int | ScramMechanism, iterations: int) -> ItemError | None:
    """Kafka's checks of an upsertion, in Kafka's order: name, mechanism, iterations."""
    if not user:
        return ItemError(KafkaErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
    resolved = _mechanism(mechanism)
    if resolved is None:
        return ItemError(KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    try:
        check_iterations(resolved, iterations)
    except UnacceptableCredentialError as e:
        return ItemError(KafkaErrorCode.UNACCEPTABLE_CREDENTIAL, str(e))
    return None


def _check_upsertion(upsertion: ScramUpsertion) -> ScramCredential | ItemError:
    """The credential to store, or the error (SEMANTICS.md §11.3, §16.5)."""
    error = _check_fields(upsertion.user, upsertion.mechanism, upsertion.iterations)
    if error is not None:
        return error
    mechanism = _mechanism(upsertion.mechanism)
    if mechanism is None:  # unreachable: _check_fields has resolved it
        return ItemError(KafkaErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    try:
        check_salt(upsertion.salt)
        return credential_from_salted_password(
            mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
    except UnacceptableCredentialError as e:
        return ItemError(KafkaErrorCode.UNACCEPTABLE_CREDENTIAL, str(e))

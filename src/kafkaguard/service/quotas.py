"""Client quotas (KIP-546): AlterClientQuotas and DescribeClientQuotas with Kafka 3.9's rules, and the one writer.

Alter follows Kafka's ``ClientQuotaControlManager`` (the KRaft controller), message for message:

* an entity is a map of entity type to name (a null name is the type's default); a type named twice in one entry
  keeps its last name. Types are ``user``, ``client-id`` and ``ip``; ``ip`` stands alone, ``user`` and
  ``client-id`` alone or together. Keys: ``producer_byte_rate`` and ``consumer_byte_rate`` (integral, at most
  Long.MAX_VALUE), ``request_percentage`` and ``controller_mutation_rate`` (any double) for users and client ids;
  ``connection_creation_rate`` (integral, at most Integer.MAX_VALUE) for an ip, which must be an address or a
  resolvable host name. Every value must be greater than 0 (NaN passes, as in Kafka). A removal is never
  validated; removing what is not stored is a success;
* errors are INVALID_REQUEST with Kafka's text; an entity with an error changes nothing; one result per distinct
  entity (an entity named again, or with a key named twice, answers "Ignoring duplicate entity …" while an
  earlier valid entry for it still applies: Kafka's own behaviour);
* where Kafka's result depends on the iteration order of a Java ``HashMap`` (which of several bad types or keys
  is reported, the text of an entity, the order of results), ``java_order`` reproduces that order;
* every valid entity's changes are written in one transaction (Kafka's atomic batch); ``validate_only`` writes
  nothing.

Describe follows Kafka's ``ClientQuotasImage.describe``: filter components with match types EXACT (0), DEFAULT (1)
and SPECIFIED (2) and ``strict``; a malformed filter answers a top-level error and no entries.

Reads never touch the store: ``describe`` answers from an immutable in-memory snapshot (entity → values) behind one
reference, which this process's writes replace after their commit and ``poll()`` refreshes when another process
moved the store's quota version (the server polls every ``sync_interval_seconds`` on a worker thread). Nothing here
enforces a quota: that is the job of whatever carries the client traffic.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
import struct
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from kafkaguard.errors import KafkaguardError
from kafkaguard.model import Actor, ItemError, KafkaErrorCode
from kafkaguard.service.events import EventRelay, quota_event, store_refused
from kafkaguard.service.outage import unavailable
from kafkaguard.service.polled import Polled
from kafkaguard.store import QuotaChange, QuotaEntity, QuotaRecord, QuotaStore, StoreUnavailableError
from kafkaguard.store.ports import quota_entity, quota_record_order

log = logging.getLogger(__name__)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

#: Kafka's ``QuotaConfigs``: key → ConfigDef type ("LONG", "INT" or "DOUBLE").
USER_AND_CLIENT_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "producer_byte_rate": "LONG",
        "consumer_byte_rate": "LONG",
        "request_percentage": "DOUBLE",
        "controller_mutation_rate": "DOUBLE",
    }
)
IP_KEYS: Mapping[str, str] = MappingProxyType({"connection_creation_rate": "INT"})

_LONG_MAX = float(2**63 - 1)  # as Java compares a double with Long.MAX_VALUE: 2^63
_INT_MAX = float(2**31 - 1)
_INVALID = KafkaErrorCode.INVALID_REQUEST

K = TypeVar("K", bound=Hashable)


# ------------------------------------------------------------------------------------------------ Java HashMap order


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _resize(capacity: int, threshold: int) -> tuple[int, int]:
    """``HashMap.resize``: the new (capacity, threshold)."""
    if capacity > 0:
        new_capacity, new_threshold = capacity * 2, (threshold * 2 if capacity >= 16 else 0)
    elif threshold > 0:
        new_capacity, new_threshold = threshold, 0
    else:
        new_capacity, new_threshold = 16, 12
    if new_threshold == 0:
        new_threshold = int(new_capacity * 0.75)
    return new_capacity, new_threshold


def java_order(keys: Iterable[K], hash_of: Callable[[K], int], initial_capacity: int | None = None) -> list[K]:
    """The distinct ``keys`` (put in this order) in the iteration order of a ``java.util.HashMap`` built with
    ``new HashMap<>(initial_capacity)`` (``new HashMap<>()`` for None) and ``hash_of`` as ``hashCode``.

    HashMap iterates bucket by bucket (index ``(h ^ h >>> 16) & (capacity - 1)``), each bucket in insertion order
    (a resize splits buckets without reordering), so the order is a stable sort by the final bucket index.
    """
    if initial_capacity is None:
        capacity, threshold = 0, 0
    else:
        capacity, threshold = 0, 1 << max(0, initial_capacity - 1).bit_length()  # tableSizeFor
    seen: dict[K, int] = {}
    for key in keys:
        if capacity == 0:
            capacity, threshold = _resize(capacity, threshold)
        if key in seen:
            continue
        h = hash_of(key) & 0xFFFFFFFF
        seen[key] = h ^ (h >> 16)
        if len(seen) > threshold:
            capacity, threshold = _resize(capacity, threshold)
    return sorted(seen, key=lambda key: seen[key] & (capacity - 1))


def _entry_hash(pair: tuple[str, str | None]) -> int:
    """``Map.Entry.hashCode`` of (type, name)."""
    name = pair[1]
    return java_string_hash(pair[0]) ^ (java_string_hash(name) if name is not None else 0)


def _entity_hash(entity: frozenset[tuple[str, str | None]]) -> int:
    """``ClientQuotaEntity.hashCode`` = ``Objects.hash(entries)`` = 31 + the map's hash (the sum of its entries')."""
    return (31 + sum(_entry_hash(pair) for pair in entity)) & 0xFFFFFFFF


def java_entity(pairs: Sequence[tuple[str, str | None]]) -> tuple[tuple[str, str | None], ...]:
    """The entity map Kafka builds from an entry's entity list (``new HashMap<>(size)``, a later name for the same
    type replacing the earlier), as (type, name) pairs in its iteration order."""
    names = dict(pairs)
    order = java_order((entity_type for entity_type, _ in pairs), java_string_hash, len(pairs))
    return tuple((entity_type, names[entity_type]) for entity_type in order)


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString`` of a map in this order."""
    inner = ", ".join(f"{entity_type}={'null' if name is None else name}" for entity_type, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


# ---------------------------------------------------------------------------------------------------- request types


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaOp:
    """Set ``key`` to ``value``, or remove it (``remove``; the value is then ignored)."""

    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity's (type, name) pairs as sent, and its ops."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[QuotaOp, ...] = ()


@dataclass(frozen=True, slots=True)
class QuotaAlterationResult:
    """The outcome for one distinct entity; ``entity`` in the order Kafka's map iterates it."""

    entity: tuple[tuple[str, str | None], ...]
    error: ItemError | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaFilterComponent:
    """One DescribeClientQuotas filter component (``match_type``: ``MATCH_EXACT``, ``_DEFAULT``, ``_SPECIFIED``)."""

    entity_type: str
    match_type: int
    match: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaDescription:
    """DescribeClientQuotas' answer: the matching entities (sorted by entity), or a top-level error and None."""

    entries: tuple[QuotaRecord, ...] | None
    error: ItemError | None = None


class _FilterError(KafkaguardError):
    """Ends the check of a malformed filter with its error (private control flow: the service answers it)."""

    def __init__(self, code: KafkaErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = ItemError(code, message)


def resolves(host: str) -> bool:
    """Kafka's ``InetAddress.getByName`` check: an IP literal, or a name the resolver knows."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    return True


# ------------------------------------------------------------------------------------------------------ validation


def _check_entity(entity: Sequence[tuple[str, str | None]], resolve: Callable[[str], bool]) -> str | None:
    """Kafka's ``validateEntity`` then ``configKeysForEntityType``: the error message, or None."""
    if not entity:
        return "Invalid empty client quota entity"
    for entity_type, name in entity:
        if entity_type not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
    names = dict(entity)
    if IP in names:
        if USER in names or CLIENT_ID in names:
            # Kafka's text, missing space included.
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        ip = names[IP]
        if ip is not None and not resolve(ip):
            return f"{ip} is not a valid IP or resolvable host."
    return None


def check_quota_value(keys: Mapping[str, str], key: str, value: float) -> str | None:
    """Kafka's ``validateQuotaKeyValue``: the error message, or None."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    if kind == "INT" and value > _INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if kind == "LONG" and value > _LONG_MAX:
        return f"Proposed value for {key} is too large for a LONG."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def _same(a: float | None, b: float | None) -> bool:
    """``Objects.equals`` of two Doubles: NaN equals NaN."""
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def matches(entity: QuotaEntity, exact: Mapping[str, str | None], specified: Iterable[str], *, strict: bool) -> bool:
    """Kafka's ``ClientQuotasImage.matches``."""
    names = dict(entity)
    wanted = set(specified)
    if strict and len(names) != len(exact) + len(wanted):
        return False
    for entity_type, name in exact.items():
        if entity_type not in names or names[entity_type] != name:
            return False
    return all(entity_type in names for entity_type in wanted)


def parse_filter(components: Sequence[QuotaFilterComponent]) -> tuple[dict[str, str | None], set[str]]:
    """Kafka's checks of a filter, in Kafka's order: the exact matches and the specified types.

    :raises _FilterError: the filter is malformed (INVALID_REQUEST or UNSUPPORTED_VERSION, Kafka's text).
    """
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        entity_type = component.entity_type
        if not entity_type:
            raise _FilterError(_INVALID, "Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise _FilterError(_INVALID, f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in ENTITY_TYPES:
            raise _FilterError(KafkaErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise _FilterError(_INVALID, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise _FilterError(_INVALID, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise _FilterError(
                    _INVALID, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(entity_type)
        else:
            raise _FilterError(_INVALID, f"Unknown match type {component.match_type}")
    if (IP in exact or IP in specified) and ({USER, CLIENT_ID} & (set(exact) | specified)):
        raise _FilterError(
            _INVALID,
            "Invalid entity filter component combination. IP filter component should not be used with user or "
            "clientId filter component.",
        )
    return exact, specified


# --------------------------------------------------------------------------------------------------------- service


def _precedence(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """Kafka's precedence of quota entities for (user, client id), as canonical ``QuotaEntity`` tuples (sorted by
    type: ``client-id`` before ``user``)."""
    return (
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    )


@dataclass(frozen=True, slots=True)
class _Snapshot:
    version: int
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)


class QuotaService(Polled):
    """Client quotas backed by one store. Thread-safe; ``describe`` reads only the in-memory snapshot (see the
    module docstring) and never blocks."""

    def __init__(
        self, store: QuotaStore, *, resolve: Callable[[str], bool] = resolves, events: EventRelay | None = None
    ) -> None:
        """Load every stored quota into the snapshot. ``resolve`` decides whether an ip entity's name is an address
        or a resolvable host (Kafka's ``InetAddress.getByName``); tests inject one.

        :raises StoreError: the store cannot be read.
        """
        self._events = events if events is not None else EventRelay()
        self._store = store
        self._resolve = resolve
        #: Held by writers and by ``sync`` only, never by readers: it orders snapshot replacements.
        self._lock = threading.RLock()
        self._snapshot = _Snapshot(-1)
        self.sync()

    @property
    def version(self) -> int:
        """The store's quota version the snapshot reflects."""
        return self._snapshot.version

    def alter(
        self, alterations: Sequence[QuotaAlteration], *, actor: Actor, validate_only: bool = False
    ) -> list[QuotaAlterationResult]:
        """AlterClientQuotas (see the module docstring): one result per distinct entity, in Kafka's order.
        Call it from a worker thread: it may resolve a host name and it writes to the store.

        Events (not for ``validate_only``): one ``quota.altered`` per value set or removed, written with the change;
        one per operation of a refused entity, with its error.

        :raises StoreError: nothing was changed (the whole request fails).
        """
        results = self._alter(alterations, actor, validate_only)
        if validate_only:
            return results
        errors = {frozenset(result.entity): result.error for result in results if result.error is not None}
        refused = [
            quota_event(actor, quota_entity(entity), op.key, None if op.remove else float(op.value), error)
            for alteration in alterations
            if (error := errors.get(frozenset(entity := java_entity(alteration.entity)))) is not None
            for op in alteration.ops
        ]
        store_refused(self._store, refused)
        self._events.publish(refused)
        return results

    def _alter(
        self, alterations: Sequence[QuotaAlteration], actor: Actor, validate_only: bool
    ) -> list[QuotaAlterationResult]:
        with self._lock:
            self.poll()  # validate against the latest stored state, as Kafka's controller does
            current = self._snapshot.quotas
            results: dict[frozenset[tuple[str, str | None]], QuotaAlterationResult] = {}
            changes: list[QuotaChange] = []
            for alteration in alterations:
                entity = java_entity(alteration.entity)
                key = frozenset(entity)
                ops: dict[str, float | None] = {}
                for op in alteration.ops:
                    if op.key in ops:
                        message = (
                            f"Duplicate quota key {op.key} not updating quota for this entity {entity_text(entity)}"
                        )
                        results[key] = QuotaAlterationResult(entity, ItemError(_INVALID, message))
                    else:
                        ops[op.key] = None if op.remove else float(op.value)
                if key in results:
                    message = f"Ignoring duplicate entity {entity_text(entity)}"
                    results[key] = QuotaAlterationResult(entity, ItemError(_INVALID, message))
                    continue
                error, entity_changes = self._check(entity, ops, len(alteration.ops), current)
                results[key] = QuotaAlterationResult(entity, ItemError(_INVALID, error) if error else None)
                changes.extend(entity_changes)
            if changes and not validate_only:
                events = [quota_event(actor, c.entity, c.key, c.value) for c in changes]
                try:
                    write = self._store.alter_quotas(changes, history=lambda _write: events)
                except StoreUnavailableError as e:
                    for key, result in results.items():
                        if result.succeeded:
                            results[key] = QuotaAlterationResult(result.entity, unavailable(e))
                    return [results[key] for key in java_order(results, _entity_hash)]
                self._apply(write.base_version, write.version, changes)
                self._events.publish(events)
        return [results[key] for key in java_order(results, _entity_hash)]

    def _check(
        self,
        entity: tuple[tuple[str, str | None], ...],
        ops: Mapping[str, float | None],
        op_count: int,
        current: Mapping[QuotaEntity, Mapping[str, float]],
    ) -> tuple[str | None, list[QuotaChange]]:
        """Kafka's ``alterClientQuotaEntity``: (error, no changes) or (None, the changes that alter something)."""
        error = _check_entity(entity, self._resolve)
        if error is not None:
            return error, []
        keys = IP_KEYS if IP in dict(entity) else USER_AND_CLIENT_KEYS
        stored_entity = quota_entity(entity)
        stored = current.get(stored_entity, {})
        changes: list[QuotaChange] = []
        for quota_key in java_order(ops, java_string_hash, op_count):
            value = ops[quota_key]
            if value is None:
                if quota_key in stored:
                    changes.append(QuotaChange(stored_entity, quota_key, None))
                continue
            error = check_quota_value(keys, quota_key, value)
            if error is not None:
                return error, []
            if not _same(stored.get(quota_key), value):
                changes.append(QuotaChange(stored_entity, quota_key, value))
        return None, changes

    def describe(self, components: Sequence[QuotaFilterComponent], *, strict: bool = False) -> QuotaDescription:
        """DescribeClientQuotas from the snapshot (no store access, no lock: safe on an event loop)."""
        try:
            exact, specified = parse_filter(components)
        except _FilterError as e:
            return QuotaDescription(None, e.error)
        records = (
            QuotaRecord(entity, values)
            for entity, values in self._snapshot.quotas.items()
            if matches(entity, exact, specified, strict=strict)
        )
        return QuotaDescription(tuple(sorted(records, key=quota_record_order)))

    def quota_for(self, user: str, client_id: str, key: str) -> tuple[QuotaEntity, float] | None:
        """The quota ``key`` that applies to a client of ``user`` (the principal's name) with ``client_id``: the
        first stored entity in Kafka's precedence (``ClientQuotaManager``) that has ``key``, with its value; None
        when none has it (unlimited). From the snapshot: no store access, no lock, safe on an event loop.

        Kafka's order: /users/<user>/clients/<client-id>, /users/<user>/clients/<default>, /users/<user>,
        /users/<default>/clients/<client-id>, /users/<default>/clients/<default>, /users/<default>,
        /clients/<client-id>, /clients/<default>.
        """
        quotas = self._snapshot.quotas
        for entity in _precedence(user, client_id):
            values = quotas.get(entity)
            if values is not None:
                value = values.get(key)
                if value is not None:
                    return entity, value
        return None

    def quotas(self) -> tuple[QuotaRecord, ...]:
        """Every stored entity with its quotas, from the snapshot, sorted by entity."""
        return self.describe(()).entries or ()

    # ------------------------------------------------------------------------------------------- following

    def _stored_version(self) -> int:
        return self._store.quota_version()

    def sync(self) -> None:
        """Reload every stored quota into a new snapshot.

        :raises StoreError: the store cannot be read.
        """
        with self._lock:
            loaded = self._store.load_quotas()
            quotas = {record.entity: record.values for record in loaded.quotas}
            self._snapshot = _Snapshot(loaded.version, MappingProxyType(quotas))
        log.debug("loaded client quotas of %d entities at version %d", len(quotas), loaded.version)

    def _apply(self, base_version: int, version: int, changes: Sequence[QuotaChange]) -> None:
        """After this process's durable write: apply it to a copy of the snapshot, or reload if another process
        wrote in between. Called with ``_lock`` held."""
        snapshot = self._snapshot
        if base_version != snapshot.version:
            self.sync()
            return
        quotas = {entity: dict(values) for entity, values in snapshot.quotas.items()}
        for change in changes:
            values = quotas.setdefault(change.entity, {})
            if change.value is None:
                values.pop(change.key, None)
                if not values:
                    del quotas[change.entity]
            else:
                values[change.key] = change.value
        frozen = {entity: MappingProxyType(dict(sorted(values.items()))) for entity, values in quotas.items()}
        self._snapshot = _Snapshot(version, MappingProxyType(frozen))

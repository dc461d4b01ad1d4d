"""A copy-on-write map split into shards, so that an immutable snapshot can change in O(n / shards).

The authorizer's snapshots are immutable; a change builds a new one. Copying a 100k-entry dict costs milliseconds
(more once it has seen deletions), so the big maps of the index are split into ``SHARDS`` dicts by key hash and a
change copies only the shards it touches (~1.5k entries each at 100k) plus the tuple of shard references. Readers
pay one extra hash-and-index: ``shards[hash(key) & MASK].get(key)`` — the hot path inlines exactly that.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

SHARDS = 64
MASK = SHARDS - 1


class ShardedMap(Generic[K, V]):
    """An immutable mapping; ``updated`` returns a new one sharing every untouched shard."""

    __slots__ = ("_size", "shards")

    def __init__(self, shards: tuple[dict[K, V], ...] | None = None, size: int = 0) -> None:
        # An empty map's shards all share one dict: shards are copied before any write, so sharing is safe.
        if shards is None:
            empty: dict[K, V] = {}
            shards = (empty,) * SHARDS
        self.shards: tuple[dict[K, V], ...] = shards
        self._size = size

    @classmethod
    def from_items(cls, items: Iterable[tuple[K, V]]) -> ShardedMap[K, V]:
        shards: list[dict[K, V]] = [{} for _ in range(SHARDS)]
        for key, value in items:
            shards[hash(key) & MASK][key] = value
        return cls(tuple(shards), sum(len(s) for s in shards))

    def get(self, key: K, default: V | None = None) -> V | None:
        return self.shards[hash(key) & MASK].get(key, default)

    def __getitem__(self, key: K) -> V:
        return self.shards[hash(key) & MASK][key]

    def __contains__(self, key: object) -> bool:
        return key in self.shards[hash(key) & MASK]

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[K]:
        for shard in self.shards:
            yield from shard

    def values(self) -> Iterator[V]:
        for shard in self.shards:
            yield from shard.values()

    def items(self) -> Iterator[tuple[K, V]]:
        for shard in self.shards:
            yield from shard.items()

    def updated(self, changes: Mapping[K, V | None]) -> ShardedMap[K, V]:
        """A new map with ``changes`` applied: a value sets the key, None removes it (absent keys are ignored)."""
        if not changes:
            return self
        shards = list(self.shards)
        copied: set[int] = set()
        size = self._size
        for key, value in changes.items():
            index = hash(key) & MASK
            if index not in copied:
                copied.add(index)
                shards[index] = dict(shards[index])
            shard = shards[index]
            if value is None:
                if shard.pop(key, None) is not None:
                    size -= 1
            else:
                if key not in shard:
                    size += 1
                shard[key] = value
        return ShardedMap(tuple(shards), size)

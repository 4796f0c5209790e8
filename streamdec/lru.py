"""A small bounded mapping that forgets the least recently used entries.

Each entry has a weight (1 unless given); the weights kept never exceed ``capacity``. Not
locked: its owners lock around it (``DecoderCache``, ``SearchResources``)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

__all__ = ["LruCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.weight = 0  # of the entries kept
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        return list(self._entries)

    def get(self, key: K, default: V | None = None) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return default
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Keep ``value`` (its ``weight`` in [1, capacity]), forgetting the least recently
        used entries until the weights fit."""
        if not 1 <= weight <= self.capacity:
            raise ValueError(f"weight must be in [1, {self.capacity}], got {weight}")
        old = self._entries.pop(key, None)
        if old is not None:
            self.weight -= old[1]
        self._entries[key] = (value, weight)
        self.weight += weight
        while self.weight > self.capacity:
            _, (_, w) = self._entries.popitem(last=False)
            self.weight -= w

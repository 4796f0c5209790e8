"""Decoder outputs cached by the last ``context_size`` tokens.

The decoder is stateless: its output depends only on the last C tokens, so a bounded
LRU keyed by that tuple serves every hypothesis of every stream (keying by the whole
sequence would grow without bound). Misses of one call are computed in one batch.
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from ..lru import LruCache

__all__ = ["DecoderCache"]


class DecoderCache:
    """Thread-safe: one cache serves the searches of every worker thread."""

    def __init__(self, model, capacity: int = 20000) -> None:
        self._model = model
        self._entries: LruCache[tuple[int, ...], np.ndarray] = LruCache(capacity)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, contexts: Sequence[tuple[int, ...]]) -> np.ndarray:
        """contexts: n tuples of C token ids -> decoder_out (n, D)."""
        with self._lock:
            found = [self._entries.get(c) for c in contexts]
        missing = list(dict.fromkeys(c for c, f in zip(contexts, found) if f is None))
        if missing:
            computed = self._model.decode(np.array(missing, dtype=np.int64))
            fresh = dict(zip(missing, computed))
            with self._lock:
                for c, v in fresh.items():
                    self._entries.put(c, v)
            found = [f if f is not None else fresh[c] for c, f in zip(contexts, found)]
        return np.stack(found)

"""The sizes of growing per-stream buffers: a few size classes instead of every size.

A live stream's sample store and feature rows are replaced by larger ones now and then; if
each replacement asked for exactly what it needed, hundreds of streams would leave the C
heap holes of every size that no later request fits (a server's RSS creeping up over an
hour while nothing leaks). Sizes rounded to powers of two are few, so a block one stream
frees is the block the next one asks for; past ``LARGE`` elements (a whole file at once)
they round to a multiple of it instead, wasting at most that much.
"""
from __future__ import annotations

__all__ = ["size_class", "LARGE"]

#: from this many elements on, sizes are multiples of it, not powers of two
LARGE = 1 << 20


def size_class(need: int, minimum: int) -> int:
    """The smallest size class holding ``need`` elements, at least ``minimum`` (a power of
    two)."""
    need = max(int(need), minimum)
    if need > LARGE:
        return -(-need // LARGE) * LARGE
    return 1 << (need - 1).bit_length()

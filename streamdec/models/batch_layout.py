"""Where the batch is in a tensor of a graph exported with a fixed batch of 1.

In a row-major tensor the batch is an axis of the flattened layout: ``S`` elements inside
it (its stride) under ``O`` rows outside it. A ``Reshape`` does not change ``(O, S)``, so a
batch folded into a neighbouring axis (``[4, 1, 16, 95] -> [64, 95]``) is still found:
``Batch(k, o, s)`` says that at batch B the tensor's axis ``k`` holds ``o * B * s``
(``o = s = 1``: the axis is the batch). ``streamdec.models.dynamic_batch`` follows it
through a graph; where it cannot, the pass raises ``errors.BatchRewriteRefused``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

__all__ = ["Batch", "locate"]


@dataclass(frozen=True)
class Batch:
    """Where the batch is in a tensor: at batch B its axis ``k`` holds ``o * B * s``."""

    k: int
    o: int = 1
    s: int = 1

    def flat(self, dims: list[int]) -> tuple[int, int]:
        """(O, S): the rows outside the batch and the elements inside it."""
        return prod(dims[:self.k]) * self.o, self.s * prod(dims[self.k + 1:])


def locate(dims: list[int], outer: int, inner: int) -> Batch | None:
    """The batch of a tensor of ``dims`` (at batch 1) whose flat layout has ``outer`` rows
    outside the batch and ``inner`` elements inside it: an axis that is the batch preferred
    to one the batch is folded into; None where no axis holds it."""
    found = []
    for k, d in enumerate(dims):
        before, after = prod(dims[:k]), prod(dims[k + 1:])
        if outer % before == 0 and inner % after == 0 \
                and (outer // before) * (inner // after) == d:
            found.append(Batch(k, outer // before, inner // after))
    clean = [b for b in found if b.o == b.s == 1]
    return (clean or found or [None])[0]

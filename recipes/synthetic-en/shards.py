"""The training shards' file format and the loop that writes them (prepare_train.py,
prepare_extra.py; read by data.py).

``shard-*.npz`` holds consecutive utterances:
  feats   (sum_frames, 80) float16   concatenated fbank frames
  lens    (S,) int32                 frames per utterance
  texts   (S,) str                   normalised transcript ('' = no English target)
  phones  (S,) str                   espeak-ng IPA of the spoken text
  desc    (S,) str                   voice + augmentation description
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = ["write_shard", "run_jobs"]


def write_shard(path: Path, feats: list[np.ndarray], texts: list[str], phones: list[str],
                descs: list[str]) -> str:
    """Write one shard atomically (a resumed run never sees half a file); a summary line."""
    lens = [len(f) for f in feats]
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, feats=np.concatenate([f.astype(np.float16) for f in feats]),
             lens=np.array(lens, np.int32), texts=np.array(texts), phones=np.array(phones),
             desc=np.array(descs))
    os.replace(tmp, path)
    return f"{path.name}: {len(texts)} utts, {sum(lens) / 100 / 3600:.2f} h"


def run_jobs(make_shard: Callable[..., str], jobs: list[tuple], workers: int) -> None:
    """``make_shard(*job)`` for each job (in ``workers`` processes), printing its line."""
    if workers <= 1:
        for job in jobs:
            print(make_shard(*job), flush=True)
        return
    with ProcessPoolExecutor(workers) as pool:
        for msg in pool.map(make_shard, *zip(*jobs)) if jobs else []:
            print(msg, flush=True)

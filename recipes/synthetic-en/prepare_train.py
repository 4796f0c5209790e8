"""Synthesise, augment and featurise the training set into npz shards.

Each sentence of TRAIN_TXT is spoken once by a random training voice (``synth``:
espeak-ng with probability 1 - flite_share, else a training flite voice), augmented
(``augment.augment``) and turned into fbank with ``streamdec.features.compute_fbank``
(exactly the inference features, including the 8 kHz -> 16 kHz resampling for
telephone-band utterances). Utterance i is fully determined by (seed, i).

Shard ``OUT_DIR/shard-XXXXX.npz`` holds utterances [k*S, (k+1)*S):
  feats   (sum_frames, 80) float16   concatenated fbank frames
  lens    (S,) int32                 frames per utterance
  texts   (S,) str                   normalised transcript
  phones  (S,) str                   espeak-ng IPA of the spoken text
  desc    (S,) str                   voice + augmentation description
Shards already present are skipped, so an interrupted run resumes.

Usage: python prepare_train.py TRAIN_TXT OUT_DIR [--jobs 2] [--limit N] [--shard-size 500] [--channel]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: streamdec
from streamdec.features import compute_fbank  # noqa: E402

from augment import augment  # noqa: E402
from synth import TRAIN_FLITE_VOICES, random_espeak_voice, random_flite_voice, synthesize, train_espeak_variants  # noqa: E402


def make_utterance(index: int, text: str, seed: int, flite_share: float,
                   channel: bool = False) -> tuple[np.ndarray, str, str]:
    """(fbank (T, 80) float32, IPA, description) of training utterance ``index``."""
    rng = random.Random(seed * 1_000_003 + index)
    if rng.random() < flite_share:
        voice = random_flite_voice(rng, rng.choice(TRAIN_FLITE_VOICES))
    else:
        voice = random_espeak_voice(rng, train_espeak_variants())
    samples, ipa = synthesize(voice, text)
    samples, rate, tag = augment(samples, rng, channel=channel)
    return compute_fbank(samples, rate), ipa, f"{voice.describe()}|{tag}"


def make_shard(path: Path, first: int, texts: list[str], seed: int, flite_share: float,
               channel: bool = False) -> str:
    feats, lens, phones, descs = [], [], [], []
    for i, text in enumerate(texts):
        f, ipa, desc = make_utterance(first + i, text, seed, flite_share, channel)
        feats.append(f.astype(np.float16))
        lens.append(len(f))
        phones.append(ipa)
        descs.append(desc)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, feats=np.concatenate(feats), lens=np.array(lens, np.int32), texts=np.array(texts),
             phones=np.array(phones), desc=np.array(descs))
    os.replace(tmp, path)
    return f"{path.name}: {len(texts)} utts, {sum(lens) / 100 / 3600:.2f} h"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train_txt", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N sentences")
    ap.add_argument("--shard-size", type=int, default=500)
    ap.add_argument("--flite-share", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--channel", action="store_true",
                    help="add augment's capture paths (resamplers, clipping, A-law, GSM): the real-voice fine-tuning")
    args = ap.parse_args()

    texts = args.train_txt.read_text().split("\n")
    texts = [t for t in texts if t.strip()]
    if args.limit:
        texts = texts[: args.limit]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for k, first in enumerate(range(0, len(texts), args.shard_size)):
        path = args.out_dir / f"shard-{k:05d}.npz"
        if not path.exists():
            jobs.append((path, first, texts[first:first + args.shard_size], args.seed, args.flite_share, args.channel))
    if args.jobs <= 1:
        for job in jobs:
            print(make_shard(*job), flush=True)
        return
    with ProcessPoolExecutor(args.jobs) as pool:
        for msg in pool.map(make_shard, *zip(*jobs)) if jobs else []:
            print(msg, flush=True)


if __name__ == "__main__":
    main()

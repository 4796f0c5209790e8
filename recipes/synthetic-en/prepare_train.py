"""Synthesise, augment and featurise the training set into npz shards.

Each sentence of TRAIN_TXT is spoken once by a random training voice (``synth``:
espeak-ng with probability 1 - flite_share, else a training flite voice), augmented
(``augment.augment``) and turned into fbank with ``streamdec.audio.features.compute_fbank``
(exactly the inference features, including the 8 kHz -> 16 kHz resampling for
telephone-band utterances). Utterance i is fully determined by (seed, i).

Shard ``OUT_DIR/shard-XXXXX.npz`` (format: ``shards.py``) holds utterances [k*S, (k+1)*S).
Shards already present are skipped, so an interrupted run resumes.

Usage: python prepare_train.py TRAIN_TXT OUT_DIR [--jobs 2] [--limit N] [--shard-size 500] [--channel]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: streamdec
from streamdec.audio.features import compute_fbank  # noqa: E402

from augment import augment  # noqa: E402
from shards import run_jobs, write_shard  # noqa: E402
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
    feats, phones, descs = [], [], []
    for i, text in enumerate(texts):
        f, ipa, desc = make_utterance(first + i, text, seed, flite_share, channel)
        feats.append(f)
        phones.append(ipa)
        descs.append(desc)
    return write_shard(path, feats, texts, phones, descs)


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
    run_jobs(make_shard, jobs, args.jobs)


if __name__ == "__main__":
    main()

"""Training data: shards -> utterances -> length-bucketed batches with SpecAugment.

Shape legend: N batch, T frames, F = 80 bins, U target chars, P target phonemes.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: streamdec
from streamdec.audio.features import compute_fbank  # noqa: E402

from units import PhoneSet, text_to_ids  # noqa: E402

__all__ = ["Utterance", "Batch", "load_shards", "make_batches", "collate", "load_dev_set",
           "vtlp", "TAIL_PADDING_FRAMES"]

TAIL_PADDING_FRAMES = 66  # silence appended to dev audio, like streaming inference does


@dataclass
class Utterance:
    feats: np.ndarray  # (T, F) float16
    tokens: list[int]
    phones: list[int]
    text: str
    desc: str = ""


@dataclass
class Batch:
    feats: Tensor  # (N, T, F) float32
    feat_lens: Tensor  # (N,)
    tokens: Tensor  # (N, U) int64, 0-padded
    token_lens: Tensor  # (N,)
    phones: Tensor  # (N, P) int64, 0-padded
    phone_lens: Tensor  # (N,)


def read_shard(path: Path) -> list[tuple[np.ndarray, str, str, str]]:
    z = np.load(path)
    offsets = np.concatenate([[0], np.cumsum(z["lens"])])
    feats = z["feats"]
    return [(feats[offsets[i]:offsets[i + 1]], str(z["texts"][i]), str(z["phones"][i]), str(z["desc"][i]))
            for i in range(len(z["lens"]))]


def load_shards(paths: list[Path], phone_set: PhoneSet | None) -> tuple[list[Utterance], PhoneSet]:
    """All utterances of ``paths``; builds the phone set from them unless given."""
    raw = [row for p in paths for row in read_shard(p)]
    if phone_set is None:
        phone_set = PhoneSet.from_ipa(r[2] for r in raw)
    utts = [Utterance(f, text_to_ids(text), phone_set.encode(ipa), text, desc) for f, text, ipa, desc in raw]
    return utts, phone_set


def make_batches(utts: list[Utterance], max_frames: int, rng: random.Random,
                 curriculum: float = 0.0) -> list[list[int]]:
    """Indices grouped by similar length, each batch at most ``max_frames`` padded frames.
    Batches are shuffled; with ``curriculum`` = c > 0 the shortest fraction c of the
    batches comes first, short-to-long, and the rest follows shuffled."""
    order = sorted(range(len(utts)), key=lambda i: (len(utts[i].feats), rng.random()))
    batches, cur, longest = [], [], 0
    for i in order:
        n = len(utts[i].feats)
        if cur and max(longest, n) * (len(cur) + 1) > max_frames:
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    head = int(len(batches) * curriculum)
    rest = batches[head:]
    rng.shuffle(rest)
    return batches[:head] + rest


def _pad(seqs: list[list[int]]) -> tuple[Tensor, Tensor]:
    lens = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.zeros(len(seqs), max(1, int(lens.max())), dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out, lens


def spec_augment(feats: Tensor, lens: Tensor, rng: random.Random, fill: Tensor) -> Tensor:
    """2 frequency masks (<= 12 bins) and one time mask per 2 s (<= 25 frames), in place.
    ``fill`` (F,): the value a masked bin takes (the feature mean: 0 after normalisation)."""
    n, _, f = feats.shape
    for i in range(n):
        for _ in range(2):
            w = rng.randint(0, 12)
            s = rng.randint(0, f - w)
            feats[i, :, s:s + w] = fill[s:s + w]
        t = int(lens[i])
        for _ in range(t // 200):
            w = rng.randint(0, min(25, t // 10))
            s = rng.randint(0, t - w)
            feats[i, s:s + w] = fill
    return feats


def _mel(f: np.ndarray) -> np.ndarray:
    return 1127.0 * np.log1p(f / 700.0)


def vtlp(feats: np.ndarray, alpha: float, low: float = 20.0, high: float = 7600.0) -> np.ndarray:
    """Vocal tract length perturbation on log-mel frames (T, F): the spectrum is
    warped S'(f) = S(f / alpha) (alpha > 1 moves formants up, towards shorter vocal
    tracts), by interpolating between mel bins. ``low``/``high``: the fbank's mel range."""
    n = feats.shape[1]
    mel_lo, mel_hi = _mel(np.array(low)), _mel(np.array(high))
    step = (mel_hi - mel_lo) / (n + 1)
    centers = 700.0 * np.expm1((mel_lo + step * np.arange(1, n + 1)) / 1127.0)
    pos = np.clip((_mel(centers / alpha) - mel_lo) / step - 1, 0, n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = (pos - lo).astype(np.float32)
    return feats[:, lo] * (1 - w) + feats[:, hi] * w


def collate(utts: list[Utterance], rng: random.Random | None = None, fill: Tensor | None = None,
            vtlp_prob: float = 0.0) -> Batch:
    """Pad a batch. With ``rng`` (training): VTLP with probability ``vtlp_prob``
    (alpha ~ U(0.9, 1.25)), then SpecAugment."""
    lens = torch.tensor([len(u.feats) for u in utts], dtype=torch.long)
    feats = torch.zeros(len(utts), int(lens.max()), utts[0].feats.shape[1])
    for i, u in enumerate(utts):
        f = u.feats.astype(np.float32)
        if rng is not None and rng.random() < vtlp_prob:
            f = vtlp(f, rng.uniform(0.9, 1.25))
        feats[i, :len(u.feats)] = torch.from_numpy(f)
    if rng is not None:
        feats = spec_augment(feats, lens, rng, fill if fill is not None else torch.zeros(feats.shape[2]))
    tokens, token_lens = _pad([u.tokens for u in utts])
    phones, phone_lens = _pad([u.phones for u in utts])
    return Batch(feats, lens, tokens, token_lens, phones, phone_lens)


def load_dev_set(directory: Path, limit: int = 0) -> list[Utterance]:
    """Dev wavs of ``directory`` (see make_dev.py) as utterances, fbank computed the way a
    stream computes it (resampled to 16 kHz if needed, TAIL_PADDING_FRAMES of silence)."""
    rows = [line.split("\t", 1) for line in (directory / "refs.tsv").read_text().splitlines() if line]
    if limit:
        rows = rows[:limit]
    utts = []
    for utt, text in rows:
        samples, rate = sf.read(directory / f"{utt}.wav", dtype="float32")
        feats = compute_fbank(samples, rate, tail_padding_frames=TAIL_PADDING_FRAMES)
        utts.append(Utterance(feats.astype(np.float16), text_to_ids(text), [], text, utt))
    return utts

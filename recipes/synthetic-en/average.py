"""Average the model weights of several checkpoints (e.g. the snapshots of the last
minutes of training) into one checkpoint with the same layout as train.py's.

An input may also be an exported model.pt (it has no training-only heads: those come
from the training checkpoints). ``--weights`` makes it a weighted average: between a
model and its fine-tuned copy, an interpolation that trades what fine-tuning learned
against what it forgot (the real-English run against the shipped synthetic model).

Usage: python average.py OUT.pt CKPT.pt [CKPT.pt ...] [--weights W ...] [--dev data/dev]
With --dev, prints the greedy dev CER/WER of the average (PyTorch, whole-utterance).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from data import load_dev_set
from model import ModelConfig, Transducer
from train import DEV_SETS, evaluate, read_init


def average(paths: list[Path], weights: list[float] | None = None) -> dict:
    """Weights default to equal; they are normalised to sum to 1. The output's config,
    phone set and heads are those of the last training checkpoint among ``paths``."""
    weights = weights or [1.0] * len(paths)
    if len(weights) != len(paths) or min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(f"--weights: {len(paths)} non-negative numbers with a positive sum, got {weights}")
    weights = [w / sum(weights) for w in weights]
    loaded = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
    trained = [c for c in loaded if isinstance(c, dict)]
    if not trained:
        raise ValueError("at least one input must be a training checkpoint (train.py's exp/*.pt)")
    states = [c["model"] if isinstance(c, dict) else read_init(p)[0] for c, p in zip(loaded, paths)]
    out = dict(trained[-1])
    avg = {}
    for k, v in trained[-1]["model"].items():
        have = [(w, s[k]) for w, s in zip(weights, states) if k in s]
        if v.is_floating_point() and len(have) == len(states):
            if any(t.shape != v.shape for _, t in have):
                raise ValueError(f"{k}: the checkpoints' shapes differ")
            avg[k] = sum(w * t for w, t in have)
        else:  # integer buffers; heads only the training checkpoints have
            avg[k] = v
    out["model"] = avg
    out.pop("opt", None)
    out["averaged"] = [f"{p} x {w:.3f}" for p, w in zip(paths, weights)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("checkpoints", type=Path, nargs="+")
    ap.add_argument("--weights", type=float, nargs="+", help="one per checkpoint (default: equal)")
    ap.add_argument("--dev", type=Path)
    args = ap.parse_args()
    try:
        ckpt = average(args.checkpoints, args.weights)
    except ValueError as e:
        ap.error(str(e))
    torch.save(ckpt, args.out)
    if args.dev:
        model = Transducer(ModelConfig(**ckpt["config"]))
        model.load_state_dict(ckpt["model"])
        dev = {n: load_dev_set(args.dev / n) for n in DEV_SETS if (args.dev / n).exists()}
        for name, r in evaluate(model, dev).items():
            print(f"{name}: CER {100 * r['cer']:.1f}% WER {100 * r['wer']:.1f}%", flush=True)


if __name__ == "__main__":
    main()

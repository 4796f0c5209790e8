"""Average the model weights of several checkpoints (e.g. the snapshots of the last
minutes of training) into one checkpoint with the same layout as train.py's.

Usage: python average.py OUT.pt CKPT.pt [CKPT.pt ...] [--dev data/dev]
With --dev, prints the greedy dev CER/WER of the average (PyTorch, whole-utterance).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from data import load_dev_set
from model import ModelConfig, Transducer
from train import DEV_SETS, evaluate


def average(paths: list[Path]) -> dict:
    ckpts = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
    out = dict(ckpts[-1])
    avg = {}
    for k, v in ckpts[-1]["model"].items():
        if v.is_floating_point():
            avg[k] = sum(c["model"][k] for c in ckpts) / len(ckpts)
        else:
            avg[k] = v
    out["model"] = avg
    out.pop("opt", None)
    out["averaged"] = [str(p) for p in paths]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("checkpoints", type=Path, nargs="+")
    ap.add_argument("--dev", type=Path)
    args = ap.parse_args()
    ckpt = average(args.checkpoints)
    torch.save(ckpt, args.out)
    if args.dev:
        model = Transducer(ModelConfig(**ckpt["config"]))
        model.load_state_dict(ckpt["model"])
        dev = {n: load_dev_set(args.dev / n) for n in DEV_SETS if (args.dev / n).exists()}
        for name, r in evaluate(model, dev).items():
            print(f"{name}: CER {100 * r['cer']:.1f}% WER {100 * r['wer']:.1f}%")


if __name__ == "__main__":
    main()

"""Widen a model's LSTMs from H to H' > H cells without changing what it computes.

Each layer's LSTM(D -> H) becomes LSTM(D -> H') followed by a projection H' -> D:
- the first H cells keep their weights, and their gates see the old inputs only (the
  weights from the new cells' outputs are zero), so they run exactly as before;
- the new cells get small random input and recurrent weights (``--init-std``) and zero
  biases, so their outputs are not zero and the projection's columns for them learn;
- the projection is [the old projection, or the identity | zeros].
So the widened model's output equals the original's (tested) and training grows it from
there: a larger encoder that starts where the trained one stands, not from scratch.

Writes a checkpoint train.py takes as ``--init`` (the training-only heads, where the
input has them, are kept).

Usage: python widen.py IN (checkpoint or model.pt) OUT.pt --hidden 512 [--init-std 0.02]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor

from model import ModelConfig
from units import TOKENS

GATES = 4  # PyTorch's LSTM weight rows: input, forget, cell, output gates, H rows each


def _grow_rows(w: Tensor, old: int, new: int, std: float, gen: torch.Generator) -> Tensor:
    """(4*old, ...) gate rows -> (4*new, ...): each gate's old rows first, then new random
    rows (zero for a bias)."""
    rest = w.shape[1:]
    out = torch.randn((GATES, new) + rest, generator=gen) * std if w.dim() > 1 else \
        torch.zeros(GATES, new)
    out[:, :old] = w.reshape((GATES, old) + rest)
    return out.reshape((GATES * new,) + rest)


def widen_weights(weights: dict[str, Tensor], cfg: ModelConfig, hidden: int, std: float = 0.02,
                  seed: int = 0) -> dict[str, Tensor]:
    """``weights`` of a model of ``cfg`` -> the same function with ``hidden`` LSTM cells."""
    old = cfg.hidden
    if hidden <= old:
        raise ValueError(f"--hidden {hidden}: the model has {old} cells already")
    gen = torch.Generator().manual_seed(seed)
    out = dict(weights)
    for i in range(cfg.num_layers):
        p = f"encoder.layers.{i}."
        ih = weights[p + "lstm.weight_ih_l0"]
        out[p + "lstm.weight_ih_l0"] = _grow_rows(ih, old, hidden, std, gen)
        hh = _grow_rows(weights[p + "lstm.weight_hh_l0"], old, hidden, std, gen)  # (4H', H)
        grown = torch.randn(GATES * hidden, hidden, generator=gen) * std
        grown[:, :old] = hh
        grown.view(GATES, hidden, hidden)[:, :old, old:] = 0.0  # old cells do not see new ones
        out[p + "lstm.weight_hh_l0"] = grown
        for b in ("bias_ih_l0", "bias_hh_l0"):
            out[p + "lstm." + b] = _grow_rows(weights[p + "lstm." + b], old, hidden, std, gen)
        proj = torch.zeros(cfg.d_model, hidden)
        proj[:, :old] = weights.get(p + "proj.weight", torch.eye(cfg.d_model))
        out[p + "proj.weight"] = proj
        out[p + "proj.bias"] = weights.get(p + "proj.bias", torch.zeros(cfg.d_model))
    return out


def main() -> None:
    from train import read_init  # training's reader of checkpoints and model.pt files

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--hidden", type=int, required=True, help="LSTM cells per layer after widening")
    ap.add_argument("--init-std", type=float, default=0.02, help="std of the new cells' weights")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    weights, arch, phones = read_init(args.src)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cfg = ModelConfig(**{"vocab_size": len(TOKENS), **arch})
    new = replace(cfg, rnn_hidden_size=args.hidden)
    torch.save({"model": widen_weights(weights, cfg, args.hidden, args.init_std, args.seed),
                "config": new.to_dict(), "phones": phones}, args.out)
    print(f"{args.src}: {cfg.hidden} -> {args.hidden} LSTM cells per layer -> {args.out}")


if __name__ == "__main__":
    main()

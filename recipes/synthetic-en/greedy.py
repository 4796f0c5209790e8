"""Greedy transducer search (at most one symbol per encoder frame, like sherpa-onnx's
greedy search), batched over utterances. Used for training-time dev scoring.

Shape legend: N batch, T' encoder frames, J joiner dim, V vocab.
"""

from __future__ import annotations

import torch
from torch import Tensor

from model import Transducer

__all__ = ["greedy_search"]


@torch.no_grad()
def greedy_search(model: Transducer, enc: Tensor, enc_lens: Tensor) -> list[list[int]]:
    """enc (N, T', D) encoder output (before encoder_proj), enc_lens (N,) -> token ids per utterance."""
    n = enc.size(0)
    ctx = torch.tensor([[-1, 0]] * n, dtype=torch.long)  # context_size 2: [-1, blank]
    enc_p = model.joiner.encoder_proj(enc)
    dec_p = model.joiner.decoder_proj(model.decoder(ctx, pad=False)[:, -1])
    hyps: list[list[int]] = [[] for _ in range(n)]
    for t in range(enc.size(1)):
        logits = model.joiner(enc_p[:, t], dec_p)  # (N, V)
        best = logits.argmax(-1)
        emit = (best != 0) & (t < enc_lens)
        if emit.any():
            idx = emit.nonzero().squeeze(1)
            for i in idx.tolist():
                hyps[i].append(int(best[i]))
            ctx[idx] = torch.stack([ctx[idx, 1], best[idx]], dim=1)
            dec_p[idx] = model.joiner.decoder_proj(model.decoder(ctx[idx], pad=False)[:, -1])
    return hyps

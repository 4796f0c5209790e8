"""Pruned transducer losses: the joiner evaluated on a band of S target positions per frame
instead of all U+1 (the idea of Kuang et al., "Pruned RNN-T for fast, memory-efficient ASR
training", 2022; written here from the paper's description).

The full joiner lattice costs N x T x (U+1) x J activations: for a 15 s LibriSpeech
utterance of ~250 characters that is 375 x 251 x 256 numbers, forward and backward, and it
is what made training on real read speech slow. Instead:

1. a *simple* joiner, am[t] + lm[u] (two training-only linear heads to the vocabulary on
   the encoder and decoder outputs), gives a cheap lattice (``simple_lattice``) and its
   own transducer loss, trained beside the real one;
2. the simple lattice's cell occupancies (the gradient of its loss with respect to each
   cell's log-probabilities) choose, per frame, the start s_t of the band [s_t, s_t + S)
   holding the most probability (``prune_starts``), kept monotonic, with s_{t+1} - s_t <
   S (consecutive bands overlap, so a path can always cross), s_0 = 0 and the last frame's
   band holding U (so the lattice's first and last cells are in it);
3. the real joiner is evaluated on the bands only (``band_logits``), and its log-probs are
   put into a dense lattice whose other cells are impossible (``band_lattice``), on which
   the usual recursions (``rnnt_loss``) run: the recursion is N x T x (U+1) numbers, cheap.

With S >= U+1 the band is the whole lattice and the loss equals the full loss; with a
smaller S it can only be larger (paths are removed), tested in tests/test_rnnt_loss.py.
The bands follow the standard topology's occupancy; the one-symbol-per-frame (modified)
topology's paths lag behind it, so S must leave them room: on six 16-17 s LibriSpeech
utterances of a partly trained model, S = 5 gave the standard loss within 5-20 % of the
full one but the modified loss 44-296 nats per token on three of them (their paths left
the band), and S = 10 both within 4 % (S = 20: equal to 3 decimals). The recipe uses 10.

Shape legend: N batch, T encoder frames, U target length, S band width, V vocab, J joiner dim.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from rnnt_loss import IMPOSSIBLE

__all__ = ["simple_lattice", "prune_starts", "band_logits", "band_lattice"]


def simple_lattice(am: Tensor, lm: Tensor, targets: Tensor, blank: int = 0) -> tuple[Tensor, Tensor]:
    """Log-probs of the joiner am[t] + lm[u], normalised over the vocabulary per cell.

    am (N, T, V), lm (N, U+1, V), targets (N, U) -> lp_blank (N, T, U+1), lp_emit (N, T, U),
    float64. The normaliser log sum_v exp(am[t, v] + lm[u, v]) is one batched matrix
    product of the exponentials (each shifted by its maximum), not an (N, T, U+1, V) tensor."""
    n, t_max, _ = am.shape
    u = targets.shape[1]
    am_max = am.detach().max(-1, keepdim=True).values  # (N, T, 1)
    lm_max = lm.detach().max(-1, keepdim=True).values  # (N, U+1, 1)
    norm = torch.log(torch.matmul(torch.exp(am - am_max), torch.exp(lm - lm_max).transpose(1, 2)).clamp(min=1e-30))
    norm = norm + am_max + lm_max.transpose(1, 2)  # (N, T, U+1)
    lp_blank = am[..., blank].unsqueeze(2) + lm[..., blank].unsqueeze(1) - norm
    am_y = am.gather(2, targets.unsqueeze(1).expand(n, t_max, u))  # am[t, y_{u+1}]
    lm_y = lm[:, :-1].gather(2, targets.unsqueeze(-1)).squeeze(-1)  # lm[u, y_{u+1}] (N, U)
    lp_emit = am_y + lm_y.unsqueeze(1) - norm[:, :, :-1]
    return lp_blank.double(), lp_emit.double()


LatticeLoss = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def prune_starts(lp_blank: Tensor, lp_emit: Tensor, logit_lengths: Tensor, target_lengths: Tensor,
                 width: int, loss: LatticeLoss) -> Tensor:
    """Band starts (N, T) int64 from the occupancies of a (simple) lattice under ``loss``
    (``rnnt_from_lattice`` or ``modified_from_lattice``); ``width`` = S, at most U+1."""
    b = lp_blank.detach().requires_grad_(True)
    e = lp_emit.detach().requires_grad_(True)
    with torch.enable_grad():
        gb, ge = torch.autograd.grad(loss(b, e, logit_lengths, target_lengths).sum(), [b, e])
    occ = -(gb + F.pad(ge, (0, 1)))  # (N, T, U+1): probability of leaving cell (t, u)
    n, t_max, u1 = occ.shape
    c = F.pad(occ.cumsum(2), (1, 0))  # (N, T, U+2)
    window = c[:, :, width:] - c[:, :, :u1 + 1 - width]  # (N, T, U+2-S): mass of [s, s+S)
    s = window.argmax(2)
    cap = (target_lengths + 1 - width).clamp(min=0).unsqueeze(1)  # a band never passes U
    s = torch.minimum(s, cap)
    s[:, 0] = 0
    for t in range(1, t_max):  # monotonic, and consecutive bands overlap
        s[:, t] = torch.minimum(torch.maximum(s[:, t], s[:, t - 1]), s[:, t - 1] + width - 1)
    last = (logit_lengths - 1).unsqueeze(1)
    frames = torch.arange(t_max, device=s.device).unsqueeze(0)
    s = torch.where(frames == last, torch.maximum(s, cap), s)  # the last frame's band holds U
    for t in range(t_max - 2, -1, -1):  # ... and the frames before it can reach that band
        need = torch.maximum(s[:, t], s[:, t + 1] - (width - 1))
        s[:, t] = torch.where(frames[:, t] < last[:, 0], need, s[:, t])
    return s


def band_logits(enc_proj: Tensor, dec_proj: Tensor, starts: Tensor, width: int,
                joiner: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    """The joiner on the bands: enc_proj (N, T, J), dec_proj (N, U+1, J), starts (N, T)
    -> logits (N, T, S, V)."""
    n, t_max, j = enc_proj.shape
    idx = starts.unsqueeze(2) + torch.arange(width, device=starts.device)  # (N, T, S)
    d = dec_proj.gather(1, idx.reshape(n, -1, 1).expand(-1, -1, j)).reshape(n, t_max, width, j)
    return joiner(enc_proj.unsqueeze(2), d)


def band_lattice(logits: Tensor, targets: Tensor, starts: Tensor, blank: int = 0) -> tuple[Tensor, Tensor]:
    """A dense lattice (lp_blank (N, T, U+1), lp_emit (N, T, U), float64) holding the
    bands' log-probs, every other cell ``IMPOSSIBLE``: the input of the usual recursions."""
    n, t_max, width, _ = logits.shape
    u = targets.shape[1]
    idx = starts.unsqueeze(2) + torch.arange(width, device=starts.device)  # (N, T, S)
    lsm = F.log_softmax(logits.float(), dim=-1)
    y = F.pad(targets, (0, 1)).gather(1, idx.reshape(n, -1)).reshape(n, t_max, width)  # y_{u+1}
    lp_b = lsm[..., blank].double()
    lp_e = lsm.gather(3, y.unsqueeze(-1)).squeeze(-1).double()
    full = lp_b.new_full((n, t_max, u + 1), IMPOSSIBLE)
    return full.scatter(2, idx, lp_b), full.scatter(2, idx, lp_e)[:, :, :u]

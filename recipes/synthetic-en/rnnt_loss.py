"""RNN-T (transducer) losses in pure PyTorch: log-prob lattice + forward algorithm.

``rnnt_loss``: the standard transducer (any number of symbols per frame).
``modified_rnnt_loss``: at most one symbol per frame (each emission also moves to the
next frame), the topology that one-symbol-per-frame greedy search (sherpa-onnx,
streamdec's default) decodes.

Shape legend: N batch, T encoder frames, U target length, V vocab.

alpha[t, u] is the log-probability of having emitted the first u targets by the
time frame t is reached. With b[t, u] = log P(blank | t, u) and
e[t, u] = log P(y_{u+1} | t, u):

    alpha[0, u] = sum_{j<u} e[0, j]
    alpha[t, u] = logsumexp_{k<=u} ( alpha[t-1, k] + b[t-1, k] + sum_{k<=j<u} e[t, j] )

i.e. one vectorised step per frame: with C[u] = sum_{j<u} e[t, j] (a cumsum),
alpha[t] = C + logcumsumexp(alpha[t-1] + b[t-1] - C). The loss is
-(alpha[T-1, U] + b[T-1, U]). Gradients come from autograd. The recursion runs
in float64 (it is only N x (U+1) per step) to keep the cumsum differences exact.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["rnnt_loss", "modified_rnnt_loss"]

_IMPOSSIBLE = -1.0e4  # log-probability of unreachable lattice cells (finite: no NaN gradients)


def rnnt_loss(logits: Tensor, targets: Tensor, logit_lengths: Tensor, target_lengths: Tensor,
              blank: int = 0) -> Tensor:
    """Per-utterance negative log-likelihood.

    logits (N, T, U+1, V) raw joiner outputs; targets (N, U) int64 (padding: any valid id);
    logit_lengths (N,), target_lengths (N,) int64. Returns (N,) in the dtype of logits."""
    n, t_max, u1, _ = logits.shape
    lse = torch.logsumexp(logits, dim=-1)  # (N, T, U+1)
    lp_blank = (logits[..., blank] - lse).double()  # (N, T, U+1)
    idx = targets.unsqueeze(1).expand(n, t_max, u1 - 1).unsqueeze(-1)
    lp_emit = (logits[:, :, :-1, :].gather(-1, idx).squeeze(-1) - lse[:, :, :-1]).double()  # (N, T, U)

    zero = lp_emit.new_zeros(n, t_max, 1)
    cum = torch.cat([zero, lp_emit], dim=2).cumsum(dim=2)  # C[t, u] = sum_{j<u} e[t, j]
    alpha = cum[:, 0]  # (N, U+1)
    alphas = [alpha]
    for t in range(1, t_max):
        a = alpha + lp_blank[:, t - 1]
        alpha = cum[:, t] + torch.logcumsumexp(a - cum[:, t], dim=1)
        alphas.append(alpha)
    alphas = torch.stack(alphas, dim=1)  # (N, T, U+1)
    rows = torch.arange(n, device=logits.device)
    last_t = logit_lengths - 1
    final = alphas[rows, last_t, target_lengths] + lp_blank[rows, last_t, target_lengths]
    return (-final).to(logits.dtype)


def _lattice(logits: Tensor, targets: Tensor, blank: int) -> tuple[Tensor, Tensor]:
    """(lp_blank (N, T, U+1), lp_emit (N, T, U)) in float64."""
    n, t_max, u1, _ = logits.shape
    lse = torch.logsumexp(logits, dim=-1)
    lp_blank = (logits[..., blank] - lse).double()
    idx = targets.unsqueeze(1).expand(n, t_max, u1 - 1).unsqueeze(-1)
    lp_emit = (logits[:, :, :-1, :].gather(-1, idx).squeeze(-1) - lse[:, :, :-1]).double()
    return lp_blank, lp_emit


def modified_rnnt_loss(logits: Tensor, targets: Tensor, logit_lengths: Tensor, target_lengths: Tensor,
                       blank: int = 0) -> Tensor:
    """Per-utterance negative log-likelihood with at most one symbol per frame.

    alpha[0, 0] = 0; alpha[t+1, u] = logaddexp(alpha[t, u] + b[t, u], alpha[t, u-1] + e[t, u-1]);
    loss = -alpha[T, U]. Utterances with U > T have no alignment: their loss is 0 and
    they get no gradient (filter them, or count them with ``target_lengths > logit_lengths``).
    Same arguments and result as ``rnnt_loss``."""
    n, t_max, u1, _ = logits.shape
    lp_blank, lp_emit = _lattice(logits, targets, blank)
    alpha = lp_blank.new_full((n, u1), _IMPOSSIBLE)
    alpha[:, 0] = 0.0
    pad = lp_blank.new_full((n, 1), _IMPOSSIBLE)
    alphas = [alpha]
    for t in range(t_max):
        stay = alpha + lp_blank[:, t]
        move = torch.cat([pad, alpha[:, :-1] + lp_emit[:, t]], dim=1)
        alpha = torch.logaddexp(stay, move)
        alphas.append(alpha)
    alphas = torch.stack(alphas, dim=1)  # (N, T+1, U+1)
    rows = torch.arange(n, device=logits.device)
    final = alphas[rows, logit_lengths, target_lengths]
    feasible = target_lengths <= logit_lengths
    return torch.where(feasible, -final, torch.zeros_like(final)).to(logits.dtype)

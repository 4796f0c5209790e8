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

__all__ = ["rnnt_loss", "modified_rnnt_loss", "rnnt_from_lattice", "modified_from_lattice", "lattice",
           "IMPOSSIBLE"]

IMPOSSIBLE = -1.0e4  # log-probability of unreachable lattice cells (finite: no NaN gradients)


def rnnt_loss(logits: Tensor, targets: Tensor, logit_lengths: Tensor, target_lengths: Tensor,
              blank: int = 0) -> Tensor:
    """Per-utterance negative log-likelihood.

    logits (N, T, U+1, V) raw joiner outputs; targets (N, U) int64 (padding: any valid id);
    logit_lengths (N,), target_lengths (N,) int64. Returns (N,) in the dtype of logits."""
    lp_blank, lp_emit = lattice(logits, targets, blank)
    return rnnt_from_lattice(lp_blank, lp_emit, logit_lengths, target_lengths).to(logits.dtype)


def rnnt_from_lattice(lp_blank: Tensor, lp_emit: Tensor, logit_lengths: Tensor, target_lengths: Tensor) -> Tensor:
    """``rnnt_loss`` from the lattice's log-probabilities: lp_blank (N, T, U+1), lp_emit
    (N, T, U) (float64; a cell off every allowed path may hold ``IMPOSSIBLE``). Returns (N,).

    Forward-backward: the gradient is computed with the loss, from alpha and beta (one
    loop over the frames each, no autograd graph of the loop)."""
    return _Standard.apply(lp_blank, lp_emit, logit_lengths, target_lengths)


def _terminal(like: Tensor, target_lengths: Tensor) -> Tensor:
    """(N, U+1): 0 at each utterance's last target position, impossible elsewhere."""
    out = like.new_full(like.shape, IMPOSSIBLE)
    out[torch.arange(like.shape[0], device=like.device), target_lengths] = 0.0
    return out


class _Standard(torch.autograd.Function):
    """alpha[t, u] = logaddexp(alpha[t-1, u] + b[t-1, u], alpha[t, u-1] + e[t, u-1]): with
    C[t, u] = sum_{j<u} e[t, j], alpha[t] = C[t] + logcumsumexp(alpha[t-1] + b[t-1] - C[t]);
    beta[t, u] (from cell (t, u) to the end, its own transitions included) =
    -C[t, u] + log sum_{k>=u} exp(C[t, k] + b[t, k] + beta[t+1, k]), where beta at an
    utterance's last frame's next row is 0 at U and impossible elsewhere. -log Z = -beta[0, 0]."""

    @staticmethod
    def forward(ctx, lp_blank, lp_emit, logit_lengths, target_lengths):
        n, t_max, u1 = lp_blank.shape
        cum = torch.cat([lp_emit.new_zeros(n, t_max, 1), lp_emit], dim=2).cumsum(dim=2)
        alpha = torch.empty_like(lp_blank)
        a = cum[:, 0]
        alpha[:, 0] = a
        for t in range(1, t_max):
            a = cum[:, t] + torch.logcumsumexp(a + lp_blank[:, t - 1] - cum[:, t], dim=1)
            alpha[:, t] = a
        terminal = _terminal(lp_blank[:, 0], target_lengths)
        last = (logit_lengths - 1).unsqueeze(1)
        beta = lp_blank.new_full((n, t_max + 1, u1), IMPOSSIBLE)
        after = lp_blank.new_full((n, t_max, u1), IMPOSSIBLE)  # beta of the next row, per frame
        for t in range(t_max - 1, -1, -1):
            nxt = torch.where(last == t, terminal, beta[:, t + 1])
            x = cum[:, t] + lp_blank[:, t] + nxt
            b = torch.logcumsumexp(x.flip(1), dim=1).flip(1) - cum[:, t]
            beta[:, t] = torch.where(last >= t, b, beta.new_full((), IMPOSSIBLE))
            after[:, t] = nxt
        log_z = beta[:, 0, 0]
        live = (torch.arange(t_max, device=lp_blank.device).unsqueeze(0) <= last).unsqueeze(2)  # (N, T, 1)
        z = log_z[:, None, None]
        g_blank = torch.where(live, -torch.exp(alpha + lp_blank + after - z), lp_blank.new_zeros(()))
        g_emit = torch.where(live, -torch.exp(alpha[:, :, :-1] + lp_emit + beta[:, :t_max, 1:] - z),
                             lp_emit.new_zeros(()))
        ctx.save_for_backward(g_blank, g_emit)
        return -log_z

    @staticmethod
    def backward(ctx, grad):
        g_blank, g_emit = ctx.saved_tensors
        return grad[:, None, None] * g_blank, grad[:, None, None] * g_emit, None, None


def lattice(logits: Tensor, targets: Tensor, blank: int = 0) -> tuple[Tensor, Tensor]:
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
    lp_blank, lp_emit = lattice(logits, targets, blank)
    return modified_from_lattice(lp_blank, lp_emit, logit_lengths, target_lengths).to(logits.dtype)


def modified_from_lattice(lp_blank: Tensor, lp_emit: Tensor, logit_lengths: Tensor,
                          target_lengths: Tensor) -> Tensor:
    """``modified_rnnt_loss`` from the lattice's log-probabilities (as ``rnnt_from_lattice``;
    forward-backward too)."""
    return _Modified.apply(lp_blank, lp_emit, logit_lengths, target_lengths)


class _Modified(torch.autograd.Function):
    """alpha[t+1, u] = logaddexp(alpha[t, u] + b[t, u], alpha[t, u-1] + e[t, u-1]), alpha[0, 0] = 0;
    beta[t, u] = logaddexp(b[t, u] + beta[t+1, u], e[t, u] + beta[t+1, u+1]), beta[T, U] = 0."""

    @staticmethod
    def forward(ctx, lp_blank, lp_emit, logit_lengths, target_lengths):
        n, t_max, u1 = lp_blank.shape
        imp = lp_blank.new_full((n, 1), IMPOSSIBLE)
        alpha = lp_blank.new_full((n, t_max + 1, u1), IMPOSSIBLE)
        alpha[:, 0, 0] = 0.0
        for t in range(t_max):
            alpha[:, t + 1] = torch.logaddexp(alpha[:, t] + lp_blank[:, t],
                                              torch.cat([imp, alpha[:, t, :-1] + lp_emit[:, t]], dim=1))
        terminal = _terminal(lp_blank[:, 0], target_lengths)
        ends = logit_lengths.unsqueeze(1)
        beta = lp_blank.new_full((n, t_max + 1, u1), IMPOSSIBLE)
        beta[:, t_max] = torch.where(ends == t_max, terminal, beta[:, t_max])
        for t in range(t_max - 1, -1, -1):
            rec = torch.logaddexp(lp_blank[:, t] + beta[:, t + 1],
                                  torch.cat([lp_emit[:, t] + beta[:, t + 1, 1:], imp], dim=1))
            beta[:, t] = torch.where(ends == t, terminal, torch.where(ends > t, rec, beta[:, t]))
        log_z = beta[:, 0, 0]
        feasible = (target_lengths <= logit_lengths)
        live = ((torch.arange(t_max, device=lp_blank.device).unsqueeze(0) < ends)
                & feasible.unsqueeze(1)).unsqueeze(2)
        z = log_z[:, None, None]
        g_blank = torch.where(live, -torch.exp(alpha[:, :t_max] + lp_blank + beta[:, 1:] - z), lp_blank.new_zeros(()))
        g_emit = torch.where(live, -torch.exp(alpha[:, :t_max, :-1] + lp_emit + beta[:, 1:, 1:] - z),
                             lp_emit.new_zeros(()))
        ctx.save_for_backward(g_blank, g_emit)
        return torch.where(feasible, -log_z, torch.zeros_like(log_z))

    @staticmethod
    def backward(ctx, grad):
        g_blank, g_emit = ctx.saved_tensors
        return grad[:, None, None] * g_blank, grad[:, None, None] * g_emit, None, None

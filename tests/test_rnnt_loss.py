"""The pure-PyTorch RNN-T loss equals a brute-force sum over all alignments."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "synthetic-en"))
from rnnt_loss import modified_rnnt_loss, rnnt_loss  # noqa: E402


def brute_force(logits: torch.Tensor, target: list[int], blank: int = 0) -> float:
    """-log sum over every alignment path of T blanks and U labels ending with a blank
    at frame T-1. logits (T, U+1, V)."""
    lp = logits.double().log_softmax(-1)
    t_len, u_len = lp.shape[0], len(target)
    total = -math.inf
    # An alignment = for each frame, how many labels are emitted there before its blank.
    for counts in itertools.product(range(u_len + 1), repeat=t_len):
        if sum(counts) != u_len:
            continue
        score, u = 0.0, 0
        for t, c in enumerate(counts):
            for _ in range(c):
                score += lp[t, u, target[u]].item()
                u += 1
            score += lp[t, u, blank].item()
        total = max(total, score) + math.log1p(math.exp(-abs(total - score))) if total > -math.inf else score
    return -total


def test_matches_brute_force_with_padding():
    torch.manual_seed(0)
    vocab = 5
    cases = [(4, [1, 3]), (3, [2, 2, 4]), (5, [4]), (2, [])]
    t_max, u_max = 5, 3
    logits = torch.randn(len(cases), t_max, u_max + 1, vocab, requires_grad=True)
    targets = torch.zeros(len(cases), u_max, dtype=torch.long)
    for i, (_, y) in enumerate(cases):
        targets[i, :len(y)] = torch.tensor(y, dtype=torch.long)
    t_lens = torch.tensor([t for t, _ in cases])
    u_lens = torch.tensor([len(y) for _, y in cases])
    loss = rnnt_loss(logits, targets, t_lens, u_lens)
    for i, (t, y) in enumerate(cases):
        expected = brute_force(logits[i, :t, :len(y) + 1].detach(), y)
        assert abs(loss[i].item() - expected) < 1e-4, (i, loss[i].item(), expected)
    loss.sum().backward()
    assert torch.isfinite(logits.grad).all()
    # padded frames and padded label rows get no gradient
    assert logits.grad[0, 4:].abs().max() == 0 and logits.grad[3, 2:].abs().max() == 0
    assert logits.grad[0, :, 3:].abs().max() == 0 and logits.grad[2, :, 2:].abs().max() == 0


def test_gradient_matches_finite_difference():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 3, 4, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 2], [3, 0]])
    lens_t, lens_u = torch.tensor([3, 2]), torch.tensor([2, 1])
    assert torch.autograd.gradcheck(lambda x: rnnt_loss(x, targets, lens_t, lens_u), (logits,),
                                    eps=1e-6, atol=1e-5)


def brute_force_modified(logits: torch.Tensor, target: list[int], blank: int = 0) -> float:
    """-log sum over alignments emitting at most one label per frame (each frame: blank
    or the next label), exactly len(target) labels over T frames. logits (T, U+1, V)."""
    lp = logits.double().log_softmax(-1)
    t_len, u_len = lp.shape[0], len(target)
    scores = []
    for emits in itertools.product([False, True], repeat=t_len):
        if sum(emits) != u_len:
            continue
        score, u = 0.0, 0
        for t, e in enumerate(emits):
            if e:
                score += lp[t, u, target[u]].item()
                u += 1
            else:
                score += lp[t, u, blank].item()
        scores.append(score)
    return -torch.logsumexp(torch.tensor(scores, dtype=torch.float64), 0).item()


def test_modified_matches_brute_force():
    torch.manual_seed(2)
    cases = [(4, [1, 3]), (3, [2, 2, 4]), (5, [4]), (2, []), (2, [1, 2, 3])]  # last: U > T, infeasible
    t_max, u_max = 5, 3
    logits = torch.randn(len(cases), t_max, u_max + 1, 5, requires_grad=True)
    targets = torch.zeros(len(cases), u_max, dtype=torch.long)
    for i, (_, y) in enumerate(cases):
        targets[i, :len(y)] = torch.tensor(y, dtype=torch.long)
    loss = modified_rnnt_loss(logits, targets, torch.tensor([t for t, _ in cases]),
                              torch.tensor([len(y) for _, y in cases]))
    for i, (t, y) in enumerate(cases[:-1]):
        expected = brute_force_modified(logits[i, :t, :len(y) + 1].detach(), y)
        assert abs(loss[i].item() - expected) < 1e-4, (i, loss[i].item(), expected)
    assert loss[-1].item() == 0.0
    loss.sum().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[-1].abs().max() == 0
    assert logits.grad[0, 4:].abs().max() == 0

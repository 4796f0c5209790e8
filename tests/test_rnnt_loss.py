"""The pure-PyTorch RNN-T loss equals a brute-force sum over all alignments."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "synthetic-en"))
from rnnt_loss import lattice, modified_rnnt_loss, rnnt_loss  # noqa: E402


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


def test_modified_gradient_matches_finite_difference():
    """Both losses compute their gradient by forward-backward, not autograd: checked here
    with utterances shorter than the batch, and one with more targets than frames (loss 0)."""
    torch.manual_seed(2)
    logits = torch.randn(3, 5, 4, 5, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 2, 3], [4, 1, 0], [2, 2, 2]])
    lens_t, lens_u = torch.tensor([5, 3, 2]), torch.tensor([3, 2, 3])
    assert modified_rnnt_loss(logits, targets, lens_t, lens_u)[2].item() == 0.0
    assert torch.autograd.gradcheck(lambda x: modified_rnnt_loss(x, targets, lens_t, lens_u), (logits,),
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


# -- the pruned loss (recipes/synthetic-en/pruned_rnnt.py) ---------------------------------

from pruned_rnnt import band_lattice, band_logits, prune_starts, simple_lattice  # noqa: E402
from rnnt_loss import modified_from_lattice, rnnt_from_lattice  # noqa: E402

PRUNE_CASES = [(9, [3, 1, 4, 1, 5]), (7, [2, 6]), (6, [5, 3, 5, 3, 5, 3]), (8, [1])]  # (T, target)


def _pruning_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n, t_max, u_max, v, j = len(PRUNE_CASES), 9, 6, 7, 5
    targets = torch.zeros(n, u_max, dtype=torch.long)
    for i, (_, y) in enumerate(PRUNE_CASES):
        targets[i, :len(y)] = torch.tensor(y)
    t_lens = torch.tensor([t for t, _ in PRUNE_CASES])
    u_lens = torch.tensor([len(y) for _, y in PRUNE_CASES])
    enc = torch.randn(n, t_max, j, generator=g, dtype=torch.float64) * 2
    dec = torch.randn(n, u_max + 1, j, generator=g, dtype=torch.float64) * 2
    out = torch.nn.Linear(j, v).double()
    torch.nn.init.normal_(out.weight, std=1.5, generator=g)

    def joiner(e, d):
        return out(torch.tanh(e + d))
    return enc, dec, joiner, targets, t_lens, u_lens


def test_simple_lattice_is_the_normalised_sum_of_the_two_heads():
    g = torch.Generator().manual_seed(3)
    am, lm = torch.randn(2, 5, 7, generator=g), torch.randn(2, 4, 7, generator=g)
    targets = torch.tensor([[1, 2, 3], [6, 0, 0]])
    lp_blank, lp_emit = simple_lattice(am, lm, targets)
    full = (am.unsqueeze(2) + lm.unsqueeze(1)).double().log_softmax(-1)  # (N, T, U+1, V)
    assert torch.allclose(lp_blank, full[..., 0], atol=1e-5)
    emit = full[:, :, :-1].gather(3, targets[:, None, :, None].expand(2, 5, 3, 1)).squeeze(-1)
    assert torch.allclose(lp_emit, emit, atol=1e-5)


def test_bands_as_wide_as_the_lattice_give_the_full_loss_and_gradient():
    enc, dec, joiner, targets, t_lens, u_lens = _pruning_batch()
    enc.requires_grad_(True)
    full_b, full_e = lattice(joiner(enc.unsqueeze(2), dec.unsqueeze(1)), targets)
    width = targets.shape[1] + 1
    starts = torch.zeros(enc.shape[:2], dtype=torch.long)
    band_b, band_e = band_lattice(band_logits(enc, dec, starts, width, joiner), targets, starts)
    for loss in (rnnt_from_lattice, modified_from_lattice):
        want = loss(full_b, full_e, t_lens, u_lens)
        got = loss(band_b, band_e, t_lens, u_lens)
        # band_lattice's log-softmax is float32 (as training runs): agreement to 1e-5
        assert torch.allclose(got, want, atol=1e-5), (loss.__name__, got, want)
        g_want, = torch.autograd.grad(want.sum(), enc, retain_graph=True)
        g_got, = torch.autograd.grad(got.sum(), enc, retain_graph=True)
        assert torch.allclose(g_got, g_want, atol=1e-5), loss.__name__


def test_narrow_bands_keep_the_first_and_last_cells_and_only_remove_paths():
    enc, dec, joiner, targets, t_lens, u_lens = _pruning_batch(1)
    full_b, full_e = lattice(joiner(enc.unsqueeze(2), dec.unsqueeze(1)), targets)
    for width in (2, 3, 4):
        starts = prune_starts(full_b, full_e, t_lens, u_lens, width, rnnt_from_lattice)
        assert starts.dtype == torch.long and starts.shape == enc.shape[:2]
        for i, (t_len, y) in enumerate(PRUNE_CASES):
            s = starts[i, :t_len].tolist()
            assert s[0] == 0, (width, i, s)
            assert s[-1] <= len(y) < s[-1] + width, (width, i, s)  # the last band holds U
            steps = [b - a for a, b in zip(s, s[1:])]
            assert all(0 <= d < width for d in steps), (width, i, s)  # monotonic, overlapping
        band_b, band_e = band_lattice(band_logits(enc, dec, starts, width, joiner), targets, starts)
        pruned = rnnt_from_lattice(band_b, band_e, t_lens, u_lens)
        full = rnnt_from_lattice(full_b, full_e, t_lens, u_lens)
        assert bool((pruned >= full - 1e-5).all()), (width, pruned, full)  # float32 log-softmax
        assert bool((pruned < full + 50).all()), (width, pruned, full)  # a real path, not an impossible one

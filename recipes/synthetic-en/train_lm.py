"""Train a small LSTM language model over the built-in model's units (characters with the
word boundary ``▁``) on the recipe's training text, and export it in streamdec's ONNX LM
interface for shallow fusion (``--lm FILE --lm-scale X``).

Each sentence is spelled as the acoustic model writes it (``▁`` before every word); unit 0
(the transducer's blank, never a spoken unit) marks the sentence start and end. The ONNX
file maps (token (N,) int64, state (N, S) float32) to (log_probs (N, V) float32, next_state
(N, S)); metadata: ``model_type=lstm-lm``, ``vocab_size``, ``state_size``, ``sos_id``,
``eos_id`` (see ``streamdec/search/neural_lm.py``).

Usage (1 thread, a wall-clock budget; the dev sentences are never in the text):
    nice -n 10 python train_lm.py data/text/train.txt ../../streamdec/assets/synthetic-en/tokens.txt \
        exp/lm --budget-min 20
writes exp/lm/best.pt, exp/lm/lm.onnx and exp/lm/log.tsv (minutes, steps, valid perplexity
per unit).
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

import torch
from torch import nn

BOUNDARY = "\u2581"


def read_tokens(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = int(parts[1])
    return out


def spell(sentence: str, ids: dict[str, int]) -> list[int] | None:
    out = []
    for word in sentence.split():
        out.append(ids[BOUNDARY])
        for ch in word:
            if ch not in ids:
                return None
            out.append(ids[ch])
    return out


class UnitLstm(nn.Module):
    def __init__(self, vocab: int, embed: int = 64, hidden: int = 256, layers: int = 1):
        super().__init__()
        self.vocab, self.hidden, self.layers = vocab, hidden, layers
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):  # (N, L) -> (N, L, V) logits
        y, _ = self.lstm(self.embed(x))
        return self.out(y)

    @property
    def state_size(self) -> int:
        return 2 * self.layers * self.hidden


class StepLm(nn.Module):
    """One step with a flat state: what the ONNX interface exports."""

    def __init__(self, lm: UnitLstm):
        super().__init__()
        self.lm = lm

    def forward(self, token, state):  # (N,), (N, S) -> (N, V), (N, S)
        n, layers, hidden = token.shape[0], self.lm.layers, self.lm.hidden
        hc = state.reshape(n, 2, layers, hidden).permute(1, 2, 0, 3)
        y, (h, c) = self.lm.lstm(self.lm.embed(token)[:, None, :],
                                 (hc[0].contiguous(), hc[1].contiguous()))
        logp = torch.log_softmax(self.lm.out(y[:, 0]), dim=-1)
        nxt = torch.stack([h, c]).permute(2, 0, 1, 3).reshape(n, -1)
        return logp, nxt


def batches(seqs: list[list[int]], size: int, rng: random.Random):
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    rng.shuffle(groups)
    for g in groups:
        yield [seqs[i] for i in g]


def to_tensors(group: list[list[int]], sos: int):
    length = max(len(s) for s in group) + 1
    x = torch.full((len(group), length), sos, dtype=torch.long)
    y = torch.full((len(group), length), -100, dtype=torch.long)
    for n, s in enumerate(group):
        x[n, 1:len(s) + 1] = torch.tensor(s)
        y[n, :len(s)] = torch.tensor(s)
        y[n, len(s)] = sos  # end of sentence
    return x, y


def evaluate(model: UnitLstm, seqs: list[list[int]], sos: int) -> float:
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(seqs), 256):
            x, y = to_tensors(seqs[i:i + 256], sos)
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               y.reshape(-1), reduction="sum")
            total += float(loss)
            count += int((y != -100).sum())
    model.train()
    return math.exp(total / count)


def export(model: UnitLstm, path: Path, sos: int) -> None:
    import onnx

    step = StepLm(model).eval()
    token = torch.zeros(2, dtype=torch.long)
    state = torch.zeros(2, model.state_size)
    torch.onnx.export(step, (token, state), str(path), input_names=["token", "state"],
                      output_names=["log_probs", "next_state"],
                      dynamic_axes={"token": {0: "N"}, "state": {0: "N"},
                                    "log_probs": {0: "N"}, "next_state": {0: "N"}},
                      opset_version=13, dynamo=False)
    m = onnx.load(str(path))
    for k, v in {"model_type": "lstm-lm", "vocab_size": model.vocab,
                 "state_size": model.state_size, "sos_id": sos, "eos_id": sos}.items():
        entry = m.metadata_props.add()
        entry.key, entry.value = k, str(v)
    onnx.save(m, str(path))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("text", type=Path)
    ap.add_argument("tokens", type=Path)
    ap.add_argument("exp", type=Path)
    ap.add_argument("--budget-min", type=float, default=20.0)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-every-min", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    ids = read_tokens(args.tokens)
    sos = ids["<blk>"]
    seqs = [s for s in (spell(line, ids) for line in
                        args.text.read_text(encoding="utf-8").splitlines() if line.strip())
            if s]
    rng.shuffle(seqs)
    n_valid = max(200, len(seqs) // 50)
    valid, train = seqs[:n_valid], seqs[n_valid:]
    model = UnitLstm(max(ids.values()) + 1, args.embed, args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    args.exp.mkdir(parents=True, exist_ok=True)
    log = open(args.exp / "log.tsv", "a")
    start, last_eval, step, best = time.time(), time.time(), 0, float("inf")
    budget = args.budget_min * 60
    done = False
    while not done:
        for group in batches(train, args.batch, rng):
            x, y = to_tensors(group, sos)
            frac = min(1.0, (time.time() - start) / budget)
            for g in opt.param_groups:  # cosine decay over the budget
                g["lr"] = args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            now = time.time()
            if now - last_eval >= args.eval_every_min * 60 or now - start >= budget:
                ppl = evaluate(model, valid, sos)
                minutes = (now - start) / 60
                log.write(f"{minutes:.1f}\t{step}\t{ppl:.4f}\n")
                log.flush()
                print(f"{minutes:.1f} min step {step} valid ppl/unit {ppl:.3f}", flush=True)
                if ppl < best:
                    best = ppl
                    torch.save(model.state_dict(), args.exp / "best.pt")
                last_eval = now
                if now - start >= budget:
                    done = True
                    break
    model.load_state_dict(torch.load(args.exp / "best.pt"))
    export(model, args.exp / "lm.onnx", sos)
    print(f"best valid perplexity per unit {best:.3f}; exported {args.exp / 'lm.onnx'}")


if __name__ == "__main__":
    main()

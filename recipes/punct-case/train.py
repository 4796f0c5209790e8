"""Train the punctuation and casing tagger on CPU (one thread), resumable.

Usage: python train.py EXP_DIR [--minutes M] [--vocab N] [--smoke]

Writes EXP_DIR/vocab.txt (one word a line; line n is id n + 2: ids 0 and 1 are padding and
unknown), EXP_DIR/checkpoint.pt after every ``--save-every`` steps and at the end (a
second run with the same EXP_DIR resumes from it), and EXP_DIR/log.tsv (step, minutes,
train loss, held-out loss). Stops after ``--minutes`` of training in total over all runs.
"""

from __future__ import annotations

import argparse
import collections
import random
import time
from pathlib import Path

import torch
from torch import nn

from data import splits
from tagger import PAD, UNK, Tagger

IGNORE = -100


def build_vocab(train: list, size: int) -> list[str]:
    counts = collections.Counter(w for words, _, _ in train for w in words)
    return [w for w, c in counts.most_common(size) if c >= 2]


def batches(examples: list, index: dict, batch_size: int, rng: random.Random,
            word_dropout: float = 0.0):
    """Padded (ids, punct, case) tensors, examples of similar length together."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][0]), rng.random()))
    chunks = [order[a:a + batch_size] for a in range(0, len(order), batch_size)]
    rng.shuffle(chunks)
    for chunk in chunks:
        longest = max(len(examples[i][0]) for i in chunk)
        ids = torch.full((len(chunk), longest), PAD, dtype=torch.long)
        punct = torch.full((len(chunk), longest), IGNORE, dtype=torch.long)
        case = torch.full((len(chunk), longest), IGNORE, dtype=torch.long)
        for row, i in enumerate(chunk):
            words, p, c = examples[i]
            ids[row, :len(words)] = torch.tensor(
                [UNK if word_dropout and rng.random() < word_dropout else index.get(w, UNK)
                 for w in words])
            punct[row, :len(words)] = torch.tensor(p)
            case[row, :len(words)] = torch.tensor(c)
        yield ids, punct, case


def loss_of(model: Tagger, ids, punct, case) -> torch.Tensor:
    lp, lc = model(ids)
    ce = nn.functional.cross_entropy
    return ce(lp.reshape(-1, 4), punct.reshape(-1), ignore_index=IGNORE) + \
        ce(lc.reshape(-1, 3), case.reshape(-1), ignore_index=IGNORE)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("exp", type=Path)
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--smoke", action="store_true", help="tiny data and model, seconds")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    args.exp.mkdir(parents=True, exist_ok=True)
    train, dev = splits(200, files=3) if args.smoke else splits()
    if args.smoke:
        train, dev = train[:200], dev[:50]
    vocab_path = args.exp / "vocab.txt"
    if vocab_path.exists():
        vocab = vocab_path.read_text().split("\n")[:-1]
    else:
        vocab = build_vocab(train, args.vocab)
        vocab_path.write_text("".join(w + "\n" for w in vocab))
    index = {w: n + 2 for n, w in enumerate(vocab)}
    model = Tagger(len(vocab) + 2, **({"dim": 8, "hidden": 8} if args.smoke else {}))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    ckpt = args.exp / "checkpoint.pt"
    step, spent, epoch = 0, 0.0, 0
    if ckpt.exists():
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, spent, epoch = state["step"], state["minutes"], state["epoch"]
        print(f"resumed at step {step}, {spent:.1f} min")

    def save() -> None:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "minutes": spent, "epoch": epoch}, ckpt)

    def dev_loss() -> float:
        model.eval()
        with torch.no_grad():
            losses = [loss_of(model, *b).item()
                      for b in batches(dev, index, 64, random.Random(0))]
        model.train()
        return sum(losses) / len(losses)

    log = (args.exp / "log.tsv").open("a")
    start, running = time.time() - spent * 60, []
    done = False
    while not done:
        rng = random.Random(epoch)
        for ids, punct, case in batches(train, index, args.batch, rng, word_dropout=0.03):
            loss = loss_of(model, ids, punct, case)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            running.append(loss.item())
            step += 1
            spent = (time.time() - start) / 60
            if step % args.save_every == 0 or spent >= args.minutes:
                d = dev_loss()
                line = f"{step}\t{spent:.2f}\t{sum(running) / len(running):.4f}\t{d:.4f}"
                print(line, flush=True)
                log.write(line + "\n")
                log.flush()
                running = []
                save()
            if spent >= args.minutes:
                done = True
                break
        else:
            epoch += 1
            for group in opt.param_groups:
                group["lr"] *= 0.7
    save()


if __name__ == "__main__":
    main()

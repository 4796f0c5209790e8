"""Train the streaming LSTM transducer on the precomputed shards (CPU).

Loss = RNN-T (``--loss-type``: modified = one symbol per frame; mixed = the mean of the
standard and the modified loss, so the model fits one-symbol greedy search and also the
searches that emit several symbols per frame) + ctc_weight * char CTC (top layer) + phone_weight * phoneme CTC
(layer ``phone_layer``), all per target token. Adam, linear warm-up then a cosine
decay over the wall-clock budget (``--budget-min``). Epoch 0 starts with the
shortest batches, short-to-long (curriculum). New shards that appear while training (data prep still
running) are picked up at the next epoch.

Every ``--ckpt-min`` minutes: exp/last.pt (resume point). Every ``--eval-min``
minutes: greedy CER/WER on the dev sets -> exp/curves.tsv, best by ``--select-by``'s CER
(espeak; step 3d: piper; real English: heldout) -> exp/best.pt. Log: exp/train.log (stdout).

``--init``: start from the weights of a training checkpoint or an exported model.pt
(fine-tuning; the training-only heads start fresh where the file has none).

Usage: python train.py --data data/train --dev data/dev --exp exp [--budget-min 100] [--init model.pt]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from data import collate, load_dev_set, load_shards, make_batches
from export import weights_from_scripted
from greedy import greedy_search
from model import ModelConfig, Transducer
from pruned_rnnt import band_lattice, band_logits, prune_starts, simple_lattice
from rnnt_loss import lattice, modified_from_lattice, rnnt_from_lattice
from score import error_rates
from units import TOKENS, PhoneSet, ids_to_text

# those that exist; piper: make_dev.py --piper; heldout (real speakers): make_dev.py --real-en
DEV_SETS = ("espeak", "flite", "espeak8k", "piper", "heldout")


def select_sets(value: str) -> tuple[str, ...]:
    """``--select-by``: one dev set name or several joined by '+'."""
    names = tuple(value.split("+"))
    if bad := [n for n in names if n not in DEV_SETS]:
        raise argparse.ArgumentTypeError(f"{', '.join(bad)}: not a dev set ({', '.join(DEV_SETS)})")
    return names


def evaluate(model: Transducer, dev: dict[str, list], batch: int = 50) -> dict[str, dict[str, float]]:
    model.eval()
    out = {}
    for name, utts in dev.items():
        refs, hyps = {}, {}
        for k in range(0, len(utts), batch):
            b = collate(utts[k:k + batch])
            with torch.no_grad():
                enc, _, lens = model.encode(b.feats, b.feat_lens)
            for u, ids in zip(utts[k:k + batch], greedy_search(model, enc, lens)):
                refs[u.desc], hyps[u.desc] = u.text, ids_to_text(ids)
        out[name] = error_rates(refs, hyps)
        out[name]["example"] = f"REF {utts[0].text} | HYP {hyps[utts[0].desc]}"
    model.train()
    return out


def read_init(path: Path) -> tuple[dict, dict, list | None]:
    """(weights, architecture, phone symbols or None) of a training checkpoint or an
    exported model.pt (which has no training-only heads and no phone set)."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)  # TorchScript: a ScriptModule
    if isinstance(ckpt, dict):
        return ckpt["model"], ckpt["config"], ckpt["phones"]
    meta = ckpt.metadata()
    d_model, hidden = int(meta.get("residual_dim", meta["d_model"])), int(meta["rnn_hidden_size"])
    arch = dict(d_model=d_model, rnn_hidden_size=hidden if hidden != d_model else 0,
                num_layers=int(meta["num_encoder_layers"]),
                context_size=int(meta["context_size"]), joiner_dim=int(meta["joiner_dim"]))
    return weights_from_scripted(path), arch, None


def init_weights(model: Transducer, weights: dict, path: Path) -> None:
    """Load fine-tuning start weights; heads the file lacks (or sized for another phone set) start fresh."""
    own = model.state_dict()
    kept = {k: v for k, v in weights.items() if k in own and own[k].shape == v.shape}
    missing = model.load_state_dict(kept, strict=False).missing_keys
    if any("head" not in k for k in missing):
        raise ValueError(f"{path}: no weights for {[k for k in missing if 'head' not in k]}")
    print(f"init from {path}; fresh: {missing}", flush=True)


def save(path: Path, **state) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def transducer_losses(model: Transducer, enc, lens, tok, tok_lens, loss_type: str, prune: int,
                      simple_weight: float) -> tuple[torch.Tensor, dict]:
    """The summed transducer loss of a batch (and its parts): on the full lattice, or with
    ``prune`` = S > 0 on bands of S target positions chosen by the simple joiner
    (pruned_rnnt); with ``simple_weight`` > 0 (the model has simple heads) plus that
    much of the simple joiner's own loss, which trains the heads that choose the bands."""
    parts, extra = {}, 0.0
    dec = model.decode_targets(tok)
    if simple_weight > 0 or prune:
        sb, se = simple_lattice(model.simple_am_head(enc), model.simple_lm_head(dec), tok)
        l_simple = rnnt_from_lattice(sb, se, lens, tok_lens).sum()
        extra, parts["simple"] = simple_weight * l_simple, float(l_simple.detach())
    topologies = {"standard": [rnnt_from_lattice], "modified": [modified_from_lattice],
                  "mixed": [rnnt_from_lattice, modified_from_lattice]}[loss_type]
    if prune:
        width = min(prune, tok.shape[1] + 1)
        enc_proj, dec_proj = model.joiner.encoder_proj(enc), model.joiner.decoder_proj(dec)
    else:
        full = lattice(model.joint_lattice(enc, dec), tok)  # one lattice for both topologies
    terms = []
    for loss in topologies:
        if prune:  # each topology on bands from its own occupancy of the simple lattice
            starts = prune_starts(sb, se, lens, tok_lens, width, loss)
            blank_lp, emit_lp = band_lattice(band_logits(enc_proj, dec_proj, starts, width, model.joiner),
                                             tok, starts)
        else:
            blank_lp, emit_lp = full
        terms.append(loss(blank_lp, emit_lp, lens, tok_lens).sum())
    main = sum(terms) / len(terms)
    return (main + extra).float(), parts


def losses(model: Transducer, b, phone_weight: float, ctc_weight: float,
           loss_type: str = "standard", prune: int = 0, simple_weight: float = 0.0) -> tuple[torch.Tensor, dict]:
    enc, mid, enc_lens = model.encode(b.feats, b.feat_lens)
    # utterances without an English transcript (real foreign voices) train the phoneme head only
    has_text = b.token_lens > 0
    ntok = b.token_lens.sum().clamp(min=1)
    total, parts = enc.new_zeros(()), {}
    if bool(has_text.any()):
        keep = has_text.nonzero().squeeze(1)
        t_enc, t_lens, t_tok, t_tok_lens = enc[keep], enc_lens[keep], b.tokens[keep], b.token_lens[keep]
        l_rnnt, more = transducer_losses(model, t_enc, t_lens, t_tok, t_tok_lens, loss_type, prune, simple_weight)
        l_rnnt = l_rnnt / ntok
        total, parts["rnnt"] = l_rnnt, l_rnnt.item()
        parts.update({k: v / float(ntok) for k, v in more.items()})
        if ctc_weight > 0:
            lp = F.log_softmax(model.ctc_head(t_enc), -1).transpose(0, 1)
            l_ctc = F.ctc_loss(lp, t_tok, t_lens, t_tok_lens, reduction="sum", zero_infinity=True) / ntok
            total, parts["ctc"] = total + ctc_weight * l_ctc, l_ctc.item()
    if phone_weight > 0 and model.phone_head is not None:
        lp = F.log_softmax(model.phone_head(mid), -1).transpose(0, 1)
        l_ph = F.ctc_loss(lp, b.phones, enc_lens, b.phone_lens, reduction="sum",
                          zero_infinity=True) / b.phone_lens.sum().clamp(min=1)
        total, parts["phone"] = total + phone_weight * l_ph, l_ph.item()
    return total, parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--dev", type=Path, required=True)
    ap.add_argument("--exp", type=Path, required=True)
    ap.add_argument("--budget-min", type=float, default=100.0, help="wall-clock training budget")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--max-frames", type=int, default=20000, help="padded input frames per batch")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--phone-weight", type=float, default=0.3)
    ap.add_argument("--ctc-weight", type=float, default=0.2)
    ap.add_argument("--d-model", type=int, default=288)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--curriculum", type=float, default=0.3,
                    help="epoch 0 starts with this fraction of the batches, shortest first")
    ap.add_argument("--loss-type", choices=["standard", "modified", "mixed"], default="modified",
                    help="modified: at most one symbol per frame (matches 1-symbol greedy search); "
                         "mixed: mean of standard and modified")
    ap.add_argument("--init", type=Path, help="initial weights: a training checkpoint or an exported model.pt")
    ap.add_argument("--standard-steps", type=int, default=0,
                    help="use the standard transducer loss for the first N steps (the shipped run: 1460)")
    ap.add_argument("--prune-range", type=int, default=0,
                    help="pruned transducer loss on bands of this many target positions (0: full lattice)")
    ap.add_argument("--prune-from-step", type=int, default=0,
                    help="full lattice (with the simple joiner's loss, so its heads learn) before this step")
    ap.add_argument("--simple-weight", type=float, default=0.25, help="weight of the simple joiner's loss")
    ap.add_argument("--vtlp", type=float, default=0.6, help="probability of VTLP per utterance")
    ap.add_argument("--vtlp-from-step", type=int, default=0, help="no VTLP before this step (shipped run: 980)")
    ap.add_argument("--eval-min", type=float, default=10.0)
    ap.add_argument("--ckpt-min", type=float, default=4.0)
    ap.add_argument("--select-by", default="espeak", type=select_sets,
                    help="dev set whose CER picks best.pt, or sets joined by '+' (the sum of their CERs "
                         "picks it: heldout+espeak keeps the synthetic voices from being forgotten)")
    ap.add_argument("--dev-limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.exp.mkdir(parents=True, exist_ok=True)
    last = args.exp / "last.pt"

    resume = torch.load(last, weights_only=False) if last.exists() else None
    init = read_init(args.init) if args.init and not resume else None
    phones = resume["phones"] if resume else init[2] if init else None
    phone_set = PhoneSet(phones[1:]) if phones else None
    shards = sorted(args.data.glob("shard-*.npz"))
    utts, phone_set = load_shards(shards, phone_set)
    arch = dict(d_model=args.d_model, num_layers=args.layers)
    if init:
        arch = {k: v for k, v in init[1].items() if k not in ("vocab_size", "num_phones")}
    cfg = ModelConfig(vocab_size=len(TOKENS), num_phones=len(phone_set) if args.phone_weight > 0 else 0, **arch)
    if args.prune_range:
        cfg = ModelConfig(**{**cfg.to_dict(), "simple_heads": True})
    if resume:
        cfg = ModelConfig(**{**resume["config"], **({"simple_heads": True} if args.prune_range else {})})
    model = Transducer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    if resume:
        missing = model.load_state_dict(resume["model"], strict=False).missing_keys
        if any(not k.startswith("simple_") for k in missing):
            raise ValueError(f"{last}: no weights for {missing}")
        opt_state = resume["opt"]  # the simple heads, added on resume, are the last parameters
        opt_state["param_groups"][0]["params"] = list(range(len(list(model.parameters()))))
        opt.load_state_dict(opt_state)
        step, epoch, elapsed, best = resume["step"], resume["epoch"], resume["elapsed"], resume["best"]
        if tuple(resume.get("select_by", ())) != args.select_by:  # another measure: its best does not compare
            print(f"--select-by {'+'.join(args.select_by)}: best.pt is chosen afresh", flush=True)
            best = 1e9
    elif init:
        init_weights(model, init[0], args.init)
        step, epoch, elapsed, best = 0, 0, 0.0, 1e9
    else:
        sample = np.concatenate([u.feats for u in utts[:3000]]).astype(np.float32)
        model.encoder.feat_mean.copy_(torch.from_numpy(sample.mean(0)))
        model.encoder.feat_inv_std.copy_(torch.from_numpy(1.0 / (sample.std(0) + 1e-5)))
        step, epoch, elapsed, best = 0, 0, 0.0, 1e9
    nparams = sum(p.numel() for n, p in model.named_parameters() if "head" not in n)
    print(f"model {cfg}\nparams (exported part) {nparams / 1e6:.2f} M; {len(utts)} train utts, "
          f"{sum(len(u.feats) for u in utts) / 360000:.1f} h; {len(phone_set)} phone symbols", flush=True)
    dev = {name: load_dev_set(args.dev / name, args.dev_limit) for name in DEV_SETS if (args.dev / name).exists()}
    if missing_sets := [n for n in args.select_by if n not in dev]:
        ap.error(f"--select-by {'+'.join(args.select_by)}: no dev set {', '.join(missing_sets)} in {args.dev}")
    fill = model.encoder.feat_mean.clone()  # SpecAugment: masked bins take the mean (raw domain)

    def state() -> dict:
        return dict(model=model.state_dict(), opt=opt.state_dict(), config=cfg.to_dict(), step=step,
                    epoch=epoch, elapsed=elapsed, best=best, select_by=args.select_by, phones=phone_set.symbols)

    curves = open(args.exp / "curves.tsv", "a")
    budget = args.budget_min * 60
    t_start = time.time() - elapsed
    last_ckpt = last_eval = time.time()
    audio_s, t_proc = 0.0, time.time()  # throughput since this process started
    model.train()
    done = False
    while not done:
        rng = random.Random(args.seed * 1000 + epoch)
        if epoch > 0:
            new = sorted(args.data.glob("shard-*.npz"))
            if len(new) > len(shards):
                more, _ = load_shards(new[len(shards):], phone_set)
                utts += more
                shards = new
                print(f"epoch {epoch}: now {len(utts)} utts", flush=True)
        for idx in make_batches(utts, args.max_frames, rng, curriculum=args.curriculum if epoch == 0 else 0.0):
            elapsed = time.time() - t_start
            frac = min(elapsed / budget, 1.0)
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
            for g in opt.param_groups:
                g["lr"] = lr
            b = collate([utts[i] for i in idx], rng, fill, args.vtlp if step >= args.vtlp_from_step else 0.0)
            loss_type = "standard" if step < args.standard_steps else args.loss_type
            prune = args.prune_range if step >= args.prune_from_step else 0
            loss, parts = losses(model, b, args.phone_weight, args.ctc_weight, loss_type, prune,
                                 args.simple_weight if args.prune_range else 0.0)
            opt.zero_grad()
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            step += 1
            audio_s += float(b.feat_lens.sum()) / 100
            if step % 20 == 0 or args.max_steps:
                rt = audio_s / max(time.time() - t_proc, 1e-9)
                print(f"step {step} ep {epoch} min {elapsed / 60:.1f} lr {lr:.2e} loss {loss.item():.3f} "
                      + " ".join(f"{k} {v:.3f}" for k, v in parts.items())
                      + f" gnorm {float(gnorm):.1f} N {len(idx)} x{rt:.0f}", flush=True)
            now = time.time()
            done = elapsed >= budget or (args.max_steps and step >= args.max_steps)
            if now - last_eval >= args.eval_min * 60 or done:
                res = evaluate(model, dev)
                cer = sum(res[n]["cer"] for n in args.select_by)
                line = "\t".join([f"{step}", f"{elapsed / 60:.1f}"] + [
                    f"{n}:CER={100 * r['cer']:.1f},WER={100 * r['wer']:.1f}" for n, r in res.items()])
                print("EVAL " + line + "\n  " + "\n  ".join(f"{n}: {r['example']}" for n, r in res.items()),
                      flush=True)
                curves.write(line + f"\tloss={loss.item():.3f}\n")
                curves.flush()
                if cer < best:
                    best = cer
                    save(args.exp / "best.pt", **state())
                last_eval = time.time()
            if now - last_ckpt >= args.ckpt_min * 60 or done:
                save(last, **state())
                last_ckpt = time.time()
            if done:
                break
        epoch += 1
    print("training done", flush=True)


if __name__ == "__main__":
    main()

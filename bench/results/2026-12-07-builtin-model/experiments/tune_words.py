"""2026-12-07: the word search's weights chosen by the held-out real speakers (never the dev set).

For each setting of word_lm_scale / word_bonus / unk_penalty (the rest of --config accurate
unchanged, set up by bench/realvoice.py), the WER of the built-in model (or MODEL_DIR) on the
held-out real speakers and on the espeak dev set (the 2-point check against step 3c),
batched as bench/realvoice.py does.

    python bench/results/2026-12-07-builtin-model/experiments/tune_words.py HELDOUT_DIR [--model DIR] > out.tsv
"""
from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # bench/
from devset import dev_set, folder_set, transcribe  # noqa: E402
from realvoice import recognizer, whole_rates  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("heldout", type=Path)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--scales", default="0.5,0.7,0.9,1.1")
    ap.add_argument("--bonuses", default="0.75,1.25,1.75")
    ap.add_argument("--unk", default="5")
    ap.add_argument("--espeak", action="store_true", help="also the espeak dev set")
    args = ap.parse_args()
    rec, searches = recognizer(args.model)
    sets = {"heldout": folder_set(args.heldout)}
    if args.espeak:
        sets["espeak"] = dev_set("espeak", 0)
    print("scale\tbonus\tunk\t" + "\t".join(f"{n} WER\t{n} CER" for n in sets), flush=True)
    grid = itertools.product(*(map(float, a.split(",")) for a in (args.scales, args.bonuses,
                                                                  args.unk)))
    for scale, bonus, unk in grid:
        search = replace(searches["accurate"], word_lm_scale=scale, word_bonus=bonus,
                         unk_penalty=unk)
        cells = []
        for utts in sets.values():
            r = whole_rates(utts, transcribe(rec, utts, search, batch=16))
            cells += [f"{100 * r['wer']:.1f}", f"{100 * r['cer']:.1f}"]
        print(f"{scale}\t{bonus}\t{unk}\t" + "\t".join(cells), flush=True)


if __name__ == "__main__":
    main()

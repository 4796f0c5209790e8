"""Collect the numbers MODEL.md quotes: dev-set CER/WER per set and precision from the
score files that ``run.sh`` step 5 writes, training curves from exp/curves.tsv.

Usage: python model_card.py EXP_DIR   (prints markdown tables to paste / check)
EXP_DIR: exp/ or a fine-tuning phase in it (exp/finetune2); the dev data is the
data/dev beside the nearest exp/.
"""

from __future__ import annotations

import sys
from pathlib import Path

from score import error_rates, read_jsonl_hyps, read_refs


def main() -> None:
    exp = Path(sys.argv[1]).resolve()
    work = next(p for p in exp.parents if (p / "data" / "dev").is_dir())
    data = work / "data" / "dev"
    print("| dev set | utts | CER fp32 | WER fp32 | CER int8 | WER int8 |\n|---|---|---|---|---|---|")
    for name in ("espeak", "flite", "espeak8k"):
        refs = read_refs(data / name / "refs.tsv")
        cells = []
        for prec in ("fp32", "int8"):
            hyp = exp / f"hyp-{name}-{prec}.jsonl"
            if hyp.exists():
                r = error_rates(refs, read_jsonl_hyps(hyp))
                cells += [f"{100 * r['cer']:.1f}%", f"{100 * r['wer']:.1f}%"]
            else:
                cells += ["-", "-"]
        print(f"| {name} | {len(refs)} | " + " | ".join(cells) + " |")
    curves = exp / "curves.tsv"
    if curves.exists():
        print("\n| step | minutes | espeak | flite | espeak8k |\n|---|---|---|---|---|")
        for line in curves.read_text().splitlines():
            f = line.split("\t")
            sets = {c.split(":")[0]: c.split(":")[1].replace("CER=", "").replace(",WER=", " / ") for c in f[2:5]}
            print(f"| {f[0]} | {f[1]} | " + " | ".join(sets.get(k, "-") for k in ("espeak", "flite", "espeak8k")) + " |")


if __name__ == "__main__":
    main()

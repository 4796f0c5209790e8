"""Quality and speed of an exported tagger on the held-out text (data.py's split).

Usage: python evaluate.py MODEL_DIR [--json OUT]

MODEL_DIR holds tagger.onnx and vocab.txt (e.g. streamdec/assets/punct-case). Runs the
model as streamdec does (``streamdec.textfmt.punct.PunctCaseTagger``, one ONNX Runtime
thread) on every held-out example and prints:

- precision, recall and F1 of each mark (``,`` ``.`` ``?``) after each word;
- casing accuracy over all words, and over the words not in lower case;
- the time to tag one 20-word final (median and 95th percentile over the held-out
  examples cut to 20 words).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from data import CASES, PUNCT, held_out_sets  # noqa: E402
from streamdec.textfmt.punct import PunctCaseTagger  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tagger = PunctCaseTagger(args.model_dir)
    sets = held_out_sets()
    report = {name: quality(tagger, dev) for name, dev in sets.items()}
    report["all"] = quality(tagger, [e for dev in sets.values() for e in dev])
    report["ms_per_20_word_final"] = speed(tagger, [w[:20] for dev in sets.values()
                                                    for w, _, _ in dev if len(w) >= 20])
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


def quality(tagger: PunctCaseTagger, dev: list) -> dict:
    tp = {m: 0 for m in PUNCT[1:]}
    fp, fn = dict(tp), dict(tp)
    case_ok = case_n = upper_ok = upper_n = 0
    for words, punct, case in dev:
        tags = tagger.tag(words)
        for (mark, casing), p, c in zip(tags, punct, case):
            gold = PUNCT[p]
            if mark and mark == gold:
                tp[mark] += 1
            else:
                if mark:
                    fp[mark] += 1
                if gold:
                    fn[gold] += 1
            ok = casing == CASES[c]
            case_ok += ok
            case_n += 1
            if c:
                upper_ok += ok
                upper_n += 1
    report: dict = {"held_out_words": case_n, "marks": {}}
    for m in PUNCT[1:]:
        prec = tp[m] / max(1, tp[m] + fp[m])
        rec = tp[m] / max(1, tp[m] + fn[m])
        f1 = 2 * prec * rec / max(1e-9, prec + rec)
        report["marks"][m] = {"precision": round(prec, 3), "recall": round(rec, 3),
                              "f1": round(f1, 3), "support": tp[m] + fn[m]}
    report["casing_accuracy"] = round(case_ok / case_n, 4)
    report["casing_accuracy_not_lower"] = round(upper_ok / max(1, upper_n), 4)
    return report


def speed(tagger: PunctCaseTagger, finals: list) -> dict:
    for words in finals[:20]:
        tagger.tag(words)  # warm-up
    times = []
    for words in finals:
        t = time.perf_counter()
        tagger.tag(words)
        times.append(time.perf_counter() - t)
    times.sort()
    return {"median": round(1000 * statistics.median(times), 3),
            "p95": round(1000 * times[int(0.95 * len(times))], 3), "finals": len(times)}


if __name__ == "__main__":
    main()

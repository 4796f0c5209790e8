"""CER and WER (Levenshtein) of hypotheses against references, on normalised text.

Usage: python score.py REFS HYPS_JSONL [--per-utt]

REFS: ``utt_id<TAB>text`` lines. HYPS_JSONL: the output of
``streamdec transcribe --format jsonl FILES...``: one JSON object per event with
``file``, ``type`` (partial|final), ``segment`` and ``text``; a file's transcript is
the texts of its final events joined by a space, in segment order; the file's path
stem is the utt id. A reference with no hypothesis counts as an empty transcript.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from text_norm import normalize

__all__ = ["edit_distance", "error_rates", "read_refs", "read_jsonl_hyps"]


def edit_distance(ref: list, hyp: list) -> int:
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def error_rates(refs: dict[str, str], hyps: dict[str, str]) -> dict[str, float]:
    """{'cer', 'wer', 'utts'}: edit errors / reference length, over all utterances.

    CER counts characters of the normalised text, including the spaces between words."""
    ce = cn = we = wn = 0
    for utt, ref in refs.items():
        r, h = normalize(ref), normalize(hyps.get(utt, ""))
        ce += edit_distance(list(r), list(h))
        cn += len(r)
        we += edit_distance(r.split(), h.split())
        wn += len(r.split())
    return {"cer": ce / max(cn, 1), "wer": we / max(wn, 1), "utts": len(refs)}


def read_refs(path: Path) -> dict[str, str]:
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            utt, text = line.split("\t", 1)
            out[utt] = text
    return out


def read_jsonl_hyps(path: Path) -> dict[str, str]:
    finals: dict[str, list[tuple[int, str]]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        ev = json.loads(line)
        if ev.get("type") != "final":
            continue
        utt = Path(ev["file"]).stem
        finals.setdefault(utt, []).append((int(ev.get("segment", 0)), ev.get("text", "")))
    return {u: " ".join(t for _, t in sorted(segs) if t) for u, segs in finals.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("refs", type=Path)
    ap.add_argument("hyps", type=Path)
    ap.add_argument("--per-utt", action="store_true")
    args = ap.parse_args()
    refs, hyps = read_refs(args.refs), read_jsonl_hyps(args.hyps)
    if args.per_utt:
        for utt in refs:
            print(f"{utt}\tREF: {normalize(refs[utt])}\n{utt}\tHYP: {normalize(hyps.get(utt, ''))}")
    r = error_rates(refs, hyps)
    print(f"CER {100 * r['cer']:.2f}%  WER {100 * r['wer']:.2f}%  ({r['utts']} utts)")


if __name__ == "__main__":
    main()

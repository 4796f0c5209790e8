"""Words benchmark: WER/CER of the built-in model's dev sets (espeak, flite, espeak8k) with
and without words in the search, and the real-time factor of each configuration against the
same search without language models, measured in the same run.

    python bench/accuracy/words.py --out bench-words.json                  # the quality table
    python bench/accuracy/words.py --limit 40 --timing-utts 10 --runs 1    # a quick look

Rows (``--rows``, comma-separated, default all):
- ``baseline``: the best beam search without words (ALSD, beam 4);
- ``accurate``: ``configs/accurate.toml`` (``--config accurate``);
- ``accurate_no_lm``: the same search and beam as ``accurate`` without its lang directory
  and neural LM (the RTF yardstick);
- ``lexicon_only`` (word LM scale 0), ``closed_vocabulary`` (no unknown words),
  ``words_and_neural`` (+ the neural unit LM), ``neural_only`` (the neural LM without
  words), ``modified_beam_words`` (the accurate words with modified beam search): what each
  part adds (see ``ROWS``).
``--extra NAME=JSON`` adds a row of [search] keys on top of the accurate config.

Report (JSON): per row its search settings and, per dev set, ``wer``/``cer`` (whole set);
``rtf`` (single stream, decode seconds / audio seconds over the first ``--timing-utts``
espeak utterances, median of ``--runs``) and ``rtf_vs_no_lm`` (row RTF / accurate_no_lm
RTF, both medians of this run).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.devset import dev_set, error_rates, transcribe  # noqa: E402
from streamdec import Recognizer  # noqa: E402
from streamdec.appconfig import load_config  # noqa: E402

SETS = ("espeak", "flite", "espeak8k")
# row name -> changes to the accurate config's [search] table
ROWS = {
    "baseline": {"method": "alsd", "beam": 4, "lang_dir": None, "lm_file": None},
    "accurate": {},
    "accurate_no_lm": {"lang_dir": None, "lm_file": None},
    "lexicon_only": {"lm_file": None, "word_lm_scale": 0.0},
    "closed_vocabulary": {"allow_oov": False},
    "words_and_neural": {"lm_file": "lm.onnx", "lm_scale": 0.15},
    "neural_only": {"lang_dir": None, "lm_file": "lm.onnx", "lm_scale": 0.3},
    "modified_beam_words": {"method": "modified_beam"},
}


def run(args) -> dict:
    app = load_config(args.config)
    base = app.recognizer.search
    rows = dict(ROWS)
    for item in args.extra:
        name, _, js = item.partition("=")
        rows[name] = json.loads(js)
    names = args.rows.split(",") if args.rows else list(rows)
    rec = Recognizer(app.recognizer)
    sets = {name: dev_set(name, args.limit) for name in args.sets.split(",")}
    timing = sets.get("espeak", next(iter(sets.values())))[:args.timing_utts]
    audio = sum(u.seconds for u in timing)
    report: dict = {"config": args.config, "limit": args.limit, "runs": args.runs,
                    "timing_utterances": len(timing), "timing_audio_seconds": round(audio, 2),
                    "machine": platform.processor() or platform.machine(), "rows": {}}
    for name in names:
        search = replace(base, **rows[name])
        rec.create_stream(search=search)  # load graphs and LMs before timing
        row: dict = {"search": {k: v for k, v in asdict(search).items()
                                if v != getattr(type(search)(), k) or k == "method"}}
        for set_name, utts in sets.items():
            refs = {u.utt: u.text for u in utts}
            rates = error_rates(refs, transcribe(rec, utts, search=search, batch=args.batch))
            row[set_name] = {"wer": round(rates["wer"], 4), "cer": round(rates["cer"], 4),
                             "utts": len(utts)}
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            transcribe(rec, timing, search=search, batch=1)
            times.append((time.perf_counter() - t0) / audio)
        row["rtf"] = round(statistics.median(times), 4)
        report["rows"][name] = row
        print(f"{name:22s} {json.dumps({k: v for k, v in row.items() if k != 'search'})}",
              file=sys.stderr, flush=True)
    yardstick = report["rows"].get("accurate_no_lm", {}).get("rtf")
    if yardstick:
        for row in report["rows"].values():
            row["rtf_vs_no_lm"] = round(row["rtf"] / yardstick, 2)
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="accurate", help="config whose search is measured")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--limit", type=int, default=0, help="first N utterances per set (0: all)")
    ap.add_argument("--rows", default="", help=f"rows to run (default all: {', '.join(ROWS)})")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=JSON",
                    help="another row: [search] keys over the config's")
    ap.add_argument("--batch", type=int, default=16, help="streams decoded together for WER")
    ap.add_argument("--runs", type=int, default=3, help="timing runs (median reported)")
    ap.add_argument("--timing-utts", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("bench-words.json"))
    args = ap.parse_args(argv)
    report = run(args)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

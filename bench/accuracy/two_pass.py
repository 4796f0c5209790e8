"""Two-pass recognition measured: the built-in model's first pass alone against its finals
decoded again by Whisper (``--config two-pass``, tiny.en and base), beside Whisper decoding
each whole file, on real speech; and what the second pass says on sound with no speech.

Sets (bench/accuracy/realvoice.py's): the real dev set (pocketsphinx-testdata and the
alsa-utils phrases, 20 utterances), its 8 kHz mu-law telephone copies (sox), and with
``--heldout DIR`` a dev set folder (the recipe's held-out real speakers: ``make_dev.py
OUT --real-en``; ``--heldout-limit N``: its first N utterances). Each utterance is decoded
by the synchronous loop (``streamdec.core.drive``), the first pass alone and with the
second pass on, one stream at a time.

Measured per model and set:
- ``wer``: first pass alone (``first_pass``), two-pass (``two_pass``: each final's
  Whisper text, or the first pass's where the second pass rejected or skipped it) and
  whole-file Whisper (``whole_file``), scored as bench/accuracy/whisper_ref.py scores
  Whisper (the recipe's normaliser after rewriting written numbers and titles; each number
  read as said: whisper_ref's NORMALISATION); ``second_pass``: finals by outcome;
- ``latency``: seconds from a first-pass final to its second-pass final, one stream
  (the second pass's own time: p50, p95, max);
- ``cpu_per_audio_second``: CPU seconds (``time.process_time``, one CTranslate2 and one
  ONNX Runtime thread) per audio second: the first pass alone, the second pass alone.
And ``no_speech``: ``--no-speech-seconds`` of each of silence, white noise, brown noise and
a tune of sine notes (numpy, seed 56): words in the two-pass finals (hallucinated words)
and second passes run.
And ``cut_mid_word`` (``--cut-mid-word``: the first model, the real dev set): each
utterance cut inside a word, as a stream that ends there (a hang-up) or a first pass that
cuts an utterance does: at the middle of the first pass's middle word (its own times:
word ``len(words) // 2`` of the first pass's final), then decoded two-pass. The reference's
prefix is the words begun before the cut: those of the uncut utterance's two-pass final
(Whisper's words, its times) that start before it; ``invented``: words of the cut
utterance's two-pass finals beyond that many (``max(0, len(hyp) - prefix)``), summed, and
the utterances with any; ``prefix_wer``: the cut finals scored against the reference's
prefix (that many of its words).

    python bench/accuracy/two_pass.py --out bench/results/2026-12-07-two-pass/two-pass.json
    python bench/accuracy/two_pass.py --models tiny.en --heldout DIR --heldout-limit 40 --out x.json
    python bench/accuracy/two_pass.py --models tiny.en --cut-mid-word --out bench/results/2026-12-07-two-pass/cut-mid-word.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from bench.accuracy.realvoice import rates, real_dev_set, telephone, whole_rates  # noqa: E402
from bench.accuracy.whisper_ref import NORMALISATION, whisper_text  # noqa: E402
from bench.common.abtest import portable  # noqa: E402
from bench.common.devset import folder_set  # noqa: E402
from streamdec.appconfig import load_config  # noqa: E402
from streamdec.core.drive import decode_audio  # noqa: E402
from streamdec.core.recognizer import Recognizer  # noqa: E402
from streamdec.core.second_pass import DONE  # noqa: E402

RATE = 16000


class Timed:
    """A second pass that notes each run's wall and CPU time (wraps ``SecondPass.run``)."""

    def __init__(self, second) -> None:
        self.second, self.wall, self.cpu = second, [], 0.0

    def __getattr__(self, name):
        return getattr(self.second, name)

    def run(self, final, clip, nbest: int = 1):
        t0, c0 = time.perf_counter(), time.process_time()
        out = self.second.run(final, clip, nbest)
        self.wall.append(time.perf_counter() - t0)
        self.cpu += time.process_time() - c0
        return out


def _hyp(finals, ref: str) -> str:
    text = " ".join(f.display if f.second_pass == DONE else f.text.lower() for f in finals
                    if f.text)
    return whisper_text(text, ref)


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3) if values else 0.0


def measure_set(rec: Recognizer, timed: Timed, utts, name: str) -> dict:
    first, two, whole, outcomes = {}, {}, {}, {}
    cpu_first = 0.0
    timed.wall, timed.cpu = [], 0.0
    whole_cpu = 0.0
    for u in utts:
        c0 = time.process_time()
        one = [e for e in decode_audio(rec, rec.create_stream(second_pass=False), u.rate,
                                       [u.samples]) if e.is_final]
        cpu_first += time.process_time() - c0
        both = [e for e in decode_audio(rec, rec.create_stream(), u.rate, [u.samples])
                if e.is_final]
        first[u.utt] = " ".join(f.text for f in one if f.text)
        two[u.utt] = _hyp(both, u.text)
        for f in both:
            if f.second_pass:
                outcomes[f.second_pass] = outcomes.get(f.second_pass, 0) + 1
        import soxr

        x = u.samples if u.rate == RATE else soxr.resample(u.samples, u.rate, RATE)
        c0 = time.process_time()
        whole[u.utt] = whisper_text(timed.model.transcribe(x.astype(np.float32)).text, u.text)
        whole_cpu += time.process_time() - c0
    score = rates if name.startswith("dev") else whole_rates
    audio = sum(u.seconds for u in utts)
    return {
        "utts": len(utts), "audio_seconds": round(audio, 2),
        "wer": {"first_pass": score(utts, first), "two_pass": score(utts, two),
                "whole_file": score(utts, whole)},
        "second_pass": outcomes,
        "latency": {"p50": _pct(timed.wall, 50), "p95": _pct(timed.wall, 95),
                    "max": round(max(timed.wall, default=0.0), 3), "finals": len(timed.wall)},
        "cpu_per_audio_second": {"first_pass": round(cpu_first / audio, 4),
                                 "second_pass": round(timed.cpu / audio, 4),
                                 "whole_file": round(whole_cpu / audio, 4)},
        "hyps": {u.utt: {"ref": u.text, "first_pass": first[u.utt], "two_pass": two[u.utt],
                         "whole_file": whole[u.utt]} for u in utts},
    }


def no_speech(rec: Recognizer, timed: Timed, seconds: float) -> dict:
    rng = np.random.default_rng(56)
    n = int(seconds * RATE)
    t = np.arange(n) / RATE
    notes = np.array([220.0, 277.2, 329.6, 440.0, 392.0, 329.6])
    brown = np.cumsum(rng.standard_normal(n))
    brown -= np.convolve(brown, np.ones(400) / 400, "same")
    signals = {"silence": np.zeros(n, np.float32),
               "white_noise": (0.1 * rng.standard_normal(n)).astype(np.float32),
               "brown_noise": (0.3 * brown / np.abs(brown).max()).astype(np.float32),
               "music": (0.2 * np.sin(2 * np.pi * notes[(t // 0.4).astype(int) % 6] * t)
                         ).astype(np.float32)}
    out = {}
    for name, x in signals.items():
        runs = len(timed.wall)
        finals = [e for e in decode_audio(rec, rec.create_stream(), RATE,
                                          [x[i:i + 10 * RATE] for i in range(0, n, 10 * RATE)])
                  if e.is_final]
        out[name] = {"seconds": seconds, "words": sum(len(f.words) for f in finals),
                     "first_pass_words": sum(len(f.first_pass.words) for f in finals
                                             if f.first_pass is not None),
                     "second_passes": len(timed.wall) - runs,
                     "done": sum(f.second_pass == DONE for f in finals)}
        print(f"no speech {name}: {out[name]}", file=sys.stderr, flush=True)
    return out


def cut_mid_word(rec: Recognizer, utts) -> dict:
    """``cut_mid_word`` of the report (see the module notes)."""
    rows, invented, prefix_words = [], 0, 0
    refs, hyps = {}, {}
    for u in utts:
        first = [e for e in decode_audio(rec, rec.create_stream(second_pass=False), u.rate,
                                         [u.samples]) if e.is_final and e.words]
        words = [w for f in first for w in f.words]
        whole = [w for e in decode_audio(rec, rec.create_stream(), u.rate, [u.samples])
                 if e.is_final for w in e.words]
        if not words or not whole:
            continue
        cut_word = words[len(words) // 2]
        cut = (cut_word.start + cut_word.end) / 2
        finals = [e for e in decode_audio(rec, rec.create_stream(), u.rate,
                                          [u.samples[:round(cut * u.rate)]]) if e.is_final]
        prefix = sum(w.start < cut for w in whole)
        said = whisper_text(u.text, u.text).split()[:prefix]
        hyp = whisper_text(" ".join(f.display if f.second_pass == DONE else f.text
                                    for f in finals if f.text), u.text).split()
        extra = max(0, len(hyp) - prefix)
        invented += extra
        prefix_words += prefix
        refs[u.utt], hyps[u.utt] = " ".join(said), " ".join(hyp)
        rows.append({"utt": u.utt, "cut_seconds": round(cut, 3), "cut_word": cut_word.text,
                     "prefix_words": prefix, "reference_prefix": " ".join(said),
                     "two_pass": " ".join(hyp), "invented": extra,
                     "second_pass": [f.second_pass for f in finals if f.second_pass]})
        print(f"cut {u.utt}: {rows[-1]}", file=sys.stderr, flush=True)
    from bench.common.devset import error_rates

    return {"utterances": len(rows), "prefix_words": prefix_words, "invented": invented,
            "utterances_with_invented": sum(r["invented"] > 0 for r in rows),
            "prefix_wer": error_rates(refs, hyps), "rows": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON report")
    ap.add_argument("--models", default="tiny.en,base", help="Whisper models, comma-separated")
    ap.add_argument("--files", default="", help="comma-separated dev ids (part/name); default all")
    ap.add_argument("--heldout", type=Path, help="also a dev set folder (refs.tsv, UTT.wav)")
    ap.add_argument("--heldout-limit", type=int, default=0, help="its first N utterances")
    ap.add_argument("--no-speech-seconds", type=float, default=450.0,
                    help="seconds of each no-speech signal (0: none)")
    ap.add_argument("--cut-mid-word", action="store_true",
                    help="only the dev set's utterances cut mid-word, with the first model")
    args = ap.parse_args(argv)
    base = load_config("two-pass").recognizer
    dev = real_dev_set(args.files.split(",") if args.files else None)
    held = folder_set(args.heldout)[:args.heldout_limit or None] if args.heldout else None
    report: dict = {
        "config": "two-pass", "first_pass": "the built-in model, greedy search",
        "faster_whisper": importlib.metadata.version("faster-whisper"),
        "ctranslate2": importlib.metadata.version("ctranslate2"),
        "machine": platform.processor() or platform.machine(),
        "normalisation": NORMALISATION, "models": {}}
    if args.cut_mid_word:
        model = args.models.split(",")[0]
        rec = Recognizer(replace(base, second_pass=replace(base.second_pass, model=model)))
        report["cut_mid_word"] = {"model": model, **cut_mid_word(rec, dev)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(portable(report), indent=2) + "\n")
        return
    with tempfile.TemporaryDirectory() as tmp:
        phone = telephone(dev, Path(tmp))
        sets = {"dev": dev, "dev_8k": phone, **({"heldout": held} if held else {})}
        for i, model in enumerate(args.models.split(",")):
            config = replace(base, second_pass=replace(base.second_pass, model=model))
            rec = Recognizer(config)
            timed = Timed(rec.second_pass)
            rec.second_pass = timed
            rows = {}
            for name, utts in sets.items():
                rows[name] = measure_set(rec, timed, utts, name)
                w = rows[name]["wer"]
                total = {k: (v["all"] if "all" in v else v)["wer"] for k, v in w.items()}
                print(f"{model} {name}: WER {total} latency {rows[name]['latency']} cpu "
                      f"{rows[name]['cpu_per_audio_second']}", file=sys.stderr, flush=True)
            if i == 0 and args.no_speech_seconds > 0:
                report["no_speech"] = {"model": model,
                                       **no_speech(rec, timed, args.no_speech_seconds)}
            report["models"][model] = {"folder": str(rec.second_pass.model.folder), **rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(portable(report), indent=2) + "\n")


if __name__ == "__main__":
    main()

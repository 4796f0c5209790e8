"""Real-voice benchmark: how the built-in model (or ``--model``) does on real human speech.

The dev set is what Debian ships (``apt-get install pocketsphinx-testdata alsa-utils``):
- ``librivox``: five LibriVox sentences (Sense and Sensibility, read by a man), with
  pocketsphinx's transcription file;
- ``cards``: five spoken card names (``cards.transcription``);
- ``goforward``: "go forward ten meters" (goforward.raw, the sentence of goforward.gram);
- ``digits``: a TIDIGITS digit string (tidigits/dhd.2934z.raw: "two nine three four zero",
  the digits its name spells, z standing for zero);
- ``alsa``: the eight speaker-test phrases of alsa-utils (/usr/share/sounds/alsa/,
  Front_Center.wav "front center" ...; Noise.wav has no words and is left out).
Raw files are 16 kHz 16-bit little-endian mono. Never train or tune on this set.

Measured, each for ``greedy``, ``modified_beam`` (beam 4) and ``accurate``
(``--config accurate``: words in the search):
- ``wer``/``cer`` per part and overall, on the files and on 8 kHz mu-law telephone copies
  (sox, as the synthetic dev set's espeak8k);
- ``shift``: distinct transcripts per file over 8 lead-ins of silence (0, 2.5, ... 17.5 ms)
  — the ``--shift-methods``;
- ``rtf``: one stream, all audio at once, one thread: CPU seconds per audio second;
  ``streams_per_core``: audio seconds per CPU second with ``--batch`` streams decoded
  together (how many real-time streams one core carries).

``--synthetic`` (off by default) also scores the same methods on the synthetic dev sets
(espeak, flite, espeak8k: ``devset.dev_set``, the recipe's held-out sentences and voices),
so that one report holds a model's real and synthetic error rates (report key
``synthetic``: set -> method -> wer, cer, utts).

``--heldout DIR`` also scores the same methods on a dev set folder (``refs.tsv``:
utt<TAB>text, and ``UTT.wav`` files, as make_dev.py writes them), such as the recipe's
held-out real speakers (``make_dev.py --real-en``: data/dev-real/heldout), report key
``heldout``: method -> wer, cer, utts (and ``heldout_dir``).

``--capture`` (off by default) also measures capture-path stability: each file, after
0.3 s of silence, played by paplay into a private PulseAudio null sink at 48 kHz
(bench/captions/null_sink.py; PulseAudio resamples the 16 kHz files) and captured from its
monitor by ``streamdec mic`` (greedy, raw text, the device's own rate), against the file
decoded directly: both transcripts per file, the share of identical ones and the WER of
each (report key ``capture``). Needs pulseaudio, pulseaudio-utils, libasound2-plugins
and libportaudio2; without them ``--capture`` fails saying so.

    python bench/accuracy/realvoice.py --out bench/results/realvoice.json
    python bench/accuracy/realvoice.py --files cards/001,alsa/Front_Center --methods greedy --out x.json
    python bench/accuracy/realvoice.py --methods greedy --no-timing --capture --out x.json
    python bench/accuracy/realvoice.py --model DIR --synthetic --capture --out x.json
    python bench/accuracy/realvoice.py --heldout recipes/synthetic-en/data/dev-real/heldout --out x.json
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.devset import (Utterance, _telephone, dev_set, error_rates,  # noqa: E402
                                 folder_set, normalize, transcribe)
from streamdec import Recognizer  # noqa: E402
from streamdec.appconfig import load_config  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402

PS = Path("/usr/share/pocketsphinx/test/data")
ALSA = Path("/usr/share/sounds/alsa")
ALSA_PHRASES = ["Front_Center", "Front_Left", "Front_Right", "Rear_Center", "Rear_Left",
                "Rear_Right", "Side_Left", "Side_Right"]
RAW = {"goforward/goforward": (PS / "goforward.raw", "go forward ten meters"),
       "digits/dhd.2934z": (PS / "tidigits" / "dhd.2934z.raw", "two nine three four zero")}
METHODS = ["greedy", "modified_beam", "accurate"]
SHIFTS_MS = [2.5 * i for i in range(8)]
SYNTHETIC_SETS = ["espeak", "flite", "espeak8k"]
CAPTURE_SINK_RATE = 48000  # the null sink's rate: PulseAudio resamples the files to it
CAPTURE_LEAD_IN = 0.3  # seconds of silence before each played file (the monitor misses
# the first 45-90 ms of a playback)
CAPTURE_TOOLS = ("pulseaudio", "paplay", "pactl")
CAPTURE_PACKAGES = "pulseaudio pulseaudio-utils libasound2-plugins libportaudio2"


def _sphinx_transcripts(path: Path) -> list[tuple[str, str]]:
    """(file id, text) of a sphinx transcription file: ``<s> words </s> (id)`` lines."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            text, _, fid = line.rpartition("(")
            words = [w for w in text.split() if w not in ("<s>", "</s>")]
            out.append((fid.rstrip(") \t"), " ".join(words)))
    return out


def real_dev_set(names: list[str] | None = None) -> list[Utterance]:
    """The real-voice utterances (``part/name`` ids), all or those in ``names``; a missing
    file is an error naming the Debian package that ships it."""
    import soundfile as sf

    rows: list[tuple[str, Path, str]] = []
    for part, folder in (("librivox", PS / "librivox"), ("cards", PS / "cards")):
        name = "transcription" if part == "librivox" else "cards.transcription"
        listing = folder / name
        if not listing.is_file():
            raise SystemExit(f"{listing} missing: apt-get install pocketsphinx-testdata")
        rows += [(f"{part}/{fid}", folder / f"{fid}.wav", text)
                 for fid, text in _sphinx_transcripts(listing)]
    rows += [(utt, path, text) for utt, (path, text) in RAW.items()]
    rows += [(f"alsa/{p}", ALSA / f"{p}.wav", p.replace("_", " ").lower()) for p in ALSA_PHRASES]
    if names:
        known = {r[0] for r in rows}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(f"unknown files {unknown}; known: {sorted(known)}")
        rows = [r for r in rows if r[0] in names]
    out = []
    for utt, path, text in rows:
        if not path.is_file():
            pkg = "alsa-utils" if path.is_relative_to(ALSA) else "pocketsphinx-testdata"
            raise SystemExit(f"{path} missing: apt-get install {pkg}")
        if path.suffix == ".raw":
            samples = np.fromfile(path, "<i2").astype(np.float32) / 32768.0
            rate = 16000
        else:
            samples, rate = sf.read(path, dtype="float32")
        out.append(Utterance(utt, text, samples, rate))
    return out


def telephone(utts: list[Utterance], folder: Path) -> list[Utterance]:
    """8 kHz mu-law copies (sox), read back."""
    import soundfile as sf

    flat = [replace(u, utt=u.utt.replace("/", "__")) for u in utts]
    _telephone(flat, folder)
    return [Utterance(u.utt, u.text, *sf.read(folder / f"{f.utt}.wav", dtype="float32"))
            for u, f in zip(utts, flat)]


def rates(utts: list[Utterance], hyps: dict[str, str]) -> dict:
    """WER/CER overall and per part (the id's prefix)."""
    out = {}
    for part in ["all", *dict.fromkeys(u.utt.split("/")[0] for u in utts)]:
        group = [u for u in utts if part == "all" or u.utt.startswith(part + "/")]
        r = error_rates({u.utt: u.text for u in group}, {u.utt: hyps[u.utt] for u in group})
        out[part] = {"wer": round(r["wer"], 4), "cer": round(r["cer"], 4), "utts": len(group)}
    return out


def whole_rates(utts: list[Utterance], hyps: dict[str, str]) -> dict:
    """{wer, cer, utts} of a whole set (no parts)."""
    r = error_rates({u.utt: u.text for u in utts}, hyps)
    return {"wer": round(r["wer"], 4), "cer": round(r["cer"], 4), "utts": len(utts)}


def scores(rec, utts: list[Utterance], searches: dict, methods: list[str], batch: int) -> dict:
    """method -> {wer, cer, utts} of a whole set (no parts)."""
    return {m: whole_rates(utts, transcribe(rec, utts, searches[m], batch=batch)) for m in methods}


def _print_scores(name: str, row: dict) -> None:
    print(f"{name:14s} " + " ".join(f"{m} WER {r['wer']:.3f}" for m, r in row.items()),
          file=sys.stderr, flush=True)


def shifted(u: Utterance, ms: float) -> Utterance:
    pad = np.zeros(int(round(ms * u.rate / 1000)), np.float32)
    return replace(u, utt=f"{u.utt}@{ms}", samples=np.concatenate([pad, u.samples]))


def shift_stability(rec, utts: list[Utterance], search, batch: int) -> dict:
    """Distinct (normalised) transcripts per file over the lead-ins of SHIFTS_MS."""
    copies = [shifted(u, ms) for u in utts for ms in SHIFTS_MS]
    hyps = transcribe(rec, copies, search=search, batch=batch)
    distinct = {u.utt: len({normalize(hyps[f"{u.utt}@{ms}"]) for ms in SHIFTS_MS})
                for u in utts}
    counts = list(distinct.values())
    return {"distinct": distinct, "mean": round(float(np.mean(counts)), 3),
            "share_at_most_2": round(sum(c <= 2 for c in counts) / len(counts), 3)}


def timing(rec, utts: list[Utterance], search, batch: int) -> float:
    """CPU seconds of this process per audio second, decoding ``batch`` streams together."""
    audio = sum(u.seconds for u in utts)
    t0 = time.process_time()
    transcribe(rec, utts, search=search, batch=batch)
    return (time.process_time() - t0) / audio


def require_capture_tools() -> None:
    """``--capture`` fails, naming the packages, where PulseAudio's tools are missing."""
    missing = [t for t in CAPTURE_TOOLS if shutil.which(t) is None]
    if missing:
        raise SystemExit(f"--capture needs PulseAudio: {', '.join(missing)} not found; "
                         f"apt-get install {CAPTURE_PACKAGES}")


def _lead_in_file(u: Utterance, folder: Path) -> Path:
    """The utterance after CAPTURE_LEAD_IN s of silence, 16-bit at its own rate."""
    import soundfile as sf

    path = folder / (u.utt.replace("/", "__") + ".wav")
    pad = np.zeros(int(round(CAPTURE_LEAD_IN * u.rate)), np.float32)
    sf.write(str(path), np.concatenate([pad, u.samples]), u.rate, subtype="PCM_16")
    return path


def capture_stability(utts: list[Utterance], file_hyps: dict[str, str], folder: Path,
                      model: str | None) -> dict:
    """Each file played through the null sink and captioned by ``streamdec mic`` (greedy,
    raw text; one run per file), against ``file_hyps`` (the files decoded directly)."""
    from bench.captions.null_sink import LISTENING, NullSink, caption_playback

    require_capture_tools()
    played = folder / "played"
    played.mkdir()
    mic_args = ["--format", "jsonl", "--text-format", "raw", "--search", "greedy",
                "--num-threads", "1", *(["--model", model] if model else [])]
    per_file: dict = {}
    captured: dict[str, str] = {}
    capture_rates = set()
    try:
        with NullSink(folder / "pulse", rate=CAPTURE_SINK_RATE) as sink:
            for u in utts:
                run = caption_playback(sink, [_lead_in_file(u, played)], mic_args)
                if run.returncode != 0:
                    raise RuntimeError(f"streamdec mic exited with {run.returncode} on "
                                       f"{u.utt}: {run.stderr_text}")
                events = [json.loads(line) for _, line in run.lines]
                captured[u.utt] = " ".join(e["text"] for e in events
                                           if e["type"] == "final" and e["text"])
                listening = next(line for _, line in run.stderr if line.startswith(LISTENING))
                capture_rates.add(int(re.search(r" at (\d+) Hz", listening).group(1)))
                lost = re.search(r"device overruns \(audio lost\): (\d+); blocks dropped "
                                 r"because decoding fell behind: (\d+)", run.stderr_text)
                per_file[u.utt] = {
                    "captured": captured[u.utt], "file": file_hyps[u.utt],
                    "equal": captured[u.utt] == file_hyps[u.utt], "file_rate": u.rate,
                    "overruns": int(lost.group(1)), "dropped_blocks": int(lost.group(2))}
    except RuntimeError as e:  # the daemon or streamdec mic failed: say why, no traceback
        raise SystemExit(f"--capture: {e}") from None
    identical = sum(row["equal"] for row in per_file.values())
    return {"method": "greedy", "sink_rate": CAPTURE_SINK_RATE,
            "capture_rates": sorted(capture_rates), "lead_in_seconds": CAPTURE_LEAD_IN,
            "files": len(per_file), "identical": identical,
            "share_identical": round(identical / len(per_file), 3),
            "files_with_lost_audio": sum(bool(r["overruns"] or r["dropped_blocks"])
                                         for r in per_file.values()),
            "wer_captured": rates(utts, captured), "wer_file": rates(utts, file_hyps),
            "per_file": per_file}


def recognizer(model: Path | None) -> tuple[Recognizer, dict[str, SearchConfig]]:
    """The built-in model (or ``model``) on one ONNX Runtime thread, with --config
    accurate's settings but greedy by default, and the search of each of METHODS."""
    config = load_config("accurate").recognizer
    if model:
        config = replace(config, model=replace(config.model, model_dir=model))
    config = replace(config, model=replace(config.model, num_threads=1))
    searches = {"greedy": SearchConfig(), "modified_beam": SearchConfig(method="modified_beam"),
                "accurate": config.search}
    return Recognizer(replace(config, search=SearchConfig())), searches


def measure(args) -> dict:
    held = folder_set(args.heldout) if args.heldout else None  # a bad folder fails first
    rec, searches = recognizer(args.model)
    methods = args.methods.split(",")
    utts = real_dev_set(args.files.split(",") if args.files else None)
    audio = sum(u.seconds for u in utts)
    report: dict = {"model": str(rec.config.model.path), "files": len(utts),
                    "audio_seconds": round(audio, 2), "batch": args.batch,
                    "machine": platform.processor() or platform.machine(), "threads": 1,
                    "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:
        phone = telephone(utts, Path(tmp))
        for m in methods:
            search = searches[m]
            rec.create_stream(search=search)  # load words before timing
            row: dict = {"wer": rates(utts, transcribe(rec, utts, search, batch=args.batch)),
                         "wer_8k": rates(phone, transcribe(rec, phone, search,
                                                           batch=args.batch))}
            if m in args.shift_methods.split(","):
                row["shift"] = shift_stability(rec, utts, search, args.batch)
            if not args.no_timing:
                row["rtf"] = round(timing(rec, utts, search, 1), 4)
                row["streams_per_core"] = round(1 / timing(rec, utts, search, args.batch), 1)
            report["methods"][m] = row
            print(f"{m:14s} WER {row['wer']['all']['wer']:.3f} 8k {row['wer_8k']['all']['wer']:.3f}"
                  + (f" shift mean {row['shift']['mean']}" if "shift" in row else "")
                  + (f" rtf {row['rtf']} streams/core {row['streams_per_core']}"
                     if "rtf" in row else ""), file=sys.stderr, flush=True)
        if args.synthetic:
            report["synthetic"] = {}
            for name in SYNTHETIC_SETS:
                dev = dev_set(name, args.synthetic_limit)
                report["synthetic"][name] = scores(rec, dev, searches, methods, args.batch)
                _print_scores(name, report["synthetic"][name])
        if held is not None:
            report["heldout_dir"] = str(args.heldout)
            report["heldout"] = scores(rec, held, searches, methods, args.batch)
            _print_scores("heldout", report["heldout"])
        if args.capture:
            greedy = transcribe(rec, utts, searches["greedy"], batch=args.batch)
            cap = capture_stability(utts, greedy, Path(tmp), args.model)
            report["capture"] = cap
            print(f"capture        greedy, {cap['sink_rate']} Hz sink, captured at "
                  f"{'/'.join(map(str, cap['capture_rates']))} Hz: identical "
                  f"{cap['identical']}/{cap['files']} ({cap['share_identical']:.3f}) WER "
                  f"captured {cap['wer_captured']['all']['wer']:.3f} file "
                  f"{cap['wer_file']['all']['wer']:.3f}; audio lost in "
                  f"{cap['files_with_lost_audio']} files", file=sys.stderr, flush=True)
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON report")
    ap.add_argument("--model", help="model directory (default: the built-in model)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--shift-methods", default="greedy,accurate",
                    help="methods whose shift stability is measured")
    ap.add_argument("--files", default="", help="comma-separated ids (part/name); default all")
    ap.add_argument("--batch", type=int, default=16, help="streams decoded together")
    ap.add_argument("--no-timing", action="store_true", help="skip rtf and streams per core")
    ap.add_argument("--synthetic", action="store_true",
                    help="also score the methods on the synthetic dev sets (espeak, flite, espeak8k)")
    ap.add_argument("--synthetic-limit", type=int, default=0,
                    help="--synthetic: only each set's first N utterances (0: all)")
    ap.add_argument("--heldout", type=Path,
                    help="also score the methods on this dev set folder (refs.tsv, UTT.wav)")
    ap.add_argument("--capture", action="store_true",
                    help="also compare each file captured through a PulseAudio null sink by "
                         "'streamdec mic' with the file decoded directly (greedy)")
    args = ap.parse_args(argv)
    unknown = set(args.methods.split(",")) - set(METHODS)
    if unknown:
        ap.error(f"unknown methods {sorted(unknown)}; known: {METHODS}")
    if args.capture:
        require_capture_tools()  # before any decoding
    report = measure(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Keyword spotting on real speech: streamdec's (``streamdec.search.keywords``, beside the
transcript) against sherpa-onnx's ``KeywordSpotter`` on the same audio, keywords and model
files (the repaired copy ``streamdec models repair`` writes, made here in a temporary
folder, for a ``-mobile`` export).

The keyword list is fixed: Picovoice's six wake words and five Speech Commands words
(``KEYWORDS``), in sherpa-onnx's defaults (boost 1.0, threshold 0.25, 4 paths, 1 trailing
blank). The audio (``../shared/data/real-en/``, see its SOURCES.md):

- keyword clips: ``--per-word`` recordings of each keyword, spread evenly over its
  recordings in the set's manifest (``picovoice_wakewords``: crowd-sourced, Apache-2.0;
  ``speechcommands_test_v2``: CC BY 4.0);
- non-keyword speech: ``--sentences`` Mini LibriSpeech utterances (CC BY 4.0), spread
  evenly over its manifest, leaving out those whose transcript has a keyword as a word.

Reported per side: **recall** (clips where the clip's own keyword fired; per keyword and
overall), **wrong keywords** (events on keyword clips naming another keyword), **false
alarms** on the sentences (every event: count, per hour of their audio, per keyword), and
the decode time of each side (one thread; clips alternate which side runs first; per-clip
ratios and their median) and, beside it, streamdec's time for the transcript alone (what
spotting adds to a stream).

sherpa-onnx is driven as its own examples do: 0.66 s of silence after the clip, the stream
reset after each keyword.

    python bench/accuracy/keywords.py --model-dir MODEL_DIR \\
        --out bench/results/2026-12-07-keywords/keywords.json

(``MODEL_DIR``: the ``-mobile`` GigaSpeech model, ``streamdec models get
sherpa-onnx-kws-zipformer-gigaspeech-3.3M-2024-01-01-mobile``.)
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from streamdec import ModelConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.core.drive import decode_audio  # noqa: E402
from streamdec.core.results import KeywordEvent  # noqa: E402
from streamdec.models.files import find_model_files  # noqa: E402
from streamdec.search.keyword_graph import parse_keywords  # noqa: E402

#: keyword -> (data set, the manifest's transcript of its clips)
KEYWORDS = {"ALEXA": ("picovoice_wakewords", "alexa"),
            "COMPUTER": ("picovoice_wakewords", "computer"),
            "JARVIS": ("picovoice_wakewords", "jarvis"),
            "SMART MIRROR": ("picovoice_wakewords", "smart mirror"),
            "SNOWBOY": ("picovoice_wakewords", "snowboy"),
            "VIEW GLASS": ("picovoice_wakewords", "view glass"),
            "YES": ("speechcommands_test_v2", "yes"),
            "LEFT": ("speechcommands_test_v2", "left"),
            "RIGHT": ("speechcommands_test_v2", "right"),
            "STOP": ("speechcommands_test_v2", "stop"),
            "DOWN": ("speechcommands_test_v2", "down")}
SENTENCES = "mini_librispeech_train_clean_5"
SHERPA_TAIL = 0.66  # seconds of silence after a clip, as sherpa-onnx's examples add


def manifest(data: Path, name: str) -> list[tuple[Path, str]]:
    rows = (data / name / "manifest.tsv").read_text(encoding="utf-8").splitlines()
    return [(data / name / path, text) for path, text in (r.split("\t") for r in rows)]


def spread(items: list, n: int) -> list:
    """``n`` items spread evenly over ``items`` (all of them when there are fewer)."""
    if n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


def read(path: Path) -> np.ndarray:
    import soundfile as sf

    samples, rate = sf.read(str(path), dtype="float32")
    if rate != 16000 or samples.ndim != 1:
        raise SystemExit(f"{path}: expected 16 kHz mono, got {rate} Hz {samples.shape}")
    return samples


class Sherpa:
    """sherpa-onnx's KeywordSpotter on the same files and keyword list."""

    def __init__(self, files, keywords, symbols, folder: Path) -> None:
        import sherpa_onnx

        listing = folder / "keywords.txt"
        listing.write_text("".join(
            " ".join(symbols.symbols(k.ids)) + " @" + k.text.replace(" ", "_") + "\n"
            for k in keywords), encoding="utf-8")
        self.spotter = sherpa_onnx.KeywordSpotter(
            tokens=str(files.tokens), encoder=str(files.encoder), decoder=str(files.decoder),
            joiner=str(files.joiner), keywords_file=str(listing), num_threads=1)

    def spot(self, samples: np.ndarray) -> list[str]:
        stream = self.spotter.create_stream()
        stream.accept_waveform(16000, samples)
        stream.accept_waveform(16000, np.zeros(int(SHERPA_TAIL * 16000), np.float32))
        stream.input_finished()
        heard = []
        while self.spotter.is_ready(stream):
            self.spotter.decode_stream(stream)
            keyword = self.spotter.get_result(stream)
            if keyword:
                heard.append(keyword.replace("_", " "))
                self.spotter.reset_stream(stream)
        return heard


def ours(rec: Recognizer, samples: np.ndarray, keywords: list[str] | None) -> list[str]:
    events = decode_audio(rec, rec.create_stream(keywords=keywords), 16000, [samples])
    return [e.keyword for e in events if isinstance(e, KeywordEvent)]


def timed(run) -> tuple[object, float]:
    started = time.perf_counter()
    out = run()
    return out, time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True, help="the model folder, as published")
    p.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data" / "real-en",
                   help="the real-en data folder (default: ../shared/data/real-en)")
    p.add_argument("--per-word", type=int, default=40, help="clips of each keyword")
    p.add_argument("--sentences", type=int, default=150,
                   help="Mini LibriSpeech utterances without a keyword")
    p.add_argument("--out", type=Path, required=True, help="JSON report")
    args = p.parse_args()

    model = ModelConfig(model_dir=args.model_dir, num_threads=1)
    rec = Recognizer(RecognizerConfig(model=model))
    names = list(KEYWORDS)
    listed = parse_keywords(names, rec.symbols)
    clips = []
    for keyword, (dataset, said) in KEYWORDS.items():
        rows = [path for path, text in manifest(args.data, dataset) if text == said]
        clips += [(keyword, path) for path in spread(rows, args.per_word)]
    words = {w for k in names for w in k.split()}
    sentences = [path for path, text in spread(
        [r for r in manifest(args.data, SENTENCES) if not words & set(r[1].split())],
        args.sentences)]

    report: dict = {"date": date.today().isoformat(), "command": " ".join(sys.argv),
                    "machine": {"python": platform.python_version(),
                                "processor": platform.processor() or platform.machine()},
                    "model_dir": args.model_dir, "keywords": names,
                    "settings": "sherpa-onnx's defaults: boost 1.0, threshold 0.25, "
                                "4 paths, 1 trailing blank"}
    sides = ("streamdec", "sherpa-onnx")
    with tempfile.TemporaryDirectory() as tmp:
        fixed = Path(tmp) / "fixed"
        subprocess.run([sys.executable, "-m", "streamdec", "models", "repair",
                        args.model_dir, str(fixed)], check=True, capture_output=True)
        files = find_model_files(ModelConfig(model_dir=str(fixed)))
        peer = Sherpa(files, listed, rec.symbols, Path(tmp))
        report["sherpa_files"] = {role: getattr(files, role).name
                                  for role in ("encoder", "decoder", "joiner")}
        seconds = {s: 0.0 for s in sides + ("transcript",)}
        ratios = []
        audio = {"clips": 0.0, "sentences": 0.0}

        def both(n: int, samples: np.ndarray) -> dict[str, list[str]]:
            runs = {"streamdec": lambda: ours(rec, samples, names),
                    "sherpa-onnx": lambda: peer.spot(samples)}
            order = sides if n % 2 == 0 else sides[::-1]
            got, took = {}, {}
            for side in order:
                got[side], took[side] = timed(runs[side])
                seconds[side] += took[side]
            _, alone = timed(lambda: ours(rec, samples, None))
            seconds["transcript"] += alone
            ratios.append(took["streamdec"] / took["sherpa-onnx"])
            return got

        hits = {s: {k: 0 for k in names} for s in sides}
        counted = {k: 0 for k in names}
        wrong = {s: 0 for s in sides}
        for n, (keyword, path) in enumerate(clips):
            samples = read(path)
            audio["clips"] += len(samples) / 16000
            got = both(n, samples)
            counted[keyword] += 1
            for side in sides:
                hits[side][keyword] += keyword in got[side]
                wrong[side] += sum(k != keyword for k in got[side])
        alarms = {s: {k: 0 for k in names} for s in sides}
        examples: dict[str, list] = {s: [] for s in sides}
        for n, path in enumerate(sentences):
            samples = read(path)
            audio["sentences"] += len(samples) / 16000
            got = both(n, samples)
            for side in sides:
                for k in got[side]:
                    alarms[side][k] += 1
                    examples[side].append([str(path.relative_to(args.data)), k])
    hours = audio["sentences"] / 3600
    report["audio_seconds"] = {k: round(v, 1) for k, v in audio.items()}
    report["clips"] = counted
    report["sentences"] = len(sentences)
    report["recall"] = {s: {"overall": round(sum(hits[s].values()) / len(clips), 4),
                            "per_keyword": {k: round(hits[s][k] / counted[k], 4)
                                            for k in names}} for s in sides}
    report["wrong_keyword_events"] = wrong
    report["false_alarms"] = {s: {"count": sum(alarms[s].values()),
                                  "per_hour": round(sum(alarms[s].values()) / hours, 2),
                                  "per_keyword": {k: v for k, v in alarms[s].items() if v},
                                  "events": examples[s]} for s in sides}
    total = audio["clips"] + audio["sentences"]
    report["decode"] = {"seconds": {k: round(v, 2) for k, v in seconds.items()},
                        "real_time_factor": {k: round(v / total, 4)
                                             for k, v in seconds.items()},
                        "median_clip_ratio_streamdec_to_sherpa": round(
                            float(np.median(ratios)), 3),
                        "spotting_over_transcript_alone": round(
                            seconds["streamdec"] / seconds["transcript"], 3)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    for s in sides:
        print(f"{s}: recall {report['recall'][s]['overall']:.3f}, false alarms "
              f"{report['false_alarms'][s]['per_hour']}/h, wrong keywords {wrong[s]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Search benchmark: WER, single-stream RTF and batch throughput of every search method on
the built-in model's dev set, with sherpa-onnx's greedy and modified beam search on the
same model files in the same run as the yardstick.

    python bench/accuracy/search.py --out bench-search.json            # built-in model, espeak dev
    python bench/accuracy/search.py --smoke --out /tmp/smoke.json      # random test model, seconds

Report (JSON): per method ``wer``/``cer`` (whole dev subset), ``rtf`` (single stream:
decode seconds / audio seconds, median of ``--runs``), ``throughput_b{batch}`` (audio
seconds per wall second with ``--batch`` streams decoded together, median), and
``rtf_vs_sherpa_greedy`` / ``rtf_vs_sherpa_modified_beam`` (our RTF / theirs, each a median
over runs); sherpa-onnx's own WER/CER/RTF/throughput under ``sherpa_onnx``. Timing runs use
``--timing-utts`` utterances; every run decodes the same audio. Our streams run with the
default endpointing (segments joined for scoring); sherpa-onnx's without.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.decode.batch_decode import sherpa_tail  # noqa: E402
from bench.common.devset import Utterance, dev_set, error_rates, transcribe  # noqa: E402
from bench.common.peer import SHERPA_METHODS, sherpa_recognizer  # noqa: E402
from streamdec import ModelConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.search import SEARCH_METHODS, SearchConfig  # noqa: E402


def decode_seconds(rec: Recognizer, utts: list[Utterance], search: SearchConfig, batch: int
                   ) -> float:
    """Wall seconds to decode ``utts`` ``batch`` streams at a time."""
    t0 = time.perf_counter()
    transcribe(rec, utts, search=search, batch=batch)
    return time.perf_counter() - t0


def sherpa_run(srec, utts: list[Utterance], batch: int, tail_frames: int
               ) -> tuple[float, dict[str, str]]:
    """(wall seconds, text per utterance) of sherpa-onnx on ``utts``, ``batch`` streams at a
    time (the same tail padding streamdec adds: sherpa-onnx decodes whole chunks only)."""
    texts = {}
    t0 = time.perf_counter()
    for i in range(0, len(utts), batch):
        group, streams = utts[i:i + batch], []
        for u in group:
            s = srec.create_stream()
            s.accept_waveform(u.rate, np.concatenate(
                [u.samples, sherpa_tail(tail_frames, u.rate)]))
            s.input_finished()
            streams.append(s)
        while True:
            ready = [s for s in streams if srec.is_ready(s)]
            if not ready:
                break
            srec.decode_streams(ready)
        texts.update((u.utt, srec.get_result(s)) for u, s in zip(group, streams))
    return time.perf_counter() - t0, texts


def smoke_setup(tmp: Path) -> tuple[Path, list[Utterance]]:
    """A random-weight test model and two short synthetic utterances."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from model_factory import export_test_model, test_audio

    model_dir = export_test_model("lstm", tmp / "model")
    utts = [Utterance(f"smoke-{i}", "A B", test_audio(1.5 + i, seed=i), 16000) for i in range(2)]
    return model_dir, utts


def run(args, tmp: Path) -> dict:
    if args.smoke:
        model_dir, utts = smoke_setup(tmp)
        methods = list(SEARCH_METHODS)
        args.runs, args.timing_utts, args.batch = 1, 2, 2
    else:
        utts = dev_set(args.dev, args.limit)
        model_dir = Path(args.model_dir) if args.model_dir else None
        methods = args.methods.split(",")
    rec = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(model_dir) if model_dir
                                                        else None)))
    model_dir = rec.config.model.path
    timing = utts[:args.timing_utts]
    audio_all = sum(u.seconds for u in utts)
    audio_timing = sum(u.seconds for u in timing)
    refs = {u.utt: u.text for u in utts}
    report: dict = {
        "model_dir": str(model_dir), "model_type": rec.meta.model_type,
        "dev": "smoke" if args.smoke else args.dev, "utterances": len(utts),
        "audio_seconds": round(audio_all, 2), "timing_utterances": len(timing),
        "timing_audio_seconds": round(audio_timing, 2), "runs": args.runs, "beam": args.beam,
        "batch": args.batch, "machine": platform.processor() or platform.machine(),
        "searches": {}, "sherpa_onnx": {},
    }
    for method in methods:
        search = SearchConfig(method=method, beam=args.beam)
        hyps = transcribe(rec, utts, search=search, batch=args.batch)
        single = [decode_seconds(rec, timing, search, 1) / audio_timing for _ in range(args.runs)]
        batched = [audio_timing / decode_seconds(rec, timing, search, args.batch)
                   for _ in range(args.runs)]
        rates = error_rates(refs, hyps)
        report["searches"][method] = {
            "wer": round(rates["wer"], 4), "cer": round(rates["cer"], 4),
            "rtf": round(statistics.median(single), 4),
            f"throughput_b{args.batch}": round(statistics.median(batched), 2)}
        print(f"{method:14s} {json.dumps(report['searches'][method])}", file=sys.stderr)
    tail = rec.meta.chunk_frames
    for ours, method in SHERPA_METHODS.items():
        srec = sherpa_recognizer(rec.model_files, rec.meta.model_type, method, args.beam)
        rates = error_rates(refs, sherpa_run(srec, utts, args.batch, tail)[1])
        single = [sherpa_run(srec, timing, 1, tail)[0] / audio_timing for _ in range(args.runs)]
        batched = [audio_timing / sherpa_run(srec, timing, args.batch, tail)[0]
                   for _ in range(args.runs)]
        report["sherpa_onnx"][method] = {"wer": round(rates["wer"], 4),
                                         "cer": round(rates["cer"], 4),
                                         "rtf": round(statistics.median(single), 4),
                                         f"throughput_b{args.batch}":
                                         round(statistics.median(batched), 2)}
        for m, row in report["searches"].items():
            row[f"rtf_vs_sherpa_{ours}"] = round(row["rtf"] / max(statistics.median(single),
                                                                   1e-9), 2)
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", help="model folder (default: the built-in model)")
    ap.add_argument("--dev", default="espeak", help="dev set: espeak or flite")
    ap.add_argument("--limit", type=int, default=0, help="first N dev utterances (0: all)")
    ap.add_argument("--methods", default=",".join(SEARCH_METHODS))
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3, help="timing runs (medians reported)")
    ap.add_argument("--timing-utts", type=int, default=32)
    ap.add_argument("--out", type=Path, default=Path("bench-search.json"))
    ap.add_argument("--smoke", action="store_true",
                    help="random test model, two short utterances, one run: seconds")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="streamdec-bench-"))
    try:
        report = run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

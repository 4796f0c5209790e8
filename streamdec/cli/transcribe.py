"""``streamdec transcribe FILE...``: files in, transcripts out (text, jsonl, srt, vtt)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..errors import StreamdecError
from ..formats import FORMATS, event_json, subtitles, transcript
from ..recognizer import Recognizer
from ..transcribe import FileTranscription, transcribe_files, transcribe_realtime
from .live_line import LiveLine
from .options import add_recognizer_options, app_config_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("transcribe", help="transcribe audio files",
                       description="Transcribe audio files (any format soundfile reads, any "
                                   "sample rate) with the built-in or a given model.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text: one line per file; jsonl: one object per partial/final event; "
                        "srt/vtt: subtitles")
    p.add_argument("--realtime", action="store_true",
                   help="pace the audio as if live and show partial results in place")
    p.add_argument("--output-dir", metavar="DIR",
                   help="write one FILE_STEM.<format> per input instead of standard output")
    p.add_argument("--batch-size", type=int, default=8, help="files decoded at once")
    p.add_argument("--channel", type=int, metavar="N",
                   help="transcribe channel N (0-based) of multi-channel files, e.g. one side "
                        "of a stereo call recording (default: the channels' average)")
    p.add_argument("--stats", action="store_true", help="print the real-time factor to stderr")
    add_recognizer_options(p)
    p.set_defaults(run=run)


def _render(item: FileTranscription, fmt: str) -> str:
    if fmt == "text":
        return transcript(item.finals) + "\n"
    if fmt == "jsonl":
        return "".join(event_json(item.path, e) + "\n" for e in item.events)
    return subtitles(item.finals, fmt)


def run(args: argparse.Namespace) -> int:
    app = app_config_from_args(args)
    if args.format in ("srt", "vtt") and len(args.files) > 1 and not args.output_dir:
        print("streamdec: error: --format srt/vtt with several files needs --output-dir",
              file=sys.stderr)
        return 2
    if args.batch_size < 1:
        print("streamdec: error: --batch-size must be >= 1", file=sys.stderr)
        return 2
    recognizer = Recognizer(app.recognizer)
    out_dir = Path(args.output_dir) if args.output_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    audio_seconds = 0.0
    failures = 0

    # realtime text/jsonl to the terminal is printed live, event by event
    live = args.realtime and not out_dir and args.format in ("text", "jsonl")

    def emit(item: FileTranscription) -> None:
        nonlocal audio_seconds, failures
        if item.error is not None:
            failures += 1
            print(f"streamdec: {item.error}", file=sys.stderr)
            return
        audio_seconds += item.duration
        if live:
            return
        text = _render(item, args.format)
        if out_dir:
            suffix = "txt" if args.format == "text" else args.format
            (out_dir / f"{Path(item.path).stem}.{suffix}").write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    if args.realtime:
        on_event = None
        if live:
            on_event = (LiveLine(sys.stdout) if args.format == "text"
                        else lambda f, e: print(event_json(f, e), flush=True))
        for path in args.files:
            try:
                item = transcribe_realtime(recognizer, path, app.audio.chunk_ms, on_event,
                                           args.channel)
            except StreamdecError as e:  # one bad file must not stop the others
                item = FileTranscription(str(path), error=e)
            emit(item)
    else:
        from tqdm import tqdm

        bar = tqdm(total=len(args.files), unit="file", disable=len(args.files) < 2 or None,
                   file=sys.stderr)
        for item in transcribe_files(recognizer, args.files, batch_size=args.batch_size,
                                     channel=args.channel):
            emit(item)
            bar.update(1)
        bar.close()
    if args.stats:
        elapsed = time.perf_counter() - started
        rtf = elapsed / audio_seconds if audio_seconds else float("nan")
        print(f"streamdec: {audio_seconds:.2f} s of audio in {elapsed:.2f} s "
              f"(real-time factor {rtf:.4f}, {os.cpu_count()} CPUs)", file=sys.stderr)
    return 1 if failures else 0

"""``streamdec transcribe FILE...``: audio files (or standard input) in, transcripts out
(text, jsonl, srt, vtt)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from ..audio.pcm import ENCODINGS
from ..core.recognizer import Recognizer
from ..errors import ConfigError, ModelLoadError, TokenizeError
from ..files.audio_file import STDIN, RawFormat
from ..core.results import KeywordEvent
from ..files.formats import (FORMATS, MAX_CUE_SECONDS, MAX_LINE_CHARS, MAX_LINES, event_json,
                             keyword_json, keyword_line, subtitles, transcript)
from ..files.transcribe import FileTranscription, transcribe_files, transcribe_realtime
from ..textfmt import default_formatter
from .live_line import LiveLine
from .options import (HelpFormatter, add_keywords_option, add_recognizer_options,
                      add_text_format_option, announce_model, app_config_from_args,
                      chosen_text_format, keyword_lines)

EPILOG = (
    "One bad file fails alone. A file that cannot be read prints nothing on standard output "
    "and an error naming it on standard error. A file damaged partway (a read error such as "
    "a truncated FLAC's, NaN or infinite samples, float samples beyond +-2; overshoot up to "
    "2 is clipped to [-1, 1]) keeps the transcript of the audio before the damage, with an "
    "error saying where it stopped. Either makes the exit status 1. A file that holds less "
    "audio than its header promises is transcribed as it is, with a warning, and leaves the "
    "exit status 0. Exit status 2: unusable options, config or model, checked before any "
    "audio is decoded.")


def add_parser(sub) -> None:
    p = sub.add_parser("transcribe", help="transcribe audio files",
                       formatter_class=HelpFormatter, epilog=EPILOG,
                       description="Transcribe audio files (any format soundfile reads, any "
                                   "sample rate, or headerless PCM) with the built-in or a "
                                   "given model.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=f"audio files; {STDIN} reads standard input (e.g. ffmpeg -i x.mp4 "
                        f"-f wav - | streamdec transcribe -)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text: the transcript, one line per file, each line starting with "
                        "'FILE: ' when there are several files; jsonl: one object per "
                        f"partial/final event; srt/vtt: subtitles, at most {MAX_LINES} lines "
                        f"of {MAX_LINE_CHARS} characters and {MAX_CUE_SECONDS:g} s a cue")
    add_text_format_option(p, "full for srt/vtt, raw for text/jsonl")
    p.add_argument("--realtime", action="store_true",
                   help="pace the audio as if live and show partial results in place")
    p.add_argument("--output-dir", metavar="DIR",
                   help="write one FILE_STEM.<format> per input (txt for text; 'stdin' for "
                        f"{STDIN}); inputs whose output names would be the same are refused "
                        "(default: all to standard output)")
    p.add_argument("--batch-size", type=int, default=8, metavar="N", help="files decoded at once")
    p.add_argument("--channel", type=int, metavar="N",
                   help="transcribe channel N (0-based) of multi-channel files, e.g. one side "
                        "of a stereo call recording (default: the channels' average)")
    p.add_argument("--raw-rate", type=int, metavar="HZ",
                   help="the inputs are headerless PCM at HZ samples a second, e.g. 8000 for "
                        "telephone .ul files (default: inputs in a format soundfile reads)")
    p.add_argument("--raw-encoding", choices=ENCODINGS,
                   help="sample encoding of headerless PCM (needs --raw-rate; default: s16le)")
    p.add_argument("--stats", action="store_true", help="print the real-time factor to stderr")
    add_keywords_option(p)
    add_recognizer_options(p)
    p.set_defaults(run=run)


def _output_name(path: str, fmt: str) -> str:
    stem = "stdin" if path == STDIN else Path(path).stem
    return f"{stem}.{'txt' if fmt == 'text' else fmt}"


def _check_inputs(args: argparse.Namespace) -> str | None:
    """What makes the inputs unusable together, or None: checked before any decoding."""
    if args.batch_size < 1:
        return "--batch-size must be >= 1"
    if args.raw_encoding and args.raw_rate is None:
        return "--raw-encoding needs --raw-rate"
    if args.files.count(STDIN) > 1:
        return f"standard input ({STDIN}) can be read only once"
    if args.format in ("srt", "vtt") and len(args.files) > 1 and not args.output_dir:
        return "--format srt/vtt with several files needs --output-dir"
    if args.keywords is not None and args.format in ("srt", "vtt"):
        return "--keywords: keywords heard are written in --format text and jsonl, not srt/vtt"
    if args.output_dir:
        seen: dict[str, str] = {}  # output name (any case: some file systems ignore it)
        for path in args.files:
            name = _output_name(path, args.format)
            if name.casefold() in seen:
                return (f"--output-dir: {seen[name.casefold()]} and {path} would both be "
                        f"written to {Path(args.output_dir) / name}")
            seen[name.casefold()] = path
    return None


def text_format(args: argparse.Namespace) -> str:
    """The --text-format asked for, or the output format's default (``chosen_text_format``:
    subtitles are for people)."""
    return chosen_text_format(args.text_format,
                              "full" if args.format in ("srt", "vtt") else "raw")


def _formatted(item: FileTranscription, level: str) -> FileTranscription:
    if level == "raw":
        return item
    fmt = default_formatter()
    return dataclasses.replace(item, events=[fmt.apply(r, level) for r in item.events])


def _render(item: FileTranscription, fmt: str, prefix: bool) -> str:
    if fmt == "text":
        lead = f"{item.path}: " if prefix else ""
        text = transcript(item.finals)
        return (f"{lead}{text}".rstrip() + "\n"
                + "".join(f"{lead}{keyword_line(k)}\n" for k in item.keywords))
    if fmt == "jsonl":
        return ("".join(event_json(item.path, e) + "\n" for e in item.events)
                + "".join(keyword_json(item.path, k) + "\n" for k in item.keywords))
    return subtitles(item.finals, fmt)


def _report(item: FileTranscription) -> None:
    """The input's warnings and error on stderr."""
    for warning in item.warnings:
        print(f"streamdec: warning: {warning}", file=sys.stderr)
    if item.error is not None:
        kept = "" if item.failed else "; the transcript covers the audio before it"
        print(f"streamdec: error: {item.error}{kept}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    app = app_config_from_args(args)
    problem = _check_inputs(args)
    if problem:
        print(f"streamdec: error: {problem}", file=sys.stderr)
        return 2
    raw = (RawFormat(args.raw_rate, args.raw_encoding or "s16le")
           if args.raw_rate is not None else None)
    level = text_format(args)
    try:
        default_formatter().load(level)
    except ModelLoadError as e:
        print(f"streamdec: error: --text-format {level}: {e}", file=sys.stderr)
        return 2
    recognizer = Recognizer(app.recognizer)
    announce_model(recognizer)
    try:
        keywords = keyword_lines(args.keywords, recognizer)
    except (ConfigError, TokenizeError) as e:
        print(f"streamdec: error: --keywords: {e}", file=sys.stderr)
        return 2
    out_dir = Path(args.output_dir) if args.output_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    prefix = len(args.files) > 1
    started = time.perf_counter()
    audio_seconds = 0.0
    failures = 0

    # realtime text/jsonl to the terminal is printed live, event by event
    live = args.realtime and not out_dir and args.format in ("text", "jsonl")

    def emit(item: FileTranscription) -> None:
        nonlocal audio_seconds, failures
        _report(item)
        failures += item.error is not None
        audio_seconds += item.duration
        if live or item.failed:
            return
        text = _render(_formatted(item, level), args.format, prefix)
        if out_dir:
            (out_dir / _output_name(item.path, args.format)).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    if args.realtime:
        on_event = None
        if live:
            show = (LiveLine(sys.stdout, prefix=prefix) if args.format == "text"
                    else lambda f, e: print(event_json(f, e), flush=True))

            def on_event(f, e, show=show):
                if not isinstance(e, KeywordEvent):
                    show(f, default_formatter().apply(e, level))
                elif args.format == "text":
                    show.note(f, keyword_line(e))
                else:
                    print(keyword_json(f, e), flush=True)
        for path in args.files:
            emit(transcribe_realtime(recognizer, path, app.audio.chunk_ms, on_event,
                                     args.channel, raw, keywords=keywords))
    else:
        from tqdm import tqdm

        bar = tqdm(total=len(args.files), unit="file", disable=len(args.files) < 2 or None,
                   file=sys.stderr)
        for item in transcribe_files(recognizer, args.files, batch_size=args.batch_size,
                                     channel=args.channel, raw=raw, keywords=keywords):
            emit(item)
            bar.update(1)
        bar.close()
    if args.stats:
        elapsed = time.perf_counter() - started
        rtf = elapsed / audio_seconds if audio_seconds else float("nan")
        print(f"streamdec: {audio_seconds:.2f} s of audio in {elapsed:.2f} s "
              f"(real-time factor {rtf:.4f}, {os.cpu_count()} CPUs)", file=sys.stderr)
    return 1 if failures else 0

"""``streamdec mic``: live captions of an input device (a microphone) in the terminal.

The device is captured at its own rate (the core resamples), decoded in real time through
the engine, and each result shown as it comes: the partial line rewritten in place and the
finals as lines with their times (``--format text``), or one JSON object per event
(``--format jsonl``). Ctrl-C (or SIGTERM) stops capturing, finishes the last utterance,
prints its final and exits; a second Ctrl-C quits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Callable

from ..core.recognizer import Recognizer
from ..core.results import KeywordEvent, Result
from ..engine import Engine, run_stream
from ..errors import ConfigError, TokenizeError
from ..files.formats import event_json, keyword_json, keyword_line, subtitles
from ..microphone import Capture, find_input_device, require_input_devices
from ..textfmt import default_formatter
from ..validation import require_sample_rate
from .live_line import LiveLine
from .options import (add_keywords_option, add_recognizer_options, add_text_format_option,
                      announce_model, app_config_from_args, chosen_text_format, keyword_lines)

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def add_parser(sub) -> None:
    p = sub.add_parser("mic", help="live captions of a microphone",
                       description="Caption an input device live: partial text rewritten in "
                                   "place, finals as lines with their times. Ctrl-C finishes "
                                   "the last utterance and exits.")
    p.add_argument("--device", metavar="DEVICE",
                   help="input device: its index or (part of) its name, as --list-devices "
                        "shows them (default: the system's default input device)")
    p.add_argument("--list-devices", action="store_true",
                   help="list the input devices (* marks the default) and exit")
    p.add_argument("--rate", type=int, metavar="HZ",
                   help="capture rate (default: the device's own rate; the audio is "
                        "resampled to the model's rate either way)")
    p.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text: captions for people; jsonl: one JSON object per partial/final "
                        "event, as 'transcribe --format jsonl' writes them, with the device "
                        "name as 'file' (default: %(default)s)")
    add_text_format_option(p, "full")
    p.add_argument("--save", metavar="PREFIX",
                   help="also write the captured audio to PREFIX.wav (16-bit, the capture "
                        "rate) and what was said to PREFIX.srt (times in that audio) "
                        "(default: none)")
    add_keywords_option(p)
    add_recognizer_options(p)
    p.set_defaults(run=run)


class _Recording:
    """``--save PREFIX``: the captured audio as it comes, the subtitles at the end. Both files
    are opened up front so that an unwritable path fails before capturing starts."""

    def __init__(self, prefix: str, rate: int) -> None:
        import soundfile as sf

        self.wav_path = Path(f"{prefix}.wav")
        self.srt_path = Path(f"{prefix}.srt")
        try:
            self.srt = open(self.srt_path, "w", encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"--save: cannot write {self.srt_path} ({e.strerror})") from None
        try:
            self.wav = sf.SoundFile(str(self.wav_path), "w", samplerate=rate, channels=1,
                                    subtype="PCM_16")
        except Exception as e:  # soundfile raises LibsndfileError / RuntimeError
            self.srt.close()
            raise ConfigError(f"--save: cannot write {self.wav_path} ({e})") from None

    def close(self, finals: list[Result]) -> None:
        self.wav.close()
        with self.srt:
            self.srt.write(subtitles(finals, "srt"))


@contextlib.contextmanager
def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]):
    """The first SIGINT/SIGTERM calls ``stop``; the next one acts as it normally does."""

    def on_signal() -> None:
        for sig in _STOP_SIGNALS:
            loop.remove_signal_handler(sig)
        print("streamdec: stopping: finishing the last utterance (Ctrl-C again quits at "
              "once)", file=sys.stderr, flush=True)
        stop()

    for sig in _STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal)
    try:
        yield
    finally:
        for sig in _STOP_SIGNALS:
            loop.remove_signal_handler(sig)


async def _audio(capture: Capture, recording: _Recording | None):
    """Captured blocks as (rate, samples) until the capture ends (also saved with --save)."""
    first = True
    async for samples in capture.blocks():
        if first:
            first = False
            print(f"streamdec: listening to input device {capture.device} at "
                  f"{capture.rate} Hz; Ctrl-C stops", file=sys.stderr, flush=True)
        if recording:
            recording.wav.write(samples)
        yield capture.rate, samples


async def _caption(recognizer: Recognizer, capture: Capture, show: Callable[[Result], None],
                   recording: _Recording | None, finals: list[Result],
                   text_format: str = "raw", keywords: list[str] | None = None) -> None:
    """Capture, decode and show until stopped; the finals (formatted at ``text_format``, in
    a worker thread) are appended to ``finals``; ``keywords``: spotted beside (``show``
    gets each ``KeywordEvent`` too)."""
    async def take(result: Result) -> None:
        if isinstance(result, KeywordEvent):
            show(result)
            return
        if result.is_final and text_format != "raw":
            result = await asyncio.to_thread(default_formatter().apply, result, text_format)
        show(result)
        if result.is_final:
            finals.append(result)

    loop = asyncio.get_running_loop()
    async with Engine(recognizer) as engine:
        with _stop_on_signals(loop, capture.stop):
            async with capture:
                await run_stream(engine.open(keywords=keywords), _audio(capture, recording),
                                 take)


def run(args: argparse.Namespace) -> int:
    if args.list_devices:
        for d in require_input_devices():
            print(d.describe())
        return 0
    app = app_config_from_args(args)
    if args.rate is not None:
        require_sample_rate(args.rate, "--rate")
    device = find_input_device(args.device)
    rate = args.rate or device.default_rate
    text_format = chosen_text_format(args.text_format, "full")
    default_formatter().load(text_format)
    recognizer = Recognizer(app.recognizer)
    announce_model(recognizer)
    try:
        keywords = keyword_lines(args.keywords, recognizer)
    except (ConfigError, TokenizeError) as e:
        print(f"streamdec: error: --keywords: {e}", file=sys.stderr)
        return 2
    capture = Capture(device, rate, app.audio.chunk_ms)
    recording = _Recording(args.save, rate) if args.save else None
    if args.format == "jsonl":
        def show(r: Result | KeywordEvent) -> None:
            print(keyword_json(device.name, r) if isinstance(r, KeywordEvent)
                  else event_json(device.name, r), flush=True)
    else:
        line = LiveLine(sys.stdout, times=True)

        def show(r: Result | KeywordEvent) -> None:
            if isinstance(r, KeywordEvent):
                line.note(device.name, keyword_line(r))
            else:
                line(device.name, r)

    finals: list[Result] = []
    try:
        asyncio.run(_caption(recognizer, capture, show, recording, finals, text_format,
                             keywords))
    finally:
        if recording:
            recording.close(finals)
        print(f"streamdec: {capture.summary()}", file=sys.stderr, flush=True)
    if capture.lost is not None:
        print(f"streamdec: error: {capture.lost}", file=sys.stderr)
        return 1
    return 0

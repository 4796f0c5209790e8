"""Microphone caption latency: from a word's end in the played audio to its first
appearance, whole, in ``streamdec mic``'s output.

    python bench/captions/mic_latency.py --out bench-mic.json                 # default config
    python bench/captions/mic_latency.py --out x.json -- --config low-latency # options for the mic
    python bench/captions/mic_latency.py --smoke --out /tmp/smoke.json        # one short utterance

How it measures. A private PulseAudio null sink (``null_sink.py``) plays utterances one
after another (``--pause`` seconds apart) while ``streamdec mic --format jsonl --save``
captures its monitor through the ALSA ``pulse`` device; each output line is timestamped
when it arrives (``time.monotonic``, the same clock for every process of the machine).

- Where the words end, in the captured stream's time: ``Result.words`` of ``transcribe``
  run on the saved capture (the very samples the mic decoded; the mic tests prove that
  the live decode gives the same tokens and times on them). A word's end is one encoder
  frame after the frame that emitted its last unit. The acoustic end of each utterance
  (its last sample louder than -40 dBFS in the played file, placed in the capture) is the
  second reference, free of the model's timing.
- Stream time to wall clock: the mic announces on stderr when its first block (the
  stream's first ``block`` seconds) has reached it; sample time ``t`` reaches it at
  ``listening + (t - block)``. Not included: the device's own input latency before the
  audio reaches PortAudio's callback (the sound server's buffering).
- A word appears when an event of its segment first shows it whole (its position in the
  text holds the final's word), or at the segment's final.

Report (JSON): ``word_delay`` (median, p90, max over all words, seconds),
``utterance_end_delay`` (median over utterances: acoustic end of the last word to the last
word shown), the per-utterance details, the mic's options and the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.captions.caption_delay import (machine, shown_times, summary,  # noqa: E402
                                          utterance_delay, word_delays, write_report)
from bench.captions.null_sink import NullSink, caption_playback  # noqa: E402
from streamdec import Recognizer  # noqa: E402
from streamdec.cli.options import add_recognizer_options, app_config_from_args  # noqa: E402
from streamdec.files.transcribe import transcribe_files  # noqa: E402

SENTENCES = ["please call me back tomorrow morning",
             "the meeting starts at nine thirty",
             "my account number is four five six",
             "thank you for calling have a nice day"]
LOUD = 10 ** (-40 / 20) * 32768  # -40 dBFS in 16-bit samples


def utterances(folder: Path, rate: int, smoke: bool) -> list[Path]:
    """examples/hello.wav and SENTENCES spoken by espeak-ng (``smoke``: the first sentence
    only), 16-bit at ``rate`` Hz."""
    sources = [] if smoke else [HERE.parent / "examples" / "hello.wav"]
    for n, text in enumerate(SENTENCES[:1] if smoke else SENTENCES):
        wav = folder / f"espeak{n}.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(wav), text], check=True)
        sources.append(wav)
    out = []
    for n, src in enumerate(sources):
        audio, src_rate = sf.read(str(src), dtype="float32")
        path = folder / f"utt{n}-{rate}.wav"
        sf.write(str(path), soxr.resample(audio, src_rate, rate), rate, subtype="PCM_16")
        out.append(path)
    return out


def find(haystack: np.ndarray, needle: np.ndarray, start: int, rate: int) -> int:
    """Where ``needle`` (an utterance) begins in ``haystack`` (the capture), searching from
    ``start``: its last second comes through unchanged (the sound server may cut a few
    milliseconds at the start of playback, so the start is not matched)."""
    tail = needle[-rate:]
    first = int(np.flatnonzero(tail)[0])
    for at in np.flatnonzero(haystack[start:] == tail[first]) + start - first:
        if np.array_equal(haystack[at:at + len(tail)], tail):
            return int(at) - (len(needle) - len(tail))
    raise ValueError("an utterance is missing from the capture")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON report")
    ap.add_argument("--pause", type=float, default=2.5, help="seconds between utterances")
    ap.add_argument("--smoke", action="store_true", help="one short utterance: a quick check")
    ap.add_argument("mic_options", nargs="*", help="after --: options for streamdec mic")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="streamdec-mic-latency-"))
    with NullSink(work / "pulse") as sink:
        files = utterances(work, sink.rate, args.smoke)
        run = caption_playback(sink, files, ["--format", "jsonl", "--save", str(work / "cap"),
                                             *args.mic_options], pause=args.pause,
                               tail=1.0 if args.smoke else 3.0)
    if run.returncode != 0:
        sys.exit(f"streamdec mic failed: {run.stderr_text}")
    events = [(t, json.loads(line)) for t, line in run.lines]

    # the words' times in the capture: transcribe on the saved samples, same options
    mic_parser = argparse.ArgumentParser()
    add_recognizer_options(mic_parser)  # as streamdec mic parses them
    app = app_config_from_args(mic_parser.parse_known_args(args.mic_options)[0])
    rec = Recognizer(app.recognizer)
    item = next(transcribe_files(rec, [str(work / "cap.wav")]))
    finals = [r for r in item.finals if r.words]
    live_text = [e["text"] for _, e in events if e["type"] == "final" and e["text"]]
    if live_text != [r.text for r in finals]:
        sys.exit(f"live and file finals differ: {live_text} / {[r.text for r in finals]}")

    captured, rate = sf.read(str(work / "cap.wav"), dtype="int16")
    block = app.audio.chunk_ms / 1000

    def wall(t: float) -> float:
        return run.listening_at + (t - block)

    shown = shown_times(events, finals)
    delays = word_delays(shown, finals, wall)
    per_utt = []
    at = 0
    for path in files:
        audio, _ = sf.read(str(path), dtype="int16")
        at = find(captured, audio, at, rate)
        end = (at + int(np.flatnonzero(np.abs(audio.astype(np.int32)) > LOUD)[-1]) + 1) / rate
        per_utt.append(utterance_delay(path.name, end, finals, shown, wall))
        at += len(audio)
    report = {
        "mic_options": args.mic_options, "block_seconds": block,
        "model_chunk_seconds": rec.meta.chunk_shift * rec.config.features.frame_shift_ms / 1000,
        **summary(delays, per_utt),
        "utterances": per_utt,
        "mic_summary": run.stderr_text.strip().splitlines()[-1],
        "machine": machine(),
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()

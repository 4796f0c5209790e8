"""Browser caption latency: from a word's end in the played audio to its first appearance,
whole, on the captioning page (``streamdec serve`` at ``/``).

    python bench/captions/web_latency.py --out bench/results/2026-11-30-captions-latency/web-latency.json     # built-in settings
    python bench/captions/web_latency.py --out x.json -- --config low-latency     # options for serve
    python bench/captions/web_latency.py --smoke --out /tmp/smoke.json            # one short utterance
    python bench/captions/web_latency.py --out x.json --screenshot page.png       # and a screenshot

How it measures. ``streamdec serve`` runs on loopback; Debian's Chromium opens the page
with a fake microphone that plays the utterances of ``mic_latency.py`` (``--pause``
seconds apart, 16-bit at 44.1 kHz, the fake device's rate) in real time; the page is
started and, once the whole file has been sent, stopped. ``caption_page.TAP`` records in
the page, on its clock (``performance.now()``), when each audio message was sent and when
each caption change was first drawn (the animation frame that shows it).

- Where the words end, in the stream's time: ``Result.words`` of ``transcribe`` run on the
  samples the page sent (the page tests prove that the page shows the very same finals and
  times on them). A word's end is one encoder frame after the frame that emitted its last
  unit. The acoustic end of each utterance (its last sample louder than -40 dBFS in the
  played file, placed in the sent audio) is the second reference, free of the model's
  timing.
- Stream time to the page's clock: the audio arrives in real time, so message k (ending at
  sample n_k) cannot be sent before ``t0 + n_k / rate``; t0 is the smallest
  ``sent_k - n_k / rate`` over the session (the earliest any message came, relative to its
  audio). Not included: the capture device's own latency and the least delay from the
  device to the page's script (a few milliseconds).
- A word appears when a caption change of its segment first shows it whole (its position
  in the partial line holds the final's word), or with the segment's final line.

Report (JSON): ``word_delay`` (median, p90, max over all words, seconds),
``utterance_end_delay_median`` (acoustic end of the last word to the last word shown),
``send_lag`` (how much later than the earliest the page's audio messages went out), the
per-utterance details, the serve options, the browser and the machine.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.captions.caption_page import (CAPTURE_RATE, CHROMIUM, caption_events,  # noqa: E402
                                         launch, open_page, send_times, sent_audio, to_int16,
                                         wait_until_sent)
from bench.daemon.servers import free_port, serve_streamdec  # noqa: E402
from bench.captions.caption_delay import (machine, shown_times, summary,  # noqa: E402
                                          utterance_delay, word_delays, write_report)
from bench.captions.mic_latency import LOUD, utterances  # noqa: E402
from streamdec import Recognizer  # noqa: E402
from streamdec.cli.options import add_recognizer_options, app_config_from_args  # noqa: E402
from streamdec.files.transcribe import transcribe_files  # noqa: E402

LEAD_IN, TAIL = 1.0, 3.0  # seconds of silence around the utterances in the played file


def played_file(files: list[Path], pause: float, path: Path) -> list[tuple[int, int]]:
    """The utterances in one file, ``pause`` s apart, after LEAD_IN and before TAIL seconds
    of silence; returns each one's (first sample, acoustic end) in that file."""
    parts = [np.zeros(int(LEAD_IN * CAPTURE_RATE), np.int16)]
    at, spans = len(parts[0]), []
    for n, f in enumerate(files):
        audio, rate = sf.read(str(f), dtype="int16")
        assert rate == CAPTURE_RATE
        loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > LOUD)
        spans.append((at, at + int(loud[-1]) + 1))
        gap = np.zeros(int((pause if n + 1 < len(files) else TAIL) * CAPTURE_RATE), np.int16)
        parts += [audio, gap]
        at += len(audio) + len(gap)
    sf.write(str(path), np.concatenate(parts), CAPTURE_RATE, subtype="PCM_16")
    return spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON report")
    ap.add_argument("--pause", type=float, default=2.5, help="seconds between utterances")
    ap.add_argument("--smoke", action="store_true", help="one short utterance: a quick check")
    ap.add_argument("--screenshot", help="PNG of the page while the last utterance is shown")
    ap.add_argument("serve_options", nargs="*", help="after --: options for streamdec serve")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="streamdec-web-latency-"))
    files = utterances(work, CAPTURE_RATE, args.smoke)
    played = work / "played.wav"
    spans = played_file(files, args.pause, played)
    file_audio, _ = sf.read(str(played), dtype="int16")

    port = free_port()
    # greedy unless the options say otherwise: the page's latency, not the search's cost
    options = ["--search", "greedy", *args.serve_options]
    server, _ = serve_streamdec(port, options)
    try:
        with sync_playwright() as p:
            browser = launch(p, str(played))
            # raw finals: their words are the recogniser's, matched one for one below
            page = open_page(browser, f"http://127.0.0.1:{port}/?text_format=raw",
                             viewport={"width": 800, "height": 450})
            page.click("#toggle")
            page.wait_for_selector('#status[data-state="listening"]', timeout=30_000)
            if args.screenshot:
                first, end = spans[-1]
                wait_until_sent(page, (first + end) // 2, timeout=300)
                page.screenshot(path=args.screenshot)
            wait_until_sent(page, len(file_audio) - CAPTURE_RATE, timeout=300)
            page.click("#toggle")
            page.wait_for_selector('#status[data-state="stopped"]', timeout=60_000)
            sent, sends, events = sent_audio(page), send_times(page), caption_events(page)
            browser_version = browser.version
            browser.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)

    # the words' times in the stream: transcribe on the sent samples, same options
    parser = argparse.ArgumentParser()
    add_recognizer_options(parser)
    app = app_config_from_args(parser.parse_known_args(options)[0])
    rec = Recognizer(app.recognizer)
    path = work / "sent.wav"
    sf.write(str(path), sent, CAPTURE_RATE, subtype="FLOAT")
    finals = [r for r in next(transcribe_files(rec, [str(path)])).finals if r.words]
    shown_finals = [e["text"] for _, e in events if e["type"] == "final"]
    if shown_finals != [r.text for r in finals]:
        sys.exit(f"page and file finals differ: {shown_finals} / {[r.text for r in finals]}")

    lags = [t - n / CAPTURE_RATE for t, n in sends]
    t0 = min(lags)

    def wall(seconds: float) -> float:
        return t0 + seconds

    shown = shown_times(events, finals)
    delays = word_delays(shown, finals, wall)
    # file sample i is sent sample i + shift
    shift = int(np.flatnonzero(to_int16(sent))[0] - np.flatnonzero(file_audio)[0])
    per_utt = [utterance_delay(f.name, (end + shift) / CAPTURE_RATE, finals, shown, wall)
               for f, (_, end) in zip(files, spans)]
    report = {
        "serve_options": args.serve_options,
        # the page's audio per message
        "block_seconds": round(statistics.median(np.diff([n for _, n in sends])) / CAPTURE_RATE,
                               3),
        "model_chunk_seconds": rec.meta.chunk_shift * rec.config.features.frame_shift_ms / 1000,
        "capture_rate": CAPTURE_RATE,
        # how long after the earliest each audio message was sent (the page's own jitter)
        "send_lag": {"median": round(statistics.median(lags) - t0, 3),
                     "max": round(max(lags) - t0, 3)},
        **summary(delays, per_utt),
        "utterances": per_utt,
        "browser": f"{CHROMIUM} {browser_version} (headless, Playwright)",
        "machine": machine(),
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()

"""What voice activity detection costs and saves: encoder CPU on a two-channel call, WER
with and without it, and the VAD network's own cost per stream.

    python bench/decode/vad.py --out bench/results/2026-12-01-vad/vad.json [--utterances 40] [--model-dir DIR]

The call: dev-set utterances (bench/common/devset.py's espeak set) as turns alternating between
two channels with 0.3-0.8 s gaps, so each channel is silent while the other speaks
(about half of each channel is silence). Both channels are decoded together as two
streams, all audio given at once, with and without the VAD. CPU is measured as
``time.process_time`` (CPU seconds of this process, not wall time: the machine may be
shared); the encoder's and the VAD network's shares are timed around their calls.
WER is measured on the call channels (each channel's finals against its turns' texts)
and on the dev utterances as they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common.devset import dev_set, error_rates  # noqa: E402

from streamdec import Recognizer  # noqa: E402
from streamdec.models import ModelConfig  # noqa: E402
from streamdec.core.recognizer import RecognizerConfig  # noqa: E402


class Timer:
    """CPU seconds spent inside ``obj.name`` calls (and how many rows they were given)."""

    def __init__(self, obj, name: str) -> None:
        self.obj, self.name, self.seconds, self.rows = obj, name, 0.0, 0
        self.inner = getattr(obj, name)

        def timed(x, *args):
            t = time.process_time()
            try:
                return self.inner(x, *args)
            finally:
                self.seconds += time.process_time() - t
                self.rows += len(x)

        setattr(obj, name, timed)

    def reset(self) -> None:
        self.seconds, self.rows = 0.0, 0


def call_channels(utts, seed: int = 0):
    """Two channels taking turns: (audio per channel, reference text per channel)."""
    rng = np.random.default_rng(seed)
    rate = utts[0].rate
    chans: list[list[np.ndarray]] = [[], []]
    texts: list[list[str]] = [[], []]
    for i, u in enumerate(utts):
        speaker = i % 2
        gap = np.zeros(int(rng.uniform(0.3, 0.8) * rate), np.float32)
        for c in (0, 1):
            chans[c].append(gap)
            chans[c].append(u.samples if c == speaker else np.zeros_like(u.samples))
        texts[speaker].append(u.text)
    return [np.concatenate(c) for c in chans], [" ".join(t) for t in texts], rate


def decode(rec: Recognizer, audios, rate: int, vad: bool, batch: int = 16) -> tuple[list, float]:
    """Finals' texts per audio and the decode's CPU seconds (all audio given at once)."""
    texts = []
    cpu = 0.0
    for i in range(0, len(audios), batch):
        group = audios[i:i + batch]
        streams = [rec.create_stream(vad=vad) for _ in group]
        t = time.process_time()
        for s, a in zip(streams, group):
            s.accept_waveform(rate, a)
            s.input_finished()
        while any(rec.is_ready(s) for s in streams):
            rec.decode(streams)
        cpu += time.process_time() - t
        texts += [" ".join(e.text for e in s.pop_events() if e.is_final and e.text)
                  for s in streams]
    return texts, cpu


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--utterances", type=int, default=40, help="dev utterances (turns)")
    p.add_argument("--model-dir", default=None, help="a model directory (default built-in)")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (min taken)")
    args = p.parse_args(argv)

    model = ModelConfig() if args.model_dir is None else ModelConfig(model_dir=args.model_dir)
    rec = Recognizer(RecognizerConfig(model=model))
    encoder = Timer(rec.model, "encode")
    network = Timer(rec.vad_gate.model, "score")
    utts = dev_set("espeak", args.utterances)
    audios, refs, rate = call_channels(utts)
    seconds = sum(len(a) for a in audios) / rate
    zero = sum(int(np.count_nonzero(a == 0)) for a in audios) / rate

    call = {}
    for vad in (False, True):
        best = None
        for _ in range(args.repeat):
            encoder.reset()
            network.reset()
            texts, cpu = decode(rec, audios, rate, vad, batch=2)
            run = {"decode_cpu_s": round(cpu, 4), "encoder_cpu_s": round(encoder.seconds, 4),
                   "encoder_chunks": encoder.rows, "vad_network_cpu_s": round(network.seconds, 4)}
            if best is None or run["decode_cpu_s"] < best["decode_cpu_s"]:
                best = run
        best["wer"] = round(error_rates({str(c): r for c, r in enumerate(refs)},
                                        {str(c): t for c, t in enumerate(texts)})["wer"], 4)
        call["vad" if vad else "no_vad"] = best
    on, off = call["vad"], call["no_vad"]
    def ratio(a: float, b: float) -> float:
        return round(a / max(b, 1e-9), 3)

    call["ratios"] = {
        "encoder_cpu_no_vad_over_vad": ratio(off["encoder_cpu_s"], on["encoder_cpu_s"]),
        "decode_cpu_no_vad_over_vad": ratio(off["decode_cpu_s"], on["decode_cpu_s"]),
        "encoder_chunks_vad_over_no_vad": ratio(on["encoder_chunks"], off["encoder_chunks"])}

    dev = {}
    refs_dev = {u.utt: u.text for u in utts}
    for vad in (False, True):
        texts, _ = decode(rec, [u.samples for u in utts], utts[0].rate, vad)
        dev["vad" if vad else "no_vad"] = round(error_rates(
            refs_dev, {u.utt: t for u, t in zip(utts, texts)})["wer"], 4)

    # the VAD network alone: CPU ms per second of audio per stream, scored as a live decode
    # does (one encoder chunk of audio per stream and call), 1, 2 and 16 streams together
    cost = {}
    piece = rec.meta.chunk_shift * rec.config.features.frame_shift_samples
    for streams in (1, 2, 16):
        group = (audios * streams)[:streams]
        network.reset()
        states = [rec.vad_gate.initial() for _ in group]
        for i in range(0, len(group[0]) // piece * piece, piece):
            states = rec.vad_gate.run(states, [a[i:i + piece] for a in group],
                                      [False] * streams)
        cost[str(streams)] = round(1000 * network.seconds / (seconds / 2 * streams), 3)

    report = {
        "setup": {"utterances": len(utts), "channels": 2, "channel_seconds": round(seconds / 2, 2),
                  "silent_fraction": round(zero / seconds, 3),
                  "model": args.model_dir or "built-in", "vad": dataclasses.asdict(rec.config.vad),
                  "chunk_seconds": rec.meta.chunk_shift * rec.config.features.frame_shift_ms / 1000,
                  "repeat": args.repeat, "measure": "time.process_time (CPU seconds)"},
        "call": call,
        "dev_wer": dev,
        "vad_network_ms_per_audio_second": cost,
        "machine": {"cpu": platform.processor() or platform.machine(),
                    "python": platform.python_version()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

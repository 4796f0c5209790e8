"""streamdec's fbank against kaldi-native-fbank's, the C++ extractor sherpa-onnx computes
features with (its server computes each stream's frames as its audio arrives), on the same
live streams, A/B alternated in one process:

- ``streamdec``: each stream a ``StreamingFeatures``, audio accepted message by message,
  the frames of every stream whose model chunk became whole computed together
  (``compute_ready_together``), as the server's event loop does;
- ``kaldi_native_fbank``: each stream a ``kaldi_native_fbank.OnlineFbank`` fed the same
  messages; its frames are computed inside ``accept_waveform`` (C++): that time is
  ``compute`` (what a C++ server pays), ``compute`` plus reading each frame into Python is
  ``compute_and_read``.

``--streams K`` streams at a time, each dev utterance streamed in ``--message-ms`` messages
(one message per stream per round). Reports microseconds of thread CPU per feature frame
(median and min/max over ``--runs``), ``ratio`` (kaldi-native-fbank's compute / streamdec's:
> 1 when streamdec's is cheaper), and how far apart the two features are (the largest
absolute difference over every frame; their frame counts are equal).

    python bench/decode/fbank.py --streams 1,16 --seconds 120 --runs 5 --out fbank.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: bench, streamdec

from bench.common.abtest import (alternate, bench_parser, load_average, machine, main, print_table,
                                 ratio, spread, workload)
from streamdec import allocator
from streamdec.audio.features import FeatureConfig, StreamingFeatures, compute_ready_together
from streamdec.audio.fbank import fbank_options


def messages(samples: np.ndarray, size: int) -> list[np.ndarray]:
    return [samples[a:a + size] for a in range(0, len(samples), size)]


def groups(utts, k: int):
    for a in range(0, len(utts), k):
        yield utts[a:a + k]


def ours(utts, k: int, size: int, chunk: int, keep: bool = False):
    """Thread seconds and frames (and the frames themselves with ``keep``)."""
    config = FeatureConfig()
    seconds, frames, kept = 0.0, 0, []
    for group in groups(utts, k):
        pieces = [messages(u.samples, size) for u in group]
        streams = [StreamingFeatures(config) for _ in group]
        whole = [chunk] * len(group)  # the frame count that makes each stream's next chunk
        began = time.thread_time()
        for r in range(max(len(p) for p in pieces)):
            ready = []
            for n, (f, p) in enumerate(zip(streams, pieces)):
                if r < len(p):
                    f.accept_waveform(16000, p[r])
                if f.num_frames_ready >= whole[n]:  # a chunk became whole
                    ready.append(f)
                    whole[n] = f.num_frames_ready + chunk
            compute_ready_together(ready)
        for f in streams:
            f.input_finished()
        compute_ready_together(streams)
        seconds += time.thread_time() - began
        frames += sum(f.num_frames_ready for f in streams)
        if keep:
            kept += [f.frames(0, f.num_frames_ready).copy() for f in streams]
    return seconds, frames, kept


def theirs(utts, k: int, size: int, read: bool, keep: bool = False):
    """Thread seconds (accepting: the C++ computes; with ``read`` also reading the frames)
    and frames (and the frames with ``keep``)."""
    import kaldi_native_fbank as knf

    opts = fbank_options(FeatureConfig())
    seconds, frames, kept = 0.0, 0, []
    for group in groups(utts, k):
        pieces = [messages(u.samples, size) for u in group]
        streams = [knf.OnlineFbank(opts) for _ in group]
        taken = [0] * len(group)
        began = time.thread_time()
        for r in range(max(len(p) for p in pieces) + 1):
            for n, (f, p) in enumerate(zip(streams, pieces)):
                if r < len(p):
                    f.accept_waveform(16000, p[r])
                elif r == len(p):
                    f.input_finished()
                if read:
                    while taken[n] < f.num_frames_ready:
                        f.get_frame(taken[n])
                        taken[n] += 1
        seconds += time.thread_time() - began
        frames += sum(f.num_frames_ready for f in streams)
        if keep:
            kept += [np.array([f.get_frame(i) for i in range(f.num_frames_ready)], np.float32)
                     for f in streams]
    return seconds, frames, kept


def measure(args) -> dict:
    allocator.configure()  # the server's allocator settings (streamdec.allocator)
    load_before = load_average()
    utts = workload(args.dev, args.seconds)
    size = int(16000 * args.message_ms / 1000)
    _, n_ours, a = ours(utts, 1, size, args.chunk_frames, keep=True)
    _, n_theirs, b = theirs(utts, 1, size, False, keep=True)
    assert n_ours == n_theirs and [len(x) for x in a] == [len(x) for x in b], \
        "the two extractors made different frame counts"
    report = {"setup": {"benchmark": "fbank", "dev": args.dev, "utterances": len(utts),
                        "audio_seconds": round(sum(u.seconds for u in utts), 2),
                        "frames": n_ours, "message_ms": args.message_ms,
                        "chunk_frames": args.chunk_frames, "runs": args.runs,
                        "unit": "us of thread CPU per feature frame"},
              "max_abs_difference": float(max(np.abs(x - y).max() for x, y in zip(a, b))),
              "configurations": []}
    rows = []
    for k in args.streams:
        def per_frame(run):
            seconds, frames, _ = run()
            return seconds / frames * 1e6

        a, c, cr = alternate(
            args.runs,
            lambda: per_frame(lambda: ours(utts, k, size, args.chunk_frames)),
            lambda: per_frame(lambda: theirs(utts, k, size, False)),
            lambda: per_frame(lambda: theirs(utts, k, size, True)))
        conf = {"streams": k, "streamdec": spread(a, 3),
                "kaldi_native_fbank": {"compute": spread(c, 3), "compute_and_read": spread(cr, 3)}}
        conf["ratio"] = ratio(conf["streamdec"]["median"],
                              conf["kaldi_native_fbank"]["compute"]["median"], False)
        report["configurations"].append(conf)
        rows.append([k, conf["streamdec"]["median"],
                     conf["kaldi_native_fbank"]["compute"]["median"],
                     conf["kaldi_native_fbank"]["compute_and_read"]["median"], conf["ratio"]])
    report["machine"] = machine(load_before)
    print_table(["K", "streamdec us/frame", "knf compute", "knf compute+read", "ratio"], rows)
    return report


def parser():
    ap = bench_parser(__doc__, "1,16", 60, 5)
    ap.add_argument("--message-ms", type=float, default=100, help="audio per message")
    ap.add_argument("--chunk-frames", type=int, default=32,
                    help="frames per model chunk: a stream's frames are computed when this "
                         "many are ready (the built-in model's chunk)")
    return ap


if __name__ == "__main__":
    main(parser(), measure)

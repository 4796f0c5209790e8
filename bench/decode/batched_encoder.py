"""Encoder cost per stream of a model exported with a fixed batch of 1: its streams run one
call each (the original graph, as before) against one call for all of them (the graph
``streamdec.models.dynamic_batch`` rewrites to take any batch), A/B alternated in the same
run.

    python bench/decode/batched_encoder.py --out batched-encoder.json \\
        --model-dir ../shared/models/kws-zipformer-gigaspeech-3.3M-mobile

Each row of a batch is a real chunk: the inputs (fbank frames and carried states) of the
encoder calls made while streamdec decodes the real dev set's 16 kHz utterances one at a
time (``bench/accuracy/realvoice.py``), taken in turn, so the streams of a batch are at
different points of different utterances. Both sessions are streamdec's own, as it loads
them (``ModelConfig`` defaults, ``--threads`` intra-op threads). For each batch size K
(``--streams``) a run times ``--repeats`` encodes of the K rows each way; the report gives,
per K, milliseconds per stream per chunk (median, min, max over ``--runs``) for
``one_at_a_time``, ``batched`` (one call of the batched graph for all K) and ``streamdec``
(``model.encode`` on the K rows: the batched graph in calls of at most ``BATCHED_UP_TO``
streams from ``BATCHED_FROM`` on, one call each below), wall (``ms_per_stream_chunk``) and
CPU time of the process (``cpu_ms_per_stream_chunk``: on a machine shared with other work
it varies less; with one thread they measure the same thing), their ratios to one call
each (``ratio_*``, ``cpu_ratio_*``; > 1: costs less), and ``identical_rows`` and
``identical_rows_streamdec``: how many of the K rows got from the batched call, and from
``model.encode``, exactly (bit for bit) the outputs and next states the original graph
gives them alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import (alternate, int_list, load_average, machine,  # noqa: E402
                                 print_table, ratio, spread, write_report)
from bench.common.peer import add_model_options, model_config, model_report  # noqa: E402


class _Recording:
    """An encoder session that keeps each call's inputs."""

    def __init__(self, session) -> None:
        self.session = session
        self.calls: list[list[np.ndarray]] = []

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, names, feeds):
        self.calls.append([np.array(v) for v in feeds.values()])
        return self.session.run(names, feeds)


def real_rows(rec, count: int) -> list[list[np.ndarray]]:
    """``count`` encoder inputs of one stream each, from decoding the real dev set's 16 kHz
    utterances alone, taken in turn across utterances (repeated when there are fewer)."""
    from bench.accuracy.realvoice import real_dev_set
    from streamdec.core.drive import decode_audio

    original = rec.model.encoder
    per_utt = []
    try:
        for utt in real_dev_set():
            if utt.rate != 16000:
                continue
            rec.model.encoder = recording = _Recording(original)
            decode_audio(rec, rec.create_stream(), utt.rate, [utt.samples])
            per_utt.append(recording.calls)
    finally:
        rec.model.encoder = original
    interleaved = [c for i in range(max(map(len, per_utt)))
                   for calls in per_utt if i < len(calls) for c in calls[i:i + 1]]
    return [interleaved[i % len(interleaved)] for i in range(count)]


def measure(args: argparse.Namespace) -> dict:
    from streamdec import EndpointConfig, Recognizer, RecognizerConfig

    load_before = load_average()
    rec = Recognizer(RecognizerConfig(model=model_config(args, threads=args.threads),
                                      endpoint=EndpointConfig(enabled=False)))
    original, batched = rec.model.encoder, rec.model.batched_encoder
    if batched is None:
        raise SystemExit("this model has no batched encoder (its batch is not fixed at 1, or "
                         "the rewrite refused it: see the debug log)")
    names = [i.name for i in original.get_inputs()]
    axes = [0] + [s.batch_axis for s in rec.model.state_layout.specs]
    rows = real_rows(rec, max(args.streams))
    configurations = []
    for k in args.streams:
        feeds_each = [dict(zip(names, row)) for row in rows[:k]]
        feeds_all = {n: np.concatenate([row[j] for row in rows[:k]], axis=axes[j])
                     for j, n in enumerate(names)}
        states_all = [feeds_all[n] for n in names[1:]]
        alone = [original.run(None, f) for f in feeds_each]
        together = batched.run(None, feeds_all)
        identical = sum(all(np.array_equal(np.take(o, [i], axis=axes[j]), alone[i][j])
                            for j, o in enumerate(together)) for i in range(k))
        out, states = rec.model.encode(feeds_all[names[0]], states_all)
        identical_encode = sum(all(np.array_equal(np.take(o, [i], axis=axes[j]), alone[i][j])
                                   for j, o in enumerate([out, *states])) for i in range(k))

        def timed(run) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.repeats):
                run()
            calls = args.repeats * k
            return ((time.perf_counter() - wall) * 1000 / calls,
                    (time.process_time() - cpu) * 1000 / calls)

        def one_at_a_time() -> tuple[float, float]:
            return timed(lambda: [original.run(None, f) for f in feeds_each])

        def all_at_once() -> tuple[float, float]:
            return timed(lambda: batched.run(None, feeds_all))

        def as_streamdec_runs_it() -> tuple[float, float]:
            return timed(lambda: rec.model.encode(feeds_all[names[0]], states_all))

        a, b, c = alternate(args.runs, one_at_a_time, all_at_once, as_streamdec_runs_it)
        conf = {"streams": k, "threads": args.threads, "identical_rows": identical,
                "identical_rows_streamdec": identical_encode}
        for n, key in enumerate(("ms_per_stream_chunk", "cpu_ms_per_stream_chunk")):
            one = spread([x[n] for x in a])
            conf[key] = {"one_at_a_time": one, "batched": spread([x[n] for x in b]),
                         "streamdec": spread([x[n] for x in c])}
            for way in ("batched", "streamdec"):
                conf[key.replace("ms_per_stream_chunk", f"ratio_{way}")] = ratio(
                    conf[key][way]["median"], one["median"], higher_is_better=False)
        configurations.append(conf)
    print_table(["streams", "CPU ms one at a time", "batched", "streamdec", "ratio batched",
                 "ratio streamdec", "identical rows"],
                [[c["streams"], c["cpu_ms_per_stream_chunk"]["one_at_a_time"]["median"],
                  c["cpu_ms_per_stream_chunk"]["batched"]["median"],
                  c["cpu_ms_per_stream_chunk"]["streamdec"]["median"], c["cpu_ratio_batched"],
                  c["cpu_ratio_streamdec"],
                  f"{c['identical_rows']}+{c['identical_rows_streamdec']}/{2 * c['streams']}"]
                 for c in configurations])
    return {"setup": {"benchmark": "batched_encoder",
                      "model": model_report(rec.model_files, args.int8),
                      "runs": args.runs, "repeats": args.repeats,
                      "rows": "real dev set chunks (16 kHz utterances), taken in turn"},
            "configurations": configurations, "machine": machine(load_before)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="JSON report to write")
    p.add_argument("--streams", type=int_list, default=int_list("1,10,50"),
                   help="batch sizes K, comma-separated (default 1,10,50)")
    p.add_argument("--runs", type=int, default=9, help="A/B alternated runs (default 9)")
    p.add_argument("--repeats", type=int, default=3,
                   help="encodes of the K rows each way per run (default 3)")
    p.add_argument("--threads", type=int, default=1,
                   help="ONNX Runtime intra-op threads (default 1)")
    add_model_options(p)
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    write_report(a.out, measure(a))

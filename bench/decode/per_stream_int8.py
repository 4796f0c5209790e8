"""What it costs that each stream's rows are quantized alone, for int8 networks exported
with a dynamic batch (their ``DynamicQuantizeLinear`` scaling a whole batch at once), A/B
alternated in the same run.

    python bench/decode/per_stream_int8.py --out per-stream-int8.json \\
        --model-dir ../shared/models/kws-zipformer-gigaspeech-3.3M-mobile --int8

*The joiner* (``configurations``): the published graph called once for a batch (each row's
logits depending on its batch mates), the graph streamdec loads (each row quantized with
its own scale, ``streamdec.models.dynamic_batch.per_stream_quantization``) called once for
the batch (streamdec sends a call of one row to the published graph instead: the same
numbers), and the published graph called once per row (what streamdec runs where that
rewrite is refused or rewrites are off).

Each row is real: the (encoder frame, decoder output) pairs the joiner is given while
streamdec decodes the real dev set's 16 kHz utterances alone with greedy search
(``bench/accuracy/realvoice.py``), taken in turn across utterances. All three sessions
use streamdec's session options (``ModelConfig`` defaults, ``--threads`` intra-op threads).
For each batch size K (``--rows``) a run times ``--repeats`` joins of the K rows each way;
the report gives, per K, microseconds per row (median, min, max over ``--runs``), wall
(``us_per_row``) and CPU time of the process (``cpu_us_per_row``), the ratios of each way
to the published graph's one call (``cpu_ratio_*``; > 1: costs less), and
``identical_rows``: how many of the K rows got from one call of streamdec's graph exactly
(bit for bit) what the published graph gives them alone, and ``identical_rows_published``:
the same for one call of the published graph.

*The whole decode* (``decodes``): the real dev set's 16 kHz utterances decoded K at a time
(``--decode-streams``; ``bench/decode/batch_decode.py``'s continuous batching, the default
search) by streamdec as it loads the files, against the same recognizer with its networks
as published (streamdec's other rewrites kept) and each batch in one call, rows depending
on their batch mates (streamdec before 2026-12-07); CPU seconds of the process per second
of audio (median, min, max over ``--decode-runs``), their ratio (> 1: streamdec costs
less), and ``rows_alone``: which networks streamdec runs one row per call.
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
    """A model's ``join``, keeping each call's inputs."""

    def __init__(self, model) -> None:
        self.join = model.join
        self.rows: list[list[np.ndarray]] = []

    def __call__(self, encoder_out, decoder_out):
        self.rows.append([np.array(encoder_out), np.array(decoder_out)])
        return self.join(encoder_out, decoder_out)


def real_rows(rec, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` joiner input rows from decoding the real dev set's 16 kHz utterances alone
    (greedy), taken in turn across utterances (repeated when there are fewer)."""
    from bench.accuracy.realvoice import real_dev_set
    from streamdec.core.drive import decode_audio

    per_utt = []
    try:
        for utt in real_dev_set():
            if utt.rate != 16000:
                continue
            rec.model.join = recording = _Recording(rec.model)
            decode_audio(rec, rec.create_stream(), utt.rate, [utt.samples])
            del rec.model.join
            per_utt.append([(e[i], d[i]) for e, d in recording.rows for i in range(len(e))])
    finally:
        rec.model.__dict__.pop("join", None)
    interleaved = [r for i in range(max(map(len, per_utt)))
                   for rows in per_utt if i < len(rows) for r in rows[i:i + 1]]
    picked = [interleaved[i % len(interleaved)] for i in range(count)]
    return np.stack([e for e, _ in picked]), np.stack([d for _, d in picked])


def measure(args: argparse.Namespace) -> dict:
    import onnxruntime as ort

    from streamdec import EndpointConfig, Recognizer, RecognizerConfig
    from streamdec.models.onnx_backend import _session_options

    load_before = load_average()
    config = model_config(args, threads=args.threads)
    rec = Recognizer(RecognizerConfig(model=config, endpoint=EndpointConfig(enabled=False)))
    ours = rec.model.joiner
    if rec.model._one_at_a_time[2]:
        raise SystemExit("this joiner runs one row per call (see the log): nothing to compare")
    decodes = [_decode_costs(args, rec, config, k) for k in args.decode_streams]
    published = ort.InferenceSession(str(rec.model_files.joiner),
                                     sess_options=_session_options(config),
                                     providers=["CPUExecutionProvider"])
    names = [i.name for i in published.get_inputs()]
    enc, dec = real_rows(rec, max(args.rows))
    configurations = []
    for k in args.rows:
        feeds = dict(zip(names, (enc[:k], dec[:k])))
        each = [dict(zip(names, (enc[i:i + 1], dec[i:i + 1]))) for i in range(k)]
        alone = [published.run(None, f)[0] for f in each]
        mine, theirs = ours.run(None, feeds)[0], published.run(None, feeds)[0]
        identical = sum(np.array_equal(mine[i:i + 1], alone[i]) for i in range(k))
        identical_published = sum(np.array_equal(theirs[i:i + 1], alone[i]) for i in range(k))

        def timed(run) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(args.repeats):
                run()
            rows = args.repeats * k
            return ((time.perf_counter() - wall) * 1e6 / rows,
                    (time.process_time() - cpu) * 1e6 / rows)

        def published_batched() -> tuple[float, float]:
            return timed(lambda: published.run(None, feeds))

        def per_stream() -> tuple[float, float]:
            return timed(lambda: ours.run(None, feeds))

        def row_per_call() -> tuple[float, float]:
            return timed(lambda: [published.run(None, f) for f in each])

        a, b, c = alternate(args.runs, published_batched, per_stream, row_per_call)
        conf = {"rows": k, "threads": args.threads, "identical_rows": identical,
                "identical_rows_published": identical_published}
        for n, key in enumerate(("us_per_row", "cpu_us_per_row")):
            base = spread([x[n] for x in a], 3)
            conf[key] = {"published_batched": base, "per_stream": spread([x[n] for x in b], 3),
                         "row_per_call": spread([x[n] for x in c], 3)}
            for way in ("per_stream", "row_per_call"):
                conf[key.replace("us_per_row", f"ratio_{way}")] = ratio(
                    conf[key][way]["median"], base["median"], higher_is_better=False)
        configurations.append(conf)
    print_table(["rows", "CPU us/row published", "per stream", "row per call",
                 "ratio per stream", "ratio row per call", "identical rows ours/published"],
                [[c["rows"], c["cpu_us_per_row"]["published_batched"]["median"],
                  c["cpu_us_per_row"]["per_stream"]["median"],
                  c["cpu_us_per_row"]["row_per_call"]["median"], c["cpu_ratio_per_stream"],
                  c["cpu_ratio_row_per_call"],
                  f"{c['identical_rows']}/{c['identical_rows_published']} of {c['rows']}"]
                 for c in configurations])
    print_table(["streams", "CPU s per audio s, streamdec", "as published", "ratio",
                 "rows alone"],
                [[d["streams"], d["cpu_per_audio_second"]["streamdec"]["median"],
                  d["cpu_per_audio_second"]["as_published"]["median"], d["cpu_ratio"],
                  ",".join(d["rows_alone"]) or "-"] for d in decodes])
    return {"setup": {"benchmark": "per_stream_int8",
                      "model": model_report(rec.model_files, args.int8),
                      "runs": args.runs, "repeats": args.repeats,
                      "rows": "real dev set joiner inputs (16 kHz utterances, greedy), "
                              "taken in turn"},
            "configurations": configurations, "decodes": decodes,
            "machine": machine(load_before)}


def _as_published(config):
    """A recognizer on ``config``'s files whose networks run as published (streamdec's
    other rewrites kept, no per-stream quantization), a batch in one call (one stream per
    call only for an encoder whose batch is fixed at 1, through its batched graph from
    ``BATCHED_FROM`` streams)."""
    from streamdec import EndpointConfig, Recognizer, RecognizerConfig
    from streamdec.models.onnx_backend import _fixed_batch, open_session

    rec = Recognizer(RecognizerConfig(model=config, endpoint=EndpointConfig(enabled=False)))
    model = rec.model
    for role in ("encoder", "decoder", "joiner"):
        setattr(model, role, open_session(getattr(model.files, role), config))
    model._one_at_a_time = tuple(_fixed_batch(getattr(model, role), getattr(model.files, role))
                                 for role in ("encoder", "decoder", "joiner"))
    model._one_row = (None, None, None)
    return rec


def _decode_costs(args: argparse.Namespace, rec, config, k: int) -> dict:
    from bench.accuracy.realvoice import real_dev_set
    from bench.decode.batch_decode import decode_streamdec
    from streamdec.search import SearchConfig

    utts = [u for u in real_dev_set() if u.rate == 16000]
    audio = sum(len(u.samples) for u in utts) / 16000
    published = _as_published(config)
    search = SearchConfig()

    def way(r):
        return lambda: decode_streamdec(r, utts, k, search).cpu_seconds / audio

    ours, theirs = alternate(args.decode_runs, way(rec), way(published))
    mine, base = spread(ours), spread(theirs)
    return {"streams": k, "search": search.method, "audio_seconds": round(audio, 2),
            "cpu_per_audio_second": {"streamdec": mine, "as_published": base},
            "cpu_ratio": ratio(mine["median"], base["median"], higher_is_better=False),
            "rows_alone": _rows_alone(rec)}


def _rows_alone(rec) -> list[str]:
    """The networks ``rec`` runs one row per call for their quantization (not for a batch
    fixed at 1)."""
    from streamdec.models.onnx_backend import _fixed_batch

    model = rec.model
    return [role for role, alone in zip(("encoder", "decoder", "joiner"), model._one_at_a_time)
            if alone and not _fixed_batch(getattr(model, role), getattr(model.files, role))]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="JSON report to write")
    p.add_argument("--rows", type=int_list, default=int_list("1,8,32,128"),
                   help="batch sizes K, comma-separated (default 1,8,32,128)")
    p.add_argument("--runs", type=int, default=21, help="A/B alternated runs (default 21)")
    p.add_argument("--repeats", type=int, default=50,
                   help="joins of the K rows each way per run (default 50)")
    p.add_argument("--decode-streams", type=int_list, default=int_list("1,8"),
                   help="streams decoded together, comma-separated (default 1,8)")
    p.add_argument("--decode-runs", type=int, default=5,
                   help="A/B alternated whole decodes (default 5)")
    p.add_argument("--threads", type=int, default=1,
                   help="ONNX Runtime intra-op threads (default 1)")
    add_model_options(p)
    return p


if __name__ == "__main__":
    a = parser().parse_args()
    write_report(a.out, measure(a))

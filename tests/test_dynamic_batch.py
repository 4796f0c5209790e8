"""The real model's int8 encoder (exported with a fixed batch of 1) rewritten to take any
batch (``streamdec.models.dynamic_batch``), read from ``../shared/models/`` (a missing folder
fails, naming where it was looked for).

- every row of a batch of N real chunks (N = 1, 2, 7; streams at different points of
  different utterances, their own carried states) gets exactly the outputs and next states
  the original graph gives that row run alone: tolerance 0. The rewrite runs the same
  kernels on the same numbers (each stream's quantization scale and zero point by the
  original's formulas, the integer products through the same MatMulInteger kernel), and
  ONNX Runtime's float kernels compute a row the same way at any batch size; measured over
  every chunk of the utterances below, the largest difference is 0.0;
- a row's outputs do not change when its batch mates do (loud noise, silence, zero states);
- streams decoded together in batches give each utterance's transcript decoded alone
  (greedy and modified beam), token ids, timestamps and scores alike; and alone they give
  sherpa-onnx's (``tests/test_real_model.py``);
- a graph the rules cannot place is refused, naming the node, and such a model loads and
  runs one stream at a time.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from decode_utils import decode_in_pieces, decode_together, finals, key
from shared_data import REAL_MODEL
from streamdec import EndpointConfig, ModelConfig, Recognizer, RecognizerConfig
from streamdec.models.config import ModelConfig as _ModelConfig
from streamdec.errors import BatchRewriteRefused
from streamdec.models.dynamic_batch import dynamic_batch
from streamdec.models.graph import batched_model
from streamdec.models.onnx_backend import open_batched_session
from streamdec.models.repair import repair_lost_padding
from streamdec.search import SearchConfig

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.accuracy.realvoice import real_dev_set  # noqa: E402

ENCODER = "encoder-epoch-12-avg-2-chunk-16-left-64.int8.onnx"
#: the utterances whose chunks the encoder tests run: read speech, names, commands
#: (all at 16 kHz)
UTTS = ["librivox/sense_and_sensibility_01_austen_64kb-0870",
        "librivox/sense_and_sensibility_01_austen_64kb-0880", "cards/001", "cards/002",
        "goforward/goforward", "digits/dhd.2934z",
        "librivox/sense_and_sensibility_01_austen_64kb-0890"]
#: the encoder's DynamicQuantizeLinear nodes (each made per stream)
QUANTIZERS = 104
FIXED_BATCH_FIXTURE = (REPO / "tests" / "fixtures" / "published-layouts"
                       / "E-streaming-zipformer2-chunk-16-left-128-dynamic-batch-0")


def _model_dir() -> Path:
    if not (REAL_MODEL / ENCODER).is_file():
        pytest.fail(f"real model missing: {REAL_MODEL} must hold {ENCODER} (the shared models "
                    "folder beside the repository; see docs/models.md)")
    return REAL_MODEL


def _recognizer(model_dir: Path, **model_kw) -> Recognizer:
    return Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(model_dir), **model_kw),
                                       endpoint=EndpointConfig(enabled=False)))


@pytest.fixture(scope="module")
def rec() -> Recognizer:
    return _recognizer(_model_dir())


@pytest.fixture(scope="module")
def dev() -> dict:
    utts = {u.utt: u for u in real_dev_set()}
    missing = [u for u in UTTS if u not in utts]
    assert not missing, f"real dev set lacks {missing}"
    assert {utts[u].rate for u in UTTS} == {16000}
    return utts


class _Recording:
    """An encoder session that keeps each call's inputs and outputs (batch 1)."""

    def __init__(self, session) -> None:
        self.session = session
        self.calls: list[tuple[list[np.ndarray], list[np.ndarray]]] = []

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, names, feeds):
        out = self.session.run(names, feeds)
        self.calls.append(([np.array(v) for v in feeds.values()], [np.array(o) for o in out]))
        return out


@pytest.fixture(scope="module")
def chunks(rec, dev) -> list[list[tuple[list[np.ndarray], list[np.ndarray]]]]:
    """Per utterance (``UTTS``, then the dev set's other 16 kHz ones), every encoder call of
    its decode alone: (inputs, outputs)."""
    original = rec.model.encoder
    per_utt = []
    names = UTTS + sorted(u for u in dev if dev[u].rate == 16000 and u not in UTTS)
    try:
        for utt in names:
            rec.model.encoder = recording = _Recording(original)
            decode_in_pieces(rec, dev[utt].samples, 16000)
            per_utt.append(recording.calls)
    finally:
        rec.model.encoder = original
    assert all(len(calls) >= 4 for calls in per_utt), [len(c) for c in per_utt]
    return per_utt


def _axes(rec) -> list[int]:
    """The batch axis of each encoder input (and of the output in the same place)."""
    return [0] + [s.batch_axis for s in rec.model.state_layout.specs]


def _run_batch(rec, rows: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """The batched encoder on ``rows`` (each one stream's inputs); each row's outputs."""
    axes = _axes(rec)
    session = rec.model.batched_encoder
    names = [i.name for i in session.get_inputs()]
    feeds = {n: np.concatenate([r[j] for r in rows], axis=axes[j])
             for j, n in enumerate(names)}
    out = session.run(None, feeds)
    return [[np.take(o, [i], axis=axes[j]) for j, o in enumerate(out)]
            for i in range(len(rows))]


def _worst(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    assert [g.shape for g in got] == [w.shape for w in want]
    return max(float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want))


def test_the_published_encoder_gets_a_batched_graph(rec, tmp_path):
    session = rec.model.batched_encoder
    assert session is not None
    assert not isinstance(session.get_inputs()[0].shape[0], int)
    assert isinstance(rec.model.encoder.get_inputs()[0].shape[0], int)  # batch 1 as it was
    path = _model_dir() / ENCODER
    model = onnx.load(str(path))
    repair_lost_padding(model, path)
    assert dynamic_batch(model) == QUANTIZERS
    assert not any(n.op_type == "DynamicQuantizeLinear" for n in model.graph.node)
    assert sum(n.op_type == "QuantizeLinear" for n in model.graph.node) == QUANTIZERS
    # off with the other speed rewrites
    off = _recognizer(_model_dir(), graph_rewrites=False)
    assert off.model.batched_encoder is None
    # what the engine batches by: 4 streams or more in one call, or every batch one call
    # per stream
    assert (rec.batch_from, off.batch_from) == (4, None)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_each_row_of_a_batch_gets_the_original_graphs_outputs_for_it_alone(rec, chunks, n):
    # row i: utterance i at its chunk (3 * i) % len: streams at different points
    rows = [chunks[i][(3 * i + 2) % len(chunks[i])] for i in range(n)]
    got = _run_batch(rec, [inputs for inputs, _ in rows])
    for i, (_, want) in enumerate(rows):
        assert _worst(got[i], want) == 0.0, f"row {i} of {n}"


def test_every_recorded_chunk_batched_by_seven_equals_its_run_alone(rec, chunks):
    calls = [c for per_utt in chunks for c in per_utt]
    order = np.random.default_rng(7).permutation(len(calls))
    worst = 0.0
    for start in range(0, len(order), 7):
        group = [calls[i] for i in order[start:start + 7]]
        got = _run_batch(rec, [inputs for inputs, _ in group])
        worst = max([worst] + [_worst(g, want) for g, (_, want) in zip(got, group)])
    assert len(calls) > 100
    assert worst == 0.0


def test_a_rows_outputs_do_not_change_with_its_batch_mates(rec, chunks):
    inputs, want = chunks[0][4]
    rng = np.random.default_rng(3)
    loud = [inputs[0] + rng.normal(8.0, 6.0, inputs[0].shape).astype(np.float32)]
    loud += [s * 50 if s.dtype == np.float32 else s for s in chunks[1][-1][0][1:]]
    silent = [np.full_like(inputs[0], -23.0)] + rec.model.state_layout.initial()
    other = chunks[1][5][0]
    for mates in ([loud], [silent, loud], [other, silent, loud, other]):
        got = _run_batch(rec, [inputs, *mates])
        assert _worst(got[0], want) == 0.0
        got = _run_batch(rec, [*mates, inputs])
        assert _worst(got[-1], want) == 0.0


class _Counting:
    """The batched encoder session, counting the batch sizes it runs."""

    def __init__(self, session) -> None:
        self.session = session
        self.sizes: list[int] = []

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, names, feeds):
        self.sizes.append(len(next(iter(feeds.values()))))
        return self.session.run(names, feeds)


@pytest.mark.parametrize("method", ["greedy", "modified_beam"])
def test_streams_decoded_together_give_each_utterances_transcript_alone(rec, dev, method):
    search = SearchConfig(method=method, beam=4) if method != "greedy" else \
        SearchConfig(method=method)
    audios = [dev[u].samples for u in UTTS[:6]]
    alone = [finals(decode_in_pieces(rec, a, 3200, search=search)) for a in audios]
    batched = rec.model.batched_encoder
    rec.model.batched_encoder = counting = _Counting(batched)
    try:
        streams = [rec.create_stream(search=search) for _ in audios]
        together = [finals(ev) for ev in decode_together(rec, streams, audios, 1600)]
    finally:
        rec.model.batched_encoder = batched
    assert max(counting.sizes) == 6 and len(counting.sizes) >= 5
    for utt, a, t in zip(UTTS, alone, together):
        assert len(a) == 1 and len(a[0].token_ids) >= 3, utt
        assert key(t) == key(a), utt
        assert t[0].text == a[0].text
        np.testing.assert_allclose([r.score for r in t], [r.score for r in a], rtol=0,
                                   atol=0, err_msg=utt)


def _encoder_summing_over_the_batch(path: Path) -> None:
    """A tiny zipformer2-like encoder (features (1, 4, 2), one state (3, 1, 2)) whose output
    adds the sum over the batch: what no batched graph may compute."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2])
    key_in = helper.make_tensor_value_info("cached_key_0", TensorProto.FLOAT, [3, 1, 2])
    out = helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, [1, 4, 2])
    key_out = helper.make_tensor_value_info("new_cached_key_0", TensorProto.FLOAT, [3, 1, 2])
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["total"], name="over_batch",
                              keepdims=1),
             helper.make_node("Add", ["x", "total"], ["encoder_out"], name="add"),
             helper.make_node("Neg", ["cached_key_0"], ["new_cached_key_0"], name="neg")]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    graph = helper.make_graph(nodes, "g", [x, key_in], [out, key_out], [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    helper.set_model_props(model, {"model_type": "zipformer2", "T": "4",
                                   "decode_chunk_len": "4"})
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_a_graph_the_rules_cannot_place_is_refused_naming_the_node(tmp_path, caplog):
    path = tmp_path / "encoder.onnx"
    _encoder_summing_over_the_batch(path)
    model = onnx.load(str(path))
    with pytest.raises(BatchRewriteRefused, match="ReduceSum 'over_batch' reduces the batch axis"):
        dynamic_batch(model)
    assert model == onnx.load(str(path))  # untouched
    with caplog.at_level(logging.DEBUG, logger="streamdec"):
        assert batched_model(path, tmp_path / "out.onnx") is False
    assert not (tmp_path / "out.onnx").exists()
    assert "one stream at a time" in caplog.text and "over_batch" in caplog.text
    assert open_batched_session(path, _ModelConfig()) is None


def test_a_refused_fixed_batch_model_loads_and_runs_one_stream_at_a_time(dev):
    # icefall's --dynamic-batch 0 export: shape inference leaves tensors without a shape,
    # so its encoder is refused; its streams are decoded one call each, as before
    rec = _recognizer(FIXED_BATCH_FIXTURE)
    assert rec.model.batched_encoder is None
    audios = [dev[u].samples[:48000] for u in UTTS[:3]]
    alone = [finals(decode_in_pieces(rec, a, 3200)) for a in audios]
    streams = [rec.create_stream() for _ in audios]
    together = [finals(ev) for ev in decode_together(rec, streams, audios, 1600)]
    assert [key(t) for t in together] == [key(a) for a in alone]


def test_the_batched_encoder_bench_writes_its_report(tmp_path):
    import json
    import subprocess

    out = tmp_path / "batched-encoder.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "decode" / "batched_encoder.py"),
                    "--out", str(out), "--model-dir", str(_model_dir()), "--streams", "1,9",
                    "--runs", "1", "--repeats", "1"], check=True, capture_output=True,
                   timeout=300)
    report = json.loads(out.read_text())
    assert report["setup"]["benchmark"] == "batched_encoder"
    assert [c["streams"] for c in report["configurations"]] == [1, 9]
    for c in report["configurations"]:
        assert set(c["ms_per_stream_chunk"]) == {"one_at_a_time", "batched", "streamdec"}
        assert c["identical_rows"] == c["identical_rows_streamdec"] == c["streams"]


@pytest.mark.parametrize("n", [9, 17])
def test_a_large_batch_runs_in_calls_of_at_most_eight_each_row_its_own(rec, chunks, n):
    from streamdec.models.onnx_backend import BATCHED_UP_TO

    calls = [c for per_utt in chunks for c in per_utt]
    rows = [calls[(5 * i) % len(calls)] for i in range(n)]
    axes = _axes(rec)
    features = np.concatenate([inputs[0] for inputs, _ in rows])
    states = [np.concatenate([inputs[j] for inputs, _ in rows], axis=axes[j])
              for j in range(1, len(axes))]
    batched = rec.model.batched_encoder
    rec.model.batched_encoder = counting = _Counting(batched)
    try:
        out, next_states = rec.model.encode(features, states)
    finally:
        rec.model.batched_encoder = batched
    assert BATCHED_UP_TO == 8 and counting.sizes == [8] * (n // 8)  # and one call each after
    for i, (_, want) in enumerate(rows):
        got = [np.take(o, [i], axis=axes[j]) for j, o in enumerate([out, *next_states])]
        assert _worst(got, want) == 0.0, f"row {i} of {n}"

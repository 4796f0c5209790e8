"""Networks exported with a dynamic batch whose ``DynamicQuantizeLinear`` nodes quantize a
whole batch with one scale: the real ``-mobile`` model's int8 joiner (chosen by
``ModelConfig.int8``, ``--int8``), read from ``../shared/models/`` (a missing folder fails,
naming where it was looked for), with real speech from ``../shared/data/real-en/``.

- as published, a row's logits depend on its batch mates (shown on real joiner inputs);
- made per stream at load (``streamdec.models.dynamic_batch.per_stream_quantization``),
  each row of a batch (real rows mixed with loud noise and silence rows; batches of 1, 2, 9,
  33) gets exactly (tolerance 0) what the rewritten graph gives it alone and what the
  published graph gives it alone (batch 1);
- with ``graph_rewrites = false``, or where the rewrite is refused (a graph it cannot
  place), such a network runs one row per call, and the log says so;
- streams decoded together with the int8 files (greedy, modified beam) give each
  utterance's finals decoded alone: token ids, times and scores alike.

And on the int8 files icefall's exporters write with a dynamic batch (random weights,
``tests/fixtures/published-layouts``; four families): the decoders and joiners are made
per stream (a batch of contexts: each row exactly as alone); the encoders (their shapes
computed from ``Shape`` nodes, which the rule cannot place) are refused, logged, and run
one stream per call, so streams decoded together still equal each decoded alone (the
decoders compared with the published graph after streamdec's other rewrites, which change
the order of float sums in their depthwise convolutions).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import soundfile
from onnx import TensorProto, helper

from decode_utils import decode_in_pieces, decode_together, finals, key
from shared_data import REAL_EN, REAL_MODEL
from streamdec import EndpointConfig, ModelConfig, Recognizer, RecognizerConfig
from streamdec.errors import BatchRewriteRefused
from streamdec.models.dynamic_batch import per_stream_quantization, quantizes_across_batch
from streamdec.models.onnx_backend import open_network, open_session
from streamdec.search import SearchConfig

JOINER = "joiner-epoch-12-avg-2-chunk-16-left-64.int8.onnx"
#: real utterances the end-to-end check decodes (read sentences; numbers and
#: spelled letters)
CLIPS = ("mini_librispeech_train_clean_5/audio/LibriSpeech/train-clean-5/1088/134315/"
         "1088-134315-0002.opus",
         "mini_librispeech_train_clean_5/audio/LibriSpeech/train-clean-5/1088/134315/"
         "1088-134315-0000.opus",
         "an4/audio/wav/test/an4test_clstk/fjlp/an417-fjlp-b.opus",
         "an4/audio/wav/test/an4test_clstk/fjlp/an420-fjlp-b.opus")


def _joiner_path():
    path = REAL_MODEL / JOINER
    if not path.is_file():
        pytest.fail(f"real model missing: {REAL_MODEL} must hold {JOINER} (the shared models "
                    "folder beside the repository; see docs/models.md)")
    return path


def _recognizer(**model_kw) -> Recognizer:
    _joiner_path()
    return Recognizer(RecognizerConfig(
        model=ModelConfig(model_dir=str(REAL_MODEL), int8=True, **model_kw),
        endpoint=EndpointConfig(enabled=False)))


def _audio(clip: str) -> np.ndarray:
    path = REAL_EN / clip
    if not path.is_file():
        pytest.fail(f"real speech missing: {path} (the shared data folder beside the "
                    "repository)")
    samples, rate = soundfile.read(str(path), dtype="float32")
    assert rate == 16000, path
    return samples


@pytest.fixture(scope="module")
def rec() -> Recognizer:
    return _recognizer()


@pytest.fixture(scope="module")
def published():
    return ort.InferenceSession(str(_joiner_path()), providers=["CPUExecutionProvider"])


class _Joins:
    """A model's ``join``, keeping the rows of each call and their count."""

    def __init__(self, model) -> None:
        self.join = model.join
        self.rows: list[tuple[np.ndarray, np.ndarray]] = []
        self.sizes: list[int] = []

    def __call__(self, encoder_out, decoder_out):
        self.rows += [(np.array(e), np.array(d)) for e, d in zip(encoder_out, decoder_out)]
        self.sizes.append(len(encoder_out))
        return self.join(encoder_out, decoder_out)


@pytest.fixture(scope="module")
def rows(rec) -> tuple[np.ndarray, np.ndarray]:
    """Real joiner inputs: (encoder frame, decoder output) rows of one utterance's greedy
    decode, 64 of them spread over it."""
    rec.model.join = recording = _Joins(rec.model)
    try:
        decode_in_pieces(rec, _audio(CLIPS[0]), 3200)
    finally:
        del rec.model.join
    assert len(recording.rows) >= 200, len(recording.rows)
    pick = np.linspace(0, len(recording.rows) - 1, 64).astype(int)
    return (np.stack([recording.rows[i][0] for i in pick]),
            np.stack([recording.rows[i][1] for i in pick]))


def _mixed(rows, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch of ``n``: real rows, every third row loud noise, every fifth silence."""
    enc, dec = rows
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(enc), n, replace=False)
    e, d = enc[pick].copy(), dec[pick].copy()
    e[2::3] = rng.normal(0.0, 40.0, e[2::3].shape)
    e[4::5], d[4::5] = 0.0, 0.0
    return e, d


def _join(session, e: np.ndarray, d: np.ndarray) -> np.ndarray:
    return session.run(None, {"encoder_out": e, "decoder_out": d})[0]


def _alone(session, e: np.ndarray, d: np.ndarray) -> np.ndarray:
    return np.concatenate([_join(session, e[i:i + 1], d[i:i + 1]) for i in range(len(e))])


def test_the_published_int8_joiner_scores_a_row_by_its_batch_mates(rows, published):
    e, d = _mixed(rows, 9, seed=1)
    assert quantizes_across_batch(onnx.load(str(_joiner_path())))
    together, alone = _join(published, e, d), _alone(published, e, d)
    real = [i for i in range(9) if i % 3 != 2 and i % 5 != 4]
    # each real row moves by more than 0.01 in some logit beside its loud batch mates
    assert min(float(np.abs(together[i] - alone[i]).max()) for i in real) > 0.01


def test_the_joiner_is_made_per_stream_at_load(rec, rows, published):
    model = onnx.load(str(_joiner_path()))
    assert per_stream_quantization(model) == 1
    assert not quantizes_across_batch(model)
    assert [n.op_type for n in model.graph.node].count("DynamicQuantizeLinear") == 0
    assert not isinstance(rec.model.joiner.get_inputs()[0].shape[0], int)  # a dynamic batch
    assert rec.model.files.joiner.name == JOINER
    network = open_network(_joiner_path(), ModelConfig(), one_row=True)
    assert network.rows_alone is False and network.one_row is not None
    # calls of one row go to the published graph (fewer nodes): the same numbers
    e, d = _mixed(rows, 5, seed=2)
    for session in (network.one_row, network.session):
        assert np.abs(_alone(session, e, d) - _alone(published, e, d)).max() == 0.0


@pytest.mark.parametrize("n", [1, 2, 9, 33])
def test_each_row_gets_exactly_what_it_gets_alone(rec, rows, published, n):
    e, d = _mixed(rows, n, seed=n)
    together = rec.model.join(e, d)
    assert np.abs(together - _alone(rec.model.joiner, e, d)).max() == 0.0
    assert np.abs(together - _alone(published, e, d)).max() == 0.0


def test_with_rewrites_off_the_int8_joiner_runs_one_row_per_call(rows, published, caplog):
    with caplog.at_level(logging.INFO, logger="streamdec"):
        off = _recognizer(graph_rewrites=False)
    assert f"{JOINER}: its DynamicQuantizeLinear nodes quantize a whole batch" in caplog.text
    assert "(graph rewrites are off); each row of a batch runs in a call of its own" \
        in caplog.text
    e, d = _mixed(rows, 9, seed=4)
    assert np.abs(off.model.join(e, d) - _alone(published, e, d)).max() == 0.0


def _dequantizing_graph(path) -> None:
    """A network of dynamic batch whose quantized codes are read by a DequantizeLinear:
    what the per-stream rule has no rule for."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "zp"], name="dql"),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="back")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_a_graph_the_rule_cannot_place_runs_one_row_per_call(tmp_path, caplog):
    path = tmp_path / "joiner.int8.onnx"
    _dequantizing_graph(path)
    model = onnx.load(str(path))
    assert quantizes_across_batch(model)
    with pytest.raises(BatchRewriteRefused, match="'dql': read by other than MatMulInteger"):
        per_stream_quantization(model)
    assert model == onnx.load(str(path))  # untouched
    with caplog.at_level(logging.WARNING, logger="streamdec"):
        network = open_network(path, ModelConfig(), one_row=True)
    assert network.rows_alone is True and network.one_row is None
    session = network.session
    assert "'dql': read by other than MatMulInteger" in caplog.text
    assert "each row of a batch runs in a call of its own" in caplog.text
    x = np.array([[0.5, -1, 2, 0], [100, 3, -7, 1]], np.float32)
    assert session.run(None, {"x": x})[0].shape == (2, 4)


@pytest.mark.parametrize("method", ["greedy", "modified_beam"])
def test_streams_decoded_together_with_int8_files_give_each_alone(rec, method):
    search = SearchConfig(method=method, beam=4) if method != "greedy" else \
        SearchConfig(method=method)
    audios = [_audio(c) for c in CLIPS]
    alone = [finals(decode_in_pieces(rec, a, 3200, search=search)) for a in audios]
    rec.model.join = counting = _Joins(rec.model)
    try:
        streams = [rec.create_stream(search=search) for _ in audios]
        together = [finals(ev) for ev in decode_together(rec, streams, audios, 1600)]
    finally:
        del rec.model.join
    assert max(counting.sizes) >= (4 if method == "greedy" else 16)
    for clip, a, t in zip(CLIPS, alone, together):
        assert len(a) == 1 and len(a[0].token_ids) >= 3, clip
        assert key(t) == key(a), clip
        assert t[0].text == a[0].text
        np.testing.assert_allclose([r.score for r in t], [r.score for r in a], rtol=0,
                                   atol=0, err_msg=clip)


LAYOUTS = Path(__file__).parent / "fixtures" / "published-layouts"
#: the fixture families with int8 files of dynamic batch, and the node their encoder's
#: rewrite refuses (None: made per stream)
INT8_LAYOUTS = {"A-streaming-zipformer2-chunk-16-left-128": None,
                "B-streaming-zipformer-v1": "CumSum '/CumSum'",
                "C-streaming-conformer": "ScatterND '/ScatterND'",
                "D-lstm": "Split '/encoder/encoder/layers.0/lstm/Split'"}


@pytest.mark.parametrize("layout", list(INT8_LAYOUTS))
def test_icefall_int8_exports_are_made_per_stream_or_run_one_per_call(layout, caplog):
    folder = LAYOUTS / layout
    with caplog.at_level(logging.WARNING, logger="streamdec"):
        rec = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(folder), int8=True),
                                          endpoint=EndpointConfig(enabled=False)))
    encoder = rec.model.files.encoder.name
    assert encoder.endswith(".int8.onnx")
    warned = [r.getMessage() for r in caplog.records]
    refused = INT8_LAYOUTS[layout]
    if refused is None:
        assert warned == []
        assert rec.model._one_at_a_time == (False, False, False)
    else:
        assert len(warned) == 1 and f"{encoder}: its DynamicQuantizeLinear" in warned[0]
        assert f"{refused}: no batch rule for this op" in warned[0]
        assert rec.model._one_at_a_time == (True, False, False)
    # the published graph with streamdec's other rewrites (the decoders' depthwise
    # convolutions as 2-D change the order of float sums), without the per-stream one
    published = open_session(rec.model.files.decoder, ModelConfig())
    rng = np.random.default_rng(5)
    contexts = rng.integers(0, rec.meta.vocab_size, (9, rec.meta.context_size))
    contexts[4] = rec.meta.blank_id
    got = rec.model.decode(contexts)
    for session in (rec.model.decoder, published):
        alone = np.concatenate([session.run(None, {"y": contexts[i:i + 1]})[0]
                                for i in range(9)])
        assert np.abs(got - alone).max() == 0.0


class _Encodes:
    """A model's ``encode``, keeping each call's inputs."""

    def __init__(self, model) -> None:
        self.encode = model.encode
        self.calls: list[tuple[np.ndarray, list[np.ndarray]]] = []

    def __call__(self, features, states):
        self.calls.append((np.array(features), [np.array(s) for s in states]))
        return self.encode(features, states)


def test_the_zipformer2_int8_encoder_gives_each_row_what_it_gets_alone():
    # its shapes folded at batch 1 (streamdec.models.shape_folding), the encoder is made
    # per stream: real chunks of three recordings at different points, in one batch
    rec = Recognizer(RecognizerConfig(
        model=ModelConfig(model_dir=str(LAYOUTS / "A-streaming-zipformer2-chunk-16-left-128"),
                          int8=True), endpoint=EndpointConfig(enabled=False)))
    rec.model.encode = recording = _Encodes(rec.model)
    try:
        per_clip = []
        for clip in CLIPS[:3]:
            recording.calls.clear()
            decode_in_pieces(rec, _audio(clip)[:64000], 3200)
            per_clip.append(list(recording.calls))
    finally:
        del rec.model.encode
    rows = [per_clip[i % 3][(2 * i + 1) % len(per_clip[i % 3])] for i in range(7)]
    layout = rec.model.state_layout
    features = np.concatenate([f for f, _ in rows])
    states = layout.stack([st for _, st in rows])
    out, next_states = rec.model.encode(features, states)
    published = open_session(rec.model.files.encoder, ModelConfig())
    names = [i.name for i in published.get_inputs()]
    worst = 0.0
    for i, (f, st) in enumerate(rows):
        want = published.run(None, dict(zip(names, [f, *st])))
        got = [out[i:i + 1], *layout.unstack(next_states, len(rows))[i]]
        worst = max([worst] + [float(np.abs(g - w).max()) for g, w in zip(got, want)])
    assert worst == 0.0


@pytest.mark.parametrize("layout", ["A-streaming-zipformer2-chunk-16-left-128",
                                    "C-streaming-conformer"])
def test_an_icefall_int8_model_decodes_streams_together_as_alone(layout):
    rec = Recognizer(RecognizerConfig(
        model=ModelConfig(model_dir=str(LAYOUTS / layout), int8=True),
        endpoint=EndpointConfig(enabled=False)))
    search = SearchConfig(method="modified_beam", beam=4)
    audios = [_audio(c)[:48000] for c in CLIPS]
    alone = [finals(decode_in_pieces(rec, a, 3200, search=search)) for a in audios]
    streams = [rec.create_stream(search=search) for _ in audios]
    together = [finals(ev) for ev in decode_together(rec, streams, audios, 1600)]
    for clip, a, t in zip(CLIPS, alone, together):
        assert len(a) == 1 and key(t) == key(a), clip
        np.testing.assert_allclose([r.score for r in t], [r.score for r in a], rtol=0,
                                   atol=0, err_msg=clip)


def test_the_per_stream_int8_bench_writes_its_report(tmp_path):
    import json
    import subprocess
    import sys

    _joiner_path()
    out = tmp_path / "per-stream-int8.json"
    bench = Path(__file__).resolve().parents[1] / "bench" / "decode" / "per_stream_int8.py"
    subprocess.run([sys.executable, str(bench), "--out", str(out), "--model-dir",
                    str(REAL_MODEL), "--int8", "--rows", "1,3", "--runs", "1", "--repeats", "1",
                    "--decode-streams", "2", "--decode-runs", "1"], check=True,
                   capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert report["setup"]["benchmark"] == "per_stream_int8"
    assert [c["rows"] for c in report["configurations"]] == [1, 3]
    for c in report["configurations"]:
        assert set(c["cpu_us_per_row"]) == {"published_batched", "per_stream", "row_per_call"}
        assert c["identical_rows"] == c["rows"]
    assert [(d["streams"], d["rows_alone"]) for d in report["decodes"]] == [(2, [])]

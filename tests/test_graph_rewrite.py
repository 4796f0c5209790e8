"""Depthwise 1-D convolutions rewritten as 2-D when a session is opened
(streamdec.models.graph): the same outputs to float rounding, the same weight bytes, only the
convolutions that qualify, and the published zipformer layouts decode the same with and
without it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import soundfile as sf
from onnx import TensorProto, helper, numpy_helper

from streamdec import EndpointConfig, Recognizer, RecognizerConfig
from streamdec.errors import ConfigError
from streamdec.models import ModelConfig
from streamdec.models.graph import Rewritten, depthwise_conv1d_as_2d, rewritten_model
from streamdec.models.onnx_backend import open_session

FIXTURES = Path(__file__).parent / "fixtures" / "published-layouts"
WAV = Path(__file__).parent.parent / "examples" / "hello.wav"
C, T = 16, 20


def _model(opset: int):
    """x [N, C, T] through two depthwise convolutions that qualify (pads and dilation;
    stride), a grouped one with 2 channels a group, a plain one, and a depthwise one whose
    weight a Flatten also reads (neither of the last three qualifies)."""
    rng = np.random.default_rng(3)

    def w(shape):
        return rng.standard_normal(shape).astype(np.float32)

    inits = [numpy_helper.from_array(w((C, 1, 5)), "dw1"), numpy_helper.from_array(w(C), "b1"),
             numpy_helper.from_array(w((C, 1, 3)), "dw2"),
             numpy_helper.from_array(w((C, 2, 3)), "grouped"),
             numpy_helper.from_array(w((C, C, 1)), "plain"),
             numpy_helper.from_array(w((C, 1, 1)), "shared")]
    nodes = [
        helper.make_node("Conv", ["x", "dw1", "b1"], ["a"], name="dw1", group=C,
                         kernel_shape=[5], pads=[4, 4], dilations=[2]),
        helper.make_node("Relu", ["a"], ["a2"]),
        helper.make_node("Conv", ["a2", "dw2"], ["b"], name="dw2", group=C, strides=[2]),
        helper.make_node("Conv", ["b", "grouped"], ["c"], group=C // 2, pads=[1, 1]),
        helper.make_node("Conv", ["c", "plain"], ["d"]),
        helper.make_node("Conv", ["d", "shared"], ["e"], group=C),
        helper.make_node("Flatten", ["shared"], ["shared2"]),
        helper.make_node("Mul", ["e", "shared2"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         ["N", C, T])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             ["N", C, "T2"])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model, x):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), opts,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("opset", [11, 17])  # Unsqueeze's axes: an attribute, then an input
def test_the_qualifying_convolutions_become_2d_with_the_same_outputs(opset):
    model = _model(opset)
    before = onnx.ModelProto()
    before.CopyFrom(model)
    assert depthwise_conv1d_as_2d(model) == 2
    onnx.checker.check_model(model)
    x = np.random.default_rng(4).standard_normal((3, C, T)).astype(np.float32)
    want, got = _run(before, x), _run(model, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert [n.input[1] for n in convs] == ["dw1", "dw2", "grouped", "plain", "shared"]
    weights = {t.name: t for t in model.graph.initializer}
    old = {t.name: t for t in before.graph.initializer}
    for name in ("dw1", "dw2"):  # the same bytes, the extra axis of 1
        assert list(weights[name].dims) == list(old[name].dims[:2]) + [1, old[name].dims[2]]
        assert weights[name].raw_data == old[name].raw_data
    for name in ("grouped", "plain", "shared"):
        assert list(weights[name].dims) == list(old[name].dims)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Unsqueeze") == 2 and ops.count("Squeeze") == 2
    dw1 = next(n for n in convs if n.input[1] == "dw1")
    attrs = {a.name: helper.get_attribute_value(a) for a in dw1.attribute}
    assert attrs == {"group": C, "kernel_shape": [1, 5], "pads": [0, 4, 0, 4],
                     "dilations": [1, 2]}


def test_a_weight_that_is_a_graph_input_or_read_by_a_subgraph_keeps_its_shape():
    """An initializer also listed as a graph input (an overridable default) or read inside an
    If branch is not reshaped, so the convolution reading it stays 1-D."""
    model = _model(17)
    model.graph.input.append(helper.make_tensor_value_info("dw1", TensorProto.FLOAT,
                                                           [C, 1, 5]))
    branch = helper.make_graph([helper.make_node("Identity", ["dw2"], ["z"])], "b", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model.graph.initializer.append(numpy_helper.from_array(np.array(True), "cond"))
    model.graph.node.append(helper.make_node("If", ["cond"], ["z_out"], then_branch=branch,
                                             else_branch=branch))
    assert depthwise_conv1d_as_2d(model) == 0
    assert [list(t.dims) for t in model.graph.initializer if t.name in ("dw1", "dw2")] == [
        [C, 1, 5], [C, 1, 3]]


def test_new_names_avoid_initializers_that_only_a_subgraph_reads():
    """The axes initializer the rewrite adds gets a name no initializer has, even one that
    no node of the main graph reads (here: read only inside an If branch)."""
    model = _model(17)
    branch = helper.make_graph([helper.make_node("Identity", ["streamdec_conv2d_axes"],
                                                 ["z"])], "b", [],
                               [helper.make_tensor_value_info("z", TensorProto.INT64, None)])
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([7], dtype=np.int64), "streamdec_conv2d_axes"),
        numpy_helper.from_array(np.array(True), "cond")])
    model.graph.node.append(helper.make_node("If", ["cond"], ["z_out"], then_branch=branch,
                                             else_branch=branch))
    assert depthwise_conv1d_as_2d(model) == 2
    names = [t.name for t in model.graph.initializer]
    assert len(names) == len(set(names))
    onnx.checker.check_model(model)


def test_a_model_without_one_is_loaded_from_its_own_file(tmp_path):
    model = _model(17)
    keep = [n for n in model.graph.node if n.name not in ("dw1", "dw2")]
    keep[0].input[0] = "x"  # Relu(x)
    keep[1].input[0] = "a2"  # the grouped convolution reads it
    del model.graph.node[:]
    model.graph.node.extend(keep)
    onnx.checker.check_model(model)
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert rewritten_model(tmp_path / "m.onnx", tmp_path / "out.onnx").written is False
    assert not (tmp_path / "out.onnx").exists()
    assert depthwise_conv1d_as_2d(model) == 0


def test_open_session_leaves_no_file_behind(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    onnx.save(_model(17), str(src / "m.onnx"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    session = open_session(src / "m.onnx", ModelConfig())
    x = np.ones((1, C, T), np.float32)
    want = _run(_model(17), x)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    assert list(scratch.iterdir()) == []
    plain = open_session(src / "m.onnx", ModelConfig(graph_rewrites=False))
    assert plain.run(None, {"x": x})[0].tobytes() == want.tobytes()


@pytest.mark.parametrize("failure", ["cannot write", "writes garbage"])
def test_a_rewrite_that_fails_loads_the_file_as_it_is(tmp_path, monkeypatch, caplog, failure):
    """No space for the temporary file, or a rewritten graph ONNX Runtime refuses: the
    session is the file's own, and the log says why."""
    import streamdec.models.onnx_backend as backend

    onnx.save(_model(17), str(tmp_path / "m.onnx"))

    def broken(path, into, speed=True, per_stream=False):
        if failure == "cannot write":
            raise OSError(28, "No space left on device")
        into.write_bytes(b"not a model")
        return Rewritten(True)

    monkeypatch.setattr(backend, "rewritten_model", broken)
    with caplog.at_level("WARNING", logger="streamdec"):
        session = open_session(tmp_path / "m.onnx", ModelConfig())
    x = np.ones((1, C, T), np.float32)
    assert session.run(None, {"x": x})[0].tobytes() == _run(_model(17), x).tobytes()
    want = "graph not rewritten (OSError" if failure == "cannot write" else \
        "the rewritten graph did not load"
    assert any(want in r.getMessage() and "loading the file as it is" in r.getMessage()
               for r in caplog.records)


def test_graph_rewrites_must_be_a_boolean():
    with pytest.raises(ConfigError, match="model.graph_rewrites must be true or false"):
        ModelConfig(graph_rewrites="yes")


def test_the_published_zipformers_count_their_depthwise_convolutions():
    """Every conv module of the fixtures' encoders: 16 zipformer2 layers x 2 (causal and
    chunkwise), 10 zipformer v1 layers, 4 conformer layers."""
    counts = {"A-streaming-zipformer2-chunk-16-left-128": 32, "B-streaming-zipformer-v1": 10,
              "C-streaming-conformer": 4, "D-lstm": 0}
    for layout, want in counts.items():
        encoder = min((FIXTURES / layout).glob("encoder-*[0-9].onnx"))
        assert depthwise_conv1d_as_2d(onnx.load(str(encoder))) == want, layout


def _inputs(session, rng) -> dict:
    """Every input of an encoder session at batch 2: random features, random float states,
    zero integer states."""
    out = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in i.shape]
        if i.type == "tensor(float)":
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            out[i.name] = np.zeros(shape, np.int64 if "int64" in i.type else np.int32)
    return out


@pytest.mark.parametrize("layout", ["A-streaming-zipformer2-chunk-16-left-128",
                                    "B-streaming-zipformer-v1", "C-streaming-conformer"])
def test_the_published_layouts_give_the_same_encoder_outputs_and_transcripts(layout):
    encoder = min((FIXTURES / layout).glob("encoder-*[0-9].onnx"))
    rewritten, plain = (open_session(encoder, ModelConfig(graph_rewrites=g)) for g in (True, False))
    feed = _inputs(plain, np.random.default_rng(6))
    for got, want in zip(rewritten.run(None, feed), plain.run(None, feed)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    samples, rate = sf.read(str(WAV), dtype="float32")
    base = ModelConfig(model_dir=str(FIXTURES / layout))
    finals = []
    for g in (True, False):
        rec = Recognizer(RecognizerConfig(model=dataclasses.replace(base, graph_rewrites=g),
                                          endpoint=EndpointConfig(enabled=False)))
        s = rec.create_stream()
        s.accept_waveform(rate, samples)
        s.input_finished()
        while rec.is_ready(s):
            rec.decode([s])
        finals.append([(tuple(e.tokens), tuple(e.timestamps)) for e in s.pop_events()
                       if e.is_final])
    assert finals[0] == finals[1]
    assert sum(len(tokens) for tokens, _ in finals[0]) > 5

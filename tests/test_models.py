import numpy as np
import onnx
import pytest

from streamdec import ModelConfig, ModelLoadError, load_model
from streamdec.models.onnx_backend import batch_axis_from_table
from conftest import LAYOUTS, make_recognizer

EXPECTED_AXES = {
    "lstm": [("state0", 1, np.float32), ("state1", 1, np.float32)],
    "conformer": [("cached_attn", 2, np.float32), ("cached_conv", 2, np.float32),
                  ("processed_lens", 0, np.int64)],
    "zipformer2": [("cached_key_0", 1, np.float32), ("cached_nonlin_attn_0", 1, np.float32),
                   ("cached_val1_0", 1, np.float32), ("cached_val2_0", 1, np.float32),
                   ("cached_conv1_0", 0, np.float32), ("cached_conv2_0", 0, np.float32),
                   ("embed_states", 0, np.float32), ("processed_lens", 0, np.int64)],
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_state_layout_found_from_the_model(model_dirs, layout):
    model = load_model(ModelConfig(model_dir=str(model_dirs[layout])))
    got = [(s.name, s.batch_axis, s.dtype) for s in model.state_layout.specs]
    assert got == [(n, a, np.dtype(t)) for n, a, t in EXPECTED_AXES[layout]]
    m = model.meta
    assert (m.model_type, m.chunk_frames, m.chunk_shift, m.encoder_frames_per_chunk) == \
        (layout, 35, 32, 8)
    assert m.subsampling == 4 and m.encoder_frame_seconds == pytest.approx(0.04)
    assert (m.context_size, m.vocab_size, m.joiner_dim) == (2, 12, 24)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stack_unstack_are_exact_inverses(model_dirs, layout):
    layout_ = load_model(ModelConfig(model_dir=str(model_dirs[layout]))).state_layout
    rng = np.random.RandomState(0)
    streams = [[(rng.randn(*s.shape) * 10).astype(s.dtype) for s in layout_.specs]
               for _ in range(5)]
    batched = layout_.stack(streams)
    for spec, t in zip(layout_.specs, batched):
        assert t.shape[spec.batch_axis] == 5
    back = layout_.unstack(batched, 5)
    for a, b in zip(streams, back):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched_encode_equals_single(model_dirs, layout):
    model = load_model(ModelConfig(model_dir=str(model_dirs[layout])))
    rng = np.random.RandomState(1)
    L = model.state_layout
    states = []
    for n in range(3):  # give each stream a different history
        st = L.initial()
        for _ in range(n + 1):
            _, st = model.encode(rng.randn(1, 35, 80).astype(np.float32), st)
        states.append(st)
    x = rng.randn(3, 35, 80).astype(np.float32)
    out, new = model.encode(x, L.stack(states))
    for n in range(3):
        o1, s1 = model.encode(x[n:n + 1], states[n])
        np.testing.assert_allclose(out[n:n + 1], o1, atol=1e-5)
        for a, b in zip(L.unstack(new, 3)[n], s1):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_family_table_is_the_fallback():
    assert batch_axis_from_table("conformer", "cached_attn") == 2
    assert batch_axis_from_table("zipformer2", "cached_conv1_3") == 0
    assert batch_axis_from_table("zipformer2", "cached_key_3") == 1
    assert batch_axis_from_table("zipformer", "cached_val2_1") == 2
    assert batch_axis_from_table("lstm", "state1") == 1
    assert batch_axis_from_table("unknown", "x") is None


@pytest.mark.parametrize("cpu_arena, patterns", [(True, False), (False, True)])
def test_sessions_keep_an_arena_without_memory_patterns_unless_told(model_dirs, cpu_arena,
                                                                     patterns):
    """The CPU arena saves each run mapping its tensors afresh (the 66 M zipformer2's
    encoder 6-16 % slower without it: bench/results/2026-12-06-sized-models-in-process);
    memory patterns are off with it, or the arena grows with each new batch size.
    cpu_arena=False: malloc and patterns (the setting before 2026-12-06)."""
    model = load_model(ModelConfig(model_dir=str(model_dirs["lstm"]), cpu_arena=cpu_arena))
    for session in (model.encoder, model.decoder, model.joiner):
        options = session.get_session_options()
        assert options.enable_cpu_mem_arena is cpu_arena
        assert options.enable_mem_pattern is patterns


def _copy_model(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_missing_dir(tmp_path):
    with pytest.raises(ModelLoadError, match="model directory not found"):
        load_model(ModelConfig(model_dir=str(tmp_path / "nope")))


def test_missing_file(model_dirs, tmp_path):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    (d / "joiner.onnx").unlink()
    with pytest.raises(ModelLoadError, match=r": no joiner network \(joiner\.onnx or "
                                             r"joiner-\*\.onnx\); ONNX files there: "
                                             r"decoder\.onnx, encoder\.onnx$"):
        load_model(ModelConfig(model_dir=str(d)))


def test_not_onnx(model_dirs, tmp_path):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    (d / "encoder.onnx").write_bytes(b"this is not a model" * 10)
    with pytest.raises(ModelLoadError, match=r"encoder\.onnx: not a loadable ONNX model"):
        load_model(ModelConfig(model_dir=str(d)))


@pytest.mark.parametrize("key", ["T", "decode_chunk_len", "model_type"])
def test_missing_metadata(model_dirs, tmp_path, key):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    m = onnx.load(str(d / "encoder.onnx"))
    kept = [p for p in m.metadata_props if p.key != key]
    del m.metadata_props[:]
    m.metadata_props.extend(kept)
    onnx.save(m, str(d / "encoder.onnx"))
    with pytest.raises(ModelLoadError, match=rf"encoder\.onnx: metadata lacks '{key}'"):
        load_model(ModelConfig(model_dir=str(d)))


def test_tokens_do_not_match_the_joiner(model_dirs, tmp_path):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    (d / "tokens.txt").write_text("<blk> 0\nA 1\n")
    with pytest.raises(ModelLoadError, match=r"the joiner outputs 12 units \(ids 0..11\) but "
                                             r"the tokens file lacks id\(s\) 2, 3, 4, 5, 6, "
                                             r"\.\.\. \(10 in all\)"):
        make_recognizer(d)


def test_tokens_missing(model_dirs, tmp_path):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    (d / "tokens.txt").unlink()
    with pytest.raises(ModelLoadError, match="tokens file not found"):
        make_recognizer(d)


def _set_metadata(path, **values):
    m = onnx.load(str(path))
    for key, value in values.items():
        m.metadata_props.add(key=key, value=str(value))
    onnx.save(m, str(path))


def test_blank_id_frame_shift_and_rate_come_from_tokens_and_features(model_dirs, tmp_path):
    from streamdec import FeatureConfig

    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    lines = (d / "tokens.txt").read_text().splitlines()
    # blank written as id 3: the recognizer (and every search) must use 3
    swapped = {"<blk>": "3", lines[3].split()[0]: "0"}
    (d / "tokens.txt").write_text("\n".join(
        f"{line.split()[0]} {swapped.get(line.split()[0], line.split()[1])}" for line in lines))
    # the backend's metadata is complete: the blank id of tokens.txt, the features' rate
    meta = load_model(ModelConfig(model_dir=str(d)), FeatureConfig(sample_rate=8000)).meta
    assert (meta.blank_id, meta.frame_shift_ms, meta.sample_rate) == (3, 10.0, 8000)
    rec = make_recognizer(d, features=FeatureConfig(frame_shift_ms=10.0))
    assert (rec.meta.blank_id, rec.meta.frame_shift_ms, rec.meta.sample_rate) == (3, 10.0, 16000)
    assert rec.resources.search(rec.config.search).blank_id == 3
    assert rec.create_stream().search_state.hyp.context == (-1, 3)


@pytest.mark.parametrize("key, value, message", [
    ("sample_rate", 8000, "the model states sample_rate = 8000 but features.sample_rate gives 16000"),
    ("frame_shift_ms", 20, "the model states frame_shift_ms = 20 but features.frame_shift_ms gives 10"),
    ("blank_id", 5, "the model states blank_id = 5 but tokens.txt gives 0"),
    ("subsampling_factor", 2, "metadata subsampling_factor 2 but one call turns 32 frames into 8"),
])
def test_metadata_that_contradicts_the_config_is_refused(model_dirs, tmp_path, key, value, message):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    _set_metadata(d / "encoder.onnx", **{key: value})
    with pytest.raises(ModelLoadError, match=message):
        make_recognizer(d)


def test_metadata_that_agrees_is_accepted(model_dirs, tmp_path):
    d = _copy_model(model_dirs["lstm"], tmp_path / "m")
    _set_metadata(d / "encoder.onnx", sample_rate=16000, frame_shift_ms=10, blank_id=0,
                  subsampling_factor=4)
    assert make_recognizer(d).meta.declared == (("blank_id", 0.0), ("frame_shift_ms", 10.0),
                                                 ("sample_rate", 16000.0))


@pytest.mark.parametrize("int8", [False, True])
def test_weights_are_the_values_of_the_three_networks_initializers(int8):
    """``ModelMeta.weights`` (which picks the engine's batch size and decode threads): what
    onnx counts when it loads the built-in model's files, fp32 and int8."""
    model = load_model(ModelConfig(int8=int8))
    files = [model.files.encoder, model.files.decoder, model.files.joiner]
    assert [p.name for p in files] == [f"{n}{'.int8' if int8 else ''}.onnx"
                                       for n in ("encoder", "decoder", "joiner")]
    counted = sum(int(np.prod(t.dims)) for p in files for t in onnx.load(str(p)).graph.initializer)
    assert model.meta.weights == counted == (3_007_589 if int8 else 3_007_549)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_weights_of_each_published_layout(model_dirs, layout):
    model = load_model(ModelConfig(model_dir=str(model_dirs[layout])))
    files = [model.files.encoder, model.files.decoder, model.files.joiner]
    assert model.meta.weights == sum(int(np.prod(t.dims)) for p in files
                                     for t in onnx.load(str(p)).graph.initializer) > 0


def test_weight_count_reads_packed_dims_scalars_and_skips_other_fields(tmp_path):
    from onnx import TensorProto, helper

    from streamdec.models.weights import onnx_weight_count

    inits = [helper.make_tensor("a", TensorProto.FLOAT, [3, 4], np.zeros(12)),
             helper.make_tensor("s", TensorProto.INT64, [], [7]),  # a scalar: 1 value
             helper.make_tensor("e", TensorProto.FLOAT, [0, 5], [])]  # empty: 0
    node = helper.make_node("Add", ["x", "a"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [3, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [3, 4])], initializer=inits)
    model = helper.make_model(graph, doc_string="x" * 300)  # a long field before the graph
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert onnx_weight_count(path) == 13
    # the same tensor with its dims packed (wire type 2), as another writer may write them
    packed = path.read_bytes().replace(b"\x08\x03\x08\x04", b"\x0a\x02\x03\x04")
    assert packed.count(b"\x0a\x02\x03\x04") == 1
    (tmp_path / "p.onnx").write_bytes(packed)
    assert onnx_weight_count(tmp_path / "p.onnx") == 13
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert onnx_weight_count(tmp_path / "empty.onnx") == 0
    (tmp_path / "cut.onnx").write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ModelLoadError, match=r"cut\.onnx: not an ONNX model"):
        onnx_weight_count(tmp_path / "cut.onnx")

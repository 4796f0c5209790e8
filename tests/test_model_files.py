"""What a model directory or file set must hold, and the errors when it does not: file
discovery (streamdec.models.files), tokens.txt as icefall writes it, metadata asking for
what streamdec does not do, fixed batch sizes, and a decode that fails after loading."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamdec import ModelConfig, Recognizer, RecognizerConfig
from streamdec.appconfig import load_config
from streamdec.errors import ConfigError, ModelLoadError
from streamdec.models import load_model
from streamdec.models.files import find_model_files
from streamdec.tokens import SymbolTable

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "published-layouts"
LSTM = FIXTURES / "D-lstm"
STEM = "epoch-99-avg-1"


def link_model(src: Path, dst: Path, rename: dict[str, str] | None = None,
               skip: tuple[str, ...] = ()) -> Path:
    """``dst`` holding links to ``src``'s files (renamed as asked, some left out)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in skip:
            (dst / (rename or {}).get(f.name, f.name)).symlink_to(f)
    return dst


def with_metadata(src: Path, dst: Path, **changes: str) -> None:
    """Copy an ONNX file with metadata entries changed or added."""
    import onnx

    model = onnx.load(str(src))
    props = {p.key: p.value for p in model.metadata_props}
    props.update(changes)
    del model.metadata_props[:]
    for k, v in props.items():
        p = model.metadata_props.add()
        p.key, p.value = k, v
    onnx.save(model, str(dst))


def lstm_with_encoder_metadata(tmp_path: Path, **changes: str) -> Path:
    d = link_model(LSTM, tmp_path / "m", skip=(f"encoder-{STEM}.onnx",))
    with_metadata(LSTM / f"encoder-{STEM}.onnx", d / f"encoder-{STEM}.onnx", **changes)
    return d


# -- discovery ---------------------------------------------------------------------------
def test_no_decoder_names_the_directory_and_what_is_there(tmp_path):
    d = link_model(LSTM, tmp_path / "m", skip=(f"decoder-{STEM}.onnx",
                                               f"decoder-{STEM}.int8.onnx"))
    with pytest.raises(ModelLoadError) as e:
        find_model_files(ModelConfig(model_dir=str(d)))
    assert str(e.value) == (
        f"{d}: no decoder network (decoder.onnx or decoder-*.onnx); ONNX files there: "
        f"encoder-{STEM}.int8.onnx, encoder-{STEM}.onnx, joiner-{STEM}.int8.onnx, "
        f"joiner-{STEM}.onnx")


def test_no_tokens_file(tmp_path):
    d = link_model(LSTM, tmp_path / "m", skip=("tokens.txt",))
    with pytest.raises(ModelLoadError, match=r"tokens.txt: tokens file not found in model "
                                             r"directory"):
        find_model_files(ModelConfig(model_dir=str(d)))


def test_variants_without_chunk_and_left_are_ambiguous_until_one_is_chosen(tmp_path):
    d = link_model(LSTM, tmp_path / "m")
    for role in ("encoder", "decoder", "joiner"):
        (d / f"{role}-epoch-30-avg-5.onnx").symlink_to(LSTM / f"{role}-{STEM}.onnx")
    with pytest.raises(ModelLoadError) as e:
        find_model_files(ModelConfig(model_dir=str(d)))
    assert str(e.value) == (f"{d}: several model variants (epoch-30-avg-5, epoch-99-avg-1); "
                            "choose one with model.variant (--model-variant)")
    files = find_model_files(ModelConfig(model_dir=str(d), variant="epoch-30-avg-5"))
    assert files.encoder.name == "encoder-epoch-30-avg-5.onnx"
    assert files.describe().endswith("(variant epoch-30-avg-5 chosen; also there: "
                                     "epoch-99-avg-1 (--model-variant picks one))")
    with pytest.raises(ModelLoadError, match="model.variant 'avg-2' matches none"):
        find_model_files(ModelConfig(model_dir=str(d), variant="avg-2"))


def test_chunk_left_variants_default_to_the_largest_left_context():
    d = FIXTURES / "A-streaming-zipformer2-chunk-16-left-64-and-left-128"
    files = find_model_files(ModelConfig(model_dir=str(d)))
    assert [p.name for p in (files.encoder, files.decoder, files.joiner)] == [
        f"{r}-epoch-99-avg-1-chunk-16-left-128.onnx" for r in ("encoder", "decoder", "joiner")]
    assert files.variants == ("-epoch-99-avg-1-chunk-16-left-64",
                              "-epoch-99-avg-1-chunk-16-left-128")


def test_networks_that_share_no_variant(tmp_path):
    d = link_model(LSTM, tmp_path / "m", rename={f"joiner-{STEM}.onnx": "joiner-other.onnx"},
                   skip=(f"joiner-{STEM}.int8.onnx",))
    with pytest.raises(ModelLoadError, match="share no variant"):
        find_model_files(ModelConfig(model_dir=str(d)))


def test_plain_names_still_load(tmp_path):
    d = link_model(LSTM, tmp_path / "m", rename={
        f"{r}-{STEM}{q}.onnx": f"{r}{q}.onnx" for r in ("encoder", "decoder", "joiner")
        for q in ("", ".int8")})
    files = find_model_files(ModelConfig(model_dir=str(d), int8=True))
    assert files.encoder.name == "encoder.int8.onnx" and files.variant == ""


def test_explicit_files_must_exist_and_come_with_the_rest(tmp_path):
    with pytest.raises(ConfigError, match="model.encoder given without model.decoder, "
                                          "model.joiner"):
        ModelConfig(encoder=str(LSTM / f"encoder-{STEM}.onnx"))
    with pytest.raises(ModelLoadError, match=r"nosuch.onnx: decoder file not found"):
        find_model_files(ModelConfig(model_dir=str(LSTM), decoder=str(tmp_path / "nosuch.onnx")))


def test_config_file_names_files_relative_to_itself(tmp_path):
    link_model(LSTM, tmp_path / "m")
    conf = tmp_path / "c.toml"
    conf.write_text(f'[model]\nencoder = "m/encoder-{STEM}.int8.onnx"\n'
                    f'decoder = "m/decoder-{STEM}.onnx"\njoiner = "m/joiner-{STEM}.onnx"\n'
                    'tokens = "m/tokens.txt"\n')
    model = load_config(conf).recognizer.model
    files = find_model_files(model)
    assert files.encoder == tmp_path / "m" / f"encoder-{STEM}.int8.onnx"
    assert files.tokens == tmp_path / "m" / "tokens.txt"
    assert files.directory == tmp_path / "m"


def test_the_builtin_model_still_loads():
    files = find_model_files(ModelConfig())
    assert [p.name for p in (files.encoder, files.decoder, files.joiner, files.tokens)] == [
        "encoder.onnx", "decoder.onnx", "joiner.onnx", "tokens.txt"]
    assert Recognizer().model_files == files


# -- tokens.txt ---------------------------------------------------------------------------
def test_disambiguation_symbols_are_not_units(tmp_path):
    p = tmp_path / "tokens.txt"
    p.write_text("<blk> 0\n\u2581A 1\nB 2\n#0 3\n#1 4\n", encoding="utf-8")
    table = SymbolTable.from_file(p)
    assert len(table) == 3 and "#0" not in table.symbol_to_id
    table.check_vocab(3)
    with pytest.raises(ModelLoadError) as e:
        table.check_vocab(4)
    assert str(e.value) == (f"{p}: the joiner outputs 4 units (ids 0..3) but the tokens file "
                            "lacks id(s) 3 (3 symbols, not counting #N disambiguation symbols)")
    with pytest.raises(ModelLoadError, match=r"has id\(s\) 2 beyond them"):
        table.check_vocab(2)


def test_a_repeated_id_is_refused(tmp_path):
    p = tmp_path / "tokens.txt"
    p.write_text("<blk> 0\nA 1\nB 1\n", encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"tokens.txt:3: id 1 given twice \('A' and 'B'\)"):
        SymbolTable.from_file(p)


def test_byte_tokens_become_utf8_text():
    table = SymbolTable({0: "<blk>", 1: "\u2581CAF", 2: "<0xC3>", 3: "<0xA9>", 4: "\u2581OK"})
    assert table.text([1, 2, 3, 4]) == "CAF\u00e9 OK"


def test_tokens_that_do_not_cover_the_joiner(tmp_path):
    d = link_model(LSTM, tmp_path / "m", skip=("tokens.txt",))
    lines = (LSTM / "tokens.txt").read_text(encoding="utf-8").splitlines()
    (d / "tokens.txt").write_text("\n".join(lines[:400]) + "\n", encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"the joiner outputs 500 units \(ids 0..499\) "
                                             r"but the tokens file lacks id\(s\) 400, 401"):
        Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(d))))


# -- metadata ----------------------------------------------------------------------------
@pytest.mark.parametrize("changes, message", [
    ({"feature": "whisper"}, "metadata feature='whisper': the model wants features streamdec "
                             "does not compute (it computes kaldi fbank)"),
    ({"normalize_type": "per_feature"}, "metadata normalize_type='per_feature'"),
    ({"model_type": "paraformer"}, "metadata model_type='paraformer' is not a streaming "
                                   "transducer family streamdec runs (zipformer2, zipformer, "
                                   "conformer, lstm)"),
    ({"model_type": "ebranchformer"}, "metadata model_type='ebranchformer' is not"),
])
def test_metadata_asking_for_what_streamdec_does_not_do_is_refused(tmp_path, changes, message):
    d = lstm_with_encoder_metadata(tmp_path, **changes)
    with pytest.raises(ModelLoadError) as e:
        load_model(ModelConfig(model_dir=str(d)))
    assert str(e.value).startswith(f"{d / f'encoder-{STEM}.onnx'}: {message}"), str(e.value)


def test_fbank_named_in_the_metadata_is_accepted(tmp_path):
    d = lstm_with_encoder_metadata(tmp_path, feature="fbank")
    assert load_model(ModelConfig(model_dir=str(d))).meta.model_type == "lstm"


def test_a_fixed_batch_other_than_one_is_refused(tmp_path):
    import onnx

    src = FIXTURES / "E-streaming-zipformer2-chunk-16-left-128-dynamic-batch-0"
    stem = "epoch-99-avg-1-chunk-16-left-128"
    d = link_model(src, tmp_path / "m", skip=(f"decoder-{stem}.onnx",))
    model = onnx.load(str(src / f"decoder-{stem}.onnx"))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    onnx.save(model, str(d / f"decoder-{stem}.onnx"))
    with pytest.raises(ModelLoadError, match="the export fixes the batch size at 2; streamdec "
                                             "runs a dynamic batch size or a fixed batch of 1"):
        load_model(ModelConfig(model_dir=str(d)))


# -- a decode that fails after loading ------------------------------------------------------
def _failing_conformer(d: Path, chunks: int) -> None:
    """A conformer-layout encoder (x and processed_lens in, encoder_out out) that looks up a
    table by the chunk number ``processed_lens / 64``: chunk ``chunks`` is out of the
    table, and ONNX Runtime fails there. Decoder, joiner and tokens of the real conformer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.RandomState(0).randn(chunks, 16, 64).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Div", ["processed_lens", "shift"], ["chunk"]),
         helper.make_node("Gather", ["table", "chunk"], ["encoder_out"], axis=0)],
        "failing", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 75, 80]),
                    helper.make_tensor_value_info("processed_lens", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, ["N", 16, 64])],
        [numpy_helper.from_array(table, "table"),
         numpy_helper.from_array(np.array(64, np.int64), "shift")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for k, v in {"model_type": "conformer", "T": "75", "decode_chunk_len": "64"}.items():
        p = model.metadata_props.add()
        p.key, p.value = k, v
    d.mkdir()
    onnx.save(model, str(d / "encoder.onnx"))
    src = FIXTURES / "C-streaming-conformer"
    for name in ("decoder", "joiner"):
        (d / f"{name}.onnx").symlink_to(src / f"{name}-{STEM}.onnx")
    (d / "tokens.txt").symlink_to(src / "tokens.txt")


def test_a_failed_decode_is_the_files_error_and_a_non_zero_exit(tmp_path):
    d = tmp_path / "m"
    _failing_conformer(d, chunks=3)
    wav = REPO / "examples" / "hello.wav"
    for realtime in ((), ("--realtime",)):
        run = subprocess.run([sys.executable, "-m", "streamdec", "transcribe", str(wav),
                              "--model", str(d), *realtime], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 1, run.stderr
        errors = [line for line in run.stderr.splitlines()
                  if line.startswith("streamdec: error:")]
        assert len(errors) == 1, run.stderr
        assert errors[0].startswith(f"streamdec: error: {wav}: decoding failed: "), errors


def test_processed_lens_is_the_feature_frames_already_processed(tmp_path):
    """processed_lens is filled with the feature frames processed before each chunk (0, 64,
    128, ...), as sherpa-onnx feeds it: with a table of 3 chunks the fourth chunk fails
    (were it encoder frames, 0, 16, 32, 48, the fourth would still be chunk 0)."""
    import soundfile as sf

    samples, _ = sf.read(str(REPO / "examples" / "hello.wav"), dtype="float32")
    d = tmp_path / "m"
    _failing_conformer(d, chunks=3)
    rec = Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(d))))
    s = rec.create_stream()
    s.accept_waveform(16000, samples)
    s.input_finished()
    while rec.is_ready(s):
        rec.decode([s])
    assert s.state.processed_feature_frames == 3 * 64
    assert str(s.error).startswith("decoding failed: ")

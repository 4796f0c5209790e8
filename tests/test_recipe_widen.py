"""The recipe's widening of the LSTMs (``recipes/synthetic-en/widen.py``): a widened model
computes what the original did, to float32 rounding; a widened export keeps the published
LSTM layout (state0 and state1 of H cells), loads in streamdec and sherpa-onnx, and, made
from the shipped model, transcribes as the shipped model does; train.py reads its size
back from the exported model.pt."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

torch = pytest.importorskip("torch")

from streamdec import EndpointConfig, Recognizer, RecognizerConfig, SearchConfig  # noqa: E402
from streamdec import ModelConfig as RuntimeModel  # noqa: E402
from streamdec.models import BUILTIN_MODEL_DIR  # noqa: E402
from decode_utils import decode_in_pieces, finals, sherpa_decode  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "synthetic-en"
sys.path.insert(0, str(RECIPE))

import widen  # noqa: E402
from export import export  # noqa: E402
from model import ModelConfig, Transducer  # noqa: E402
from train import read_init  # noqa: E402

CFG = ModelConfig(vocab_size=29, num_phones=5, d_model=16, num_layers=2, phone_layer=1,
                  conv_channels=4, decoder_dim=8, joiner_dim=8)


def _encode(model: Transducer, x):
    model.eval()
    with torch.no_grad():
        s0, s1 = model.encoder.init_states(x.size(0))
        return model.encoder(x, s0, s1)


@pytest.mark.parametrize("steps", [(24,), (24, 40)])
def test_a_widened_model_computes_what_the_original_did(steps):
    torch.manual_seed(0)
    model = Transducer(CFG)
    x = torch.randn(3, 120, 80) * 3 - 8
    out, mid, h, c = _encode(model, x)
    cfg, weights = CFG, model.state_dict()
    for hidden in steps:  # the second step widens a model that has projections already
        weights = widen.widen_weights(weights, cfg, hidden, std=0.1, seed=hidden)
        cfg = replace(cfg, rnn_hidden_size=hidden)
    wide = Transducer(cfg)
    wide.load_state_dict(weights)
    out2, mid2, h2, c2 = _encode(wide, x)
    torch.testing.assert_close(out2, out, rtol=0, atol=1e-5)
    torch.testing.assert_close(mid2, mid, rtol=0, atol=1e-5)
    assert h2.shape == (2, 3, steps[-1]) and c2.shape == (2, 3, steps[-1])
    torch.testing.assert_close(h2[..., :16], h, rtol=0, atol=1e-5)  # the old cells run as before
    torch.testing.assert_close(c2[..., :16], c, rtol=0, atol=1e-5)
    assert float(h2[..., 16:].abs().max()) > 1e-3  # the new cells are alive: their columns learn
    proj = weights["encoder.layers.0.proj.weight"]
    assert proj.shape == (16, steps[-1]) and float(proj[:, 16:].abs().max()) == 0.0


def test_widening_to_no_more_cells_is_refused():
    weights = Transducer(CFG).state_dict()
    with pytest.raises(ValueError, match="has 16 cells already"):
        widen.widen_weights(weights, CFG, 16)


@pytest.fixture(scope="module")
def widened_shipped(tmp_path_factory):
    """The shipped model widened from 288 to 320 cells and exported (fp32)."""
    weights, arch, _ = read_init(BUILTIN_MODEL_DIR / "model.pt")
    cfg = ModelConfig(vocab_size=29, **arch)
    assert cfg.hidden == 288
    wide = replace(cfg, rnn_hidden_size=320)
    model = Transducer(wide)
    grown = widen.widen_weights(weights, cfg, 320)
    missing = model.load_state_dict(grown, strict=False).missing_keys
    assert all("head" in k for k in missing)
    out = tmp_path_factory.mktemp("wide") / "model"
    export(model.eval(), out, int8=False)
    return out


def test_a_widened_export_keeps_the_lstm_layout_and_its_size_reads_back(widened_shipped):
    import onnxruntime as ort

    enc = ort.InferenceSession(str(widened_shipped / "encoder.onnx"),
                               providers=["CPUExecutionProvider"])
    meta = enc.get_modelmeta().custom_metadata_map
    assert (meta["d_model"], meta["rnn_hidden_size"], meta["residual_dim"]) == ("320", "320", "288")
    shapes = {i.name: i.shape for i in enc.get_inputs()}
    assert shapes["state0"][0::2] == [4, 320] and shapes["state1"][0::2] == [4, 320]
    _, arch, _ = read_init(widened_shipped / "model.pt")
    assert (arch["d_model"], arch["rnn_hidden_size"]) == (288, 320)
    _, shipped, _ = read_init(BUILTIN_MODEL_DIR / "model.pt")  # no residual_dim: not widened
    assert (shipped["d_model"], shipped["rnn_hidden_size"]) == (288, 0)


def test_the_widened_shipped_model_transcribes_as_the_shipped_model(widened_shipped):
    audio, rate = sf.read(str(ROOT / "examples" / "hello.wav"), dtype="float32")
    assert rate == 16000
    off, greedy = EndpointConfig(enabled=False), SearchConfig(method="greedy")  # as sherpa's
    shipped = Recognizer(RecognizerConfig(endpoint=off, search=greedy))
    wide = Recognizer(RecognizerConfig(model=RuntimeModel(model_dir=str(widened_shipped)),
                                       endpoint=off, search=greedy))
    ours, theirs = (finals(decode_in_pieces(r, audio, 3200)) for r in (shipped, wide))
    assert len(ours) == 1 and ours[0].text
    same = [(r.token_ids, r.timestamps) for r in theirs]
    assert same == [(r.token_ids, r.timestamps) for r in ours]
    sherpa = sherpa_decode(widened_shipped, "lstm", audio, wide.meta.chunk_frames)
    assert sherpa.text.strip() == ours[0].text

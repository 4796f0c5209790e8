"""The recipe's weight averaging (``recipes/synthetic-en/average.py``): equal and weighted
averages of training checkpoints and of an exported model.pt, exact to float32 rounding;
bad weights and inputs without a training checkpoint are refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "synthetic-en"
sys.path.insert(0, str(RECIPE))

import average  # noqa: E402
from export import ScriptedTransducer, metadata  # noqa: E402
from model import ModelConfig, Transducer  # noqa: E402

CFG = ModelConfig(vocab_size=29, num_phones=5, d_model=16, num_layers=2, phone_layer=1,
                  conv_channels=4, decoder_dim=8, joiner_dim=8, simple_heads=True)


def checkpoint(path: Path, seed: int) -> dict:
    torch.manual_seed(seed)
    model = Transducer(CFG)
    state = dict(model=model.state_dict(), config=CFG.to_dict(), step=seed, phones=["<blk>", "AA"])
    torch.save(state, path)
    return state


def exported(path: Path, seed: int) -> Transducer:
    """An exported model.pt (TorchScript, no training-only heads) of a fresh model."""
    torch.manual_seed(seed)
    model = Transducer(CFG).eval()
    union = {k: v for part in metadata(CFG).values() for k, v in part.items()}
    torch.jit.script(ScriptedTransducer(model, union)).save(str(path))
    return model


def test_weighted_average_of_two_checkpoints(tmp_path):
    a = checkpoint(tmp_path / "a.pt", 1)
    b = checkpoint(tmp_path / "b.pt", 2)
    out = average.average([tmp_path / "a.pt", tmp_path / "b.pt"], [1.0, 3.0])
    assert out["step"] == 2 and out["phones"] == ["<blk>", "AA"] and "opt" not in out
    for k, v in out["model"].items():
        if v.is_floating_point():
            torch.testing.assert_close(v, 0.25 * a["model"][k] + 0.75 * b["model"][k], rtol=0, atol=1e-6)
    equal = average.average([tmp_path / "a.pt", tmp_path / "b.pt"])
    k = "joiner.output_linear.weight"
    torch.testing.assert_close(equal["model"][k], (a["model"][k] + b["model"][k]) / 2, rtol=0, atol=1e-6)
    Transducer(CFG).load_state_dict(out["model"])  # loads as a training checkpoint


def test_an_exported_model_pt_joins_with_its_weights_and_lends_no_heads(tmp_path):
    a = checkpoint(tmp_path / "a.pt", 1)
    shipped = exported(tmp_path / "model.pt", 3)
    out = average.average([tmp_path / "model.pt", tmp_path / "a.pt"], [0.6, 0.4])["model"]
    ref = shipped.state_dict()
    k = "joiner.output_linear.weight"
    torch.testing.assert_close(out[k], 0.6 * ref[k] + 0.4 * a["model"][k], rtol=0, atol=1e-6)
    heads = [k for k in out if "head" in k]
    assert heads and all(torch.equal(out[k], a["model"][k]) for k in heads)  # model.pt has none


@pytest.mark.parametrize("weights", [[1.0], [1.0, -1.0], [0.0, 0.0]])
def test_bad_weights_are_refused(tmp_path, weights):
    checkpoint(tmp_path / "a.pt", 1)
    checkpoint(tmp_path / "b.pt", 2)
    with pytest.raises(ValueError, match="--weights"):
        average.average([tmp_path / "a.pt", tmp_path / "b.pt"], weights)


def test_an_exported_model_alone_is_refused(tmp_path):
    exported(tmp_path / "model.pt", 3)
    with pytest.raises(ValueError, match="training checkpoint"):
        average.average([tmp_path / "model.pt"])

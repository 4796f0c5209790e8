"""Neural LM shallow fusion: the ONNX LM interface (the recipe's exporter on random
weights), exact fused scores against the LM run step by step, every beam search through
the Recognizer (chunking and batch invariance), and bad LM files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import search_reference as ref
from conftest import make_recognizer
from decode_utils import decode_in_pieces, decode_together, finals, key
from model_factory import test_audio
from streamdec.errors import ModelLoadError
from streamdec.search import SearchConfig, make_search
from streamdec.search.neural_lm import NeuralLm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "synthetic-en"))

BEAM_METHODS = ["modified_beam", "alsd", "tsd", "beam", "nsc"]


def export_lm(path: Path, vocab: int, seed: int = 0) -> Path:
    import torch
    from train_lm import UnitLstm, export

    torch.manual_seed(seed)
    model = UnitLstm(vocab, embed=8, hidden=16)
    with torch.no_grad():
        model.out.weight.mul_(8.0)  # peaked enough to change a search
    export(model, path, sos=0)
    return path


@pytest.fixture(scope="module")
def lm_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    return {"toy": export_lm(root / "toy.onnx", ref.ToyModel().meta.vocab_size),
            "test_model": export_lm(root / "test.onnx", 12, seed=1)}


def lm_steps(lm: NeuralLm, tokens) -> tuple[list[float], float]:
    """log p of each token and of eos, running the ONNX LM one token at a time."""
    state = np.zeros((1, lm.state_size), np.float32)
    out, prev = [], lm.sos_id
    for t in list(tokens) + [None]:
        logp, state = lm._session.run(None, {"token": np.array([prev], np.int64),
                                             "state": state})
        out.append(float(logp[0, lm.eos_id if t is None else t]))
        prev = t
    return out[:-1], out[-1]


def test_fused_scores_are_acoustic_plus_scaled_lm_log_probs(lm_files):
    """Each child by unit u gains scale * log p_LM(u | its units), blanks gain nothing, the
    segment end gains scale * log p_LM(eos); checked against the LM run step by step."""
    from streamdec.search.beam_utils import finished, score_hyps

    model = ref.ToyModel(seed=4)
    enc = model.random_encoder_out(3, seed=4)
    scale = 0.7
    fused = make_search(model, SearchConfig(method="modified_beam", lm_file=str(lm_files["toy"]),
                                            lm_scale=scale))
    plain = make_search(model, SearchConfig(method="modified_beam"))
    hf, hp = fused.init_state().hyps[0], plain.init_state().hyps[0]
    history: list[int] = []
    for frame, token in enumerate((3, 2, 3)):
        sf = score_hyps(fused, [hf], enc[frame:frame + 1], [None])
        sp = score_hyps(plain, [hp], enc[frame:frame + 1], [None])
        want = scale * np.array(next_unit_log_probs(fused.lm, history))
        want[0] = 0.0  # blank
        np.testing.assert_allclose(sf.total - sp.total, (hf.score - hp.score) + want[None],
                                   atol=1e-4)
        hf, hp = sf.child(0, token, frame), sp.child(0, token, frame)
        history.append(token)
    token_lp, eos = lm_steps(fused.lm, history)
    assert hf.score - hp.score == pytest.approx(scale * sum(token_lp), abs=1e-4)
    state = fused.init_state()
    end = finished(fused, [hf], state)[0]
    assert end.score - hf.score == pytest.approx(scale * eos, abs=1e-4)


def next_unit_log_probs(lm: NeuralLm, history) -> list[float]:
    state = np.zeros((1, lm.state_size), np.float32)
    logp = None
    for t in [lm.sos_id] + list(history):
        logp, state = lm._session.run(None, {"token": np.array([t], np.int64), "state": state})
    return [float(x) for x in logp[0]]


@pytest.mark.parametrize("method", BEAM_METHODS)
def test_every_beam_search_fuses_with_chunking_and_batch_invariance(model_dirs, lm_files,
                                                                    method):
    rec = make_recognizer(model_dirs["lstm"])
    search = SearchConfig(method=method, beam=3, lm_file=str(lm_files["test_model"]),
                          lm_scale=0.5)
    audio = test_audio(3.0, seed=21)
    want = finals(decode_in_pieces(rec, audio, len(audio), search=search))
    plain = finals(decode_in_pieces(rec, audio, len(audio),
                                    search=SearchConfig(method=method, beam=3)))
    assert any(r.token_ids for r in want)
    assert [r.score for r in want] != pytest.approx([r.score for r in plain])
    got = finals(decode_in_pieces(rec, audio, 777, search=search))
    assert key(got) == key(want)
    np.testing.assert_allclose([r.score for r in got], [r.score for r in want], atol=1e-4)
    audios = [test_audio(1.0 + 0.5 * n, seed=60 + n) for n in range(4)]
    configs = [search, SearchConfig(method=method, beam=3)] * 2
    alone = [finals(decode_in_pieces(rec, a, 1600, search=c)) for a, c in zip(audios, configs)]
    events = decode_together(rec, [rec.create_stream(search=c) for c in configs], audios, 1600)
    for a, ev in zip(alone, events):
        assert key(finals(ev)) == key(a)


def test_bad_lm_files_are_refused(tmp_path, lm_files):
    with pytest.raises(ModelLoadError):
        NeuralLm(tmp_path / "missing.onnx", 7)
    (tmp_path / "junk.onnx").write_bytes(b"not onnx")
    with pytest.raises(ModelLoadError):
        NeuralLm(tmp_path / "junk.onnx", 7)
    with pytest.raises(ModelLoadError):  # an LM over another unit set
        NeuralLm(lm_files["toy"], 29)

"""bench/decode/beam_parity.py: its replay of sherpa-onnx's modified beam search rule gives
sherpa-onnx's own transcript on the published layouts of four model families, and a tie
(equal float32 scores) is recorded and can be taken in the other order."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.decode.beam_parity import SherpaRule, log_softmax32  # noqa: E402

LAYOUTS = REPO / "tests" / "fixtures" / "published-layouts"
FAMILIES = ["A-streaming-zipformer2-chunk-16-left-128", "B-streaming-zipformer-v1",
            "C-streaming-conformer", "D-lstm"]


@pytest.mark.slow
@pytest.mark.parametrize("layout", FAMILIES)
def test_the_replay_of_sherpa_onnx_rule_gives_its_transcript(layout, tmp_path):
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text(f"{REPO / 'examples' / 'hello.wav'}\tHELLO WORLD\n")
    out = tmp_path / "parity.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "decode" / "beam_parity.py"), "--out", str(out),
                    "--model-dir", str(LAYOUTS / layout), "--manifest", str(manifest),
                    "--utterances", "1"], check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert report["counts"] == {"utterances": 1, "identical": 1, "replay_identical": 1,
                                "explained": 0, "unexplained": 0}
    assert report["setup"]["model"]["files"]["encoder"]["name"].startswith("encoder-epoch-99")


class ConstantJoiner:
    """Joiner logits fixed per call: blank and token 1 equal, the rest far below."""

    def decode(self, contexts):
        return np.zeros((len(contexts), 4), np.float32)

    def join(self, enc, dec):
        logits = np.full((len(enc), 5), -30.0, np.float32)
        logits[:, 0] = logits[:, 1] = 2.0
        return logits


def test_an_exact_tie_is_recorded_and_its_other_order_taken():
    rec = SimpleNamespace(model=ConstantJoiner(), meta=SimpleNamespace(context_size=2,
                          blank_id=0), symbols=SimpleNamespace(unk_id=None))
    rule = SherpaRule(rec, beam=1, ulps=0.0)
    chunks = [np.zeros((1, 4), np.float32)]
    plain = rule.run(chunks)
    assert plain.chunk_best == [((), ())]  # index order: blank (index 0) first
    [tie] = plain.ties
    assert (tie.frame, tie.kind, tie.first, tie.second, tie.ulps) == (0, "edge", ((), 0),
                                                                      ((), 1), 0.0)
    flipped = rule.run(chunks, frozenset({(0, ((), 0), ((), 1))}))
    assert flipped.chunk_best == [((1,), (0,))]
    assert plain.chunk_best != flipped.chunk_best


def test_log_softmax32_is_a_log_softmax_to_float32_rounding():
    x = np.random.default_rng(0).normal(size=(3, 500)).astype(np.float32) * 4
    ref = x.astype(np.float64) - np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True))
    got = log_softmax32(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6)

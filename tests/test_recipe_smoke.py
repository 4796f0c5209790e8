"""recipes/synthetic-en/run.sh --smoke: text, dev audio, features, a few training steps,
both fine-tuning phases, the real-voice stage and the neural-voice stage (on a stand-in for
Debian's Asterisk prompt folders), the real-English stage (on a stand-in for the shared real-en sets), export and evaluation, all in a temporary folder (never touching the shipped model)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
from test_real_en_recipe import fake_real_en
from test_realvoice_recipe import fake_asterisk

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "recipes" / "synthetic-en" / "run.sh"


def test_smoke_run_exports_a_loadable_model(tmp_path):
    shipped = ROOT / "streamdec" / "assets" / "synthetic-en" / "encoder.onnx"
    before = shipped.stat().st_mtime_ns if shipped.exists() else None
    sounds, docs = fake_asterisk(tmp_path / "asterisk")
    real = fake_real_en(tmp_path / "real-en")
    env = dict(os.environ, ASTERISK_SOUNDS=str(sounds), ASTERISK_DOCS=str(docs), REAL_EN=str(real))
    proc = subprocess.run(["bash", str(RUN), "--smoke", "--finetune-min", "1", "--realvoice-min", "1",
                           "--neural-min", "1", "--real-en-min", "1",
                           "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=420, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    model = tmp_path / "exp" / "model"
    for name in ("encoder.onnx", "decoder.onnx", "joiner.onnx", "encoder.int8.onnx", "tokens.txt", "model.pt"):
        assert (model / name).is_file(), name
    enc = ort.InferenceSession(str(model / "encoder.onnx"), providers=["CPUExecutionProvider"])
    meta = enc.get_modelmeta().custom_metadata_map
    layers, d = int(meta["num_encoder_layers"]), int(meta["d_model"])
    out = enc.run(None, {"x": np.zeros((3, int(meta["T"]), 80), np.float32),
                         "state0": np.zeros((layers, 3, d), np.float32),
                         "state1": np.zeros((layers, 3, d), np.float32)})
    assert out[0].shape[:2] == (3, int(meta["decode_chunk_len"]) // 4)
    assert "CER" in proc.stdout and (tmp_path / "exp" / "curves.tsv").is_file()
    for phase in ("finetune", "finetune2", "realvoice"):  # each ran from the previous checkpoint
        assert "init from" in (tmp_path / "exp" / phase / "train.log").read_text(), phase
    assert f"init from {tmp_path / 'exp' / 'finetune2' / 'best.pt'}" in (
        tmp_path / "exp" / "realvoice" / "train.log").read_text()
    shards = sorted(p.name for p in (tmp_path / "data" / "train-rv").glob("shard-*.npz"))
    assert shards == ["shard-00000.npz", "shard-piper-00000.npz", "shard-real-00000.npz"], shards
    assert f"init from {tmp_path / 'exp' / 'realvoice' / 'best.pt'}" in (
        tmp_path / "exp" / "neural" / "train.log").read_text()
    shards = sorted(p.name for p in (tmp_path / "data" / "train-nv").glob("shard-*.npz"))
    assert shards == ["shard-00000.npz", "shard-piper-00000.npz", "shard-real-00000.npz"], shards
    piper = np.load(tmp_path / "data" / "train-nv" / "shard-piper-00000.npz")
    assert len(piper["texts"]) == 4 and all(str(d).startswith("piper:joe:") for d in piper["desc"])
    assert len(list((tmp_path / "data" / "dev" / "piper").glob("*.wav"))) == 2
    assert f"init from {tmp_path / 'exp' / 'neural' / 'best.pt'}" in (
        tmp_path / "exp" / "real-en" / "train.log").read_text()
    shards = sorted(p.name for p in (tmp_path / "data" / "train-en").glob("shard-*.npz"))
    assert shards == ["shard-00000.npz", "shard-real-en-c0-00000.npz"], shards
    assert (tmp_path / "data" / "dev-real" / "heldout" / "refs.tsv").read_text().count("\n") == 2
    assert "heldout:CER=" in (tmp_path / "exp" / "real-en" / "curves.tsv").read_text()
    assert f"exported {tmp_path / 'exp' / 'real-en' / 'best.pt'}" in proc.stdout
    if before is not None:
        assert shipped.stat().st_mtime_ns == before

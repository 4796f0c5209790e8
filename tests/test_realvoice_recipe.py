"""The real-voice stage of recipes/synthetic-en: the Asterisk prompt reader, the capture-path
augmentations and the loss for utterances without an English transcript."""

from __future__ import annotations

import gzip
import importlib
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "synthetic-en"
# the recipe's modules by their plain names (as its scripts import them); another recipe's
# test may have imported a module of the same name (punct-case's data.py) first
_NAMES = ("augment", "real_voices", "data", "model", "train", "units", "greedy", "score",
          "export", "rnnt_loss", "synth", "shards")


def recipe_module(name: str):
    for mod in _NAMES:
        loaded = sys.modules.get(mod)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").parent != RECIPE:
            del sys.modules[mod]
    if sys.path[0] != str(RECIPE):
        sys.path.insert(0, str(RECIPE))
    return importlib.import_module(name)


augment = recipe_module("augment")
real_voices = recipe_module("real_voices")

TRANSCRIPT = """\ufeff; Core Asterisk Sounds in Spanish

agent-pass: Por favor, ingrese su clave (tono serio) seguida de la tecla de numero.
beep: [un simple tono]
digits/1: uno
empty:
not-installed: Este archivo no existe.
"""


def fake_asterisk(root: Path) -> tuple[Path, Path]:
    """Debian's layout: sounds/SPEAKER/NAME.wav (8 kHz) and the package's gzipped list."""
    sounds, docs = root / "sounds", root / "docs"
    speaker = sounds / "es_MX_f_Allison"
    (speaker / "digits").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, seconds in (("agent-pass", 1.2), ("digits/1", 0.5), ("beep", 0.3), ("empty", 0.3)):
        t = np.arange(int(8000 * seconds)) / 8000
        x = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * rng.standard_normal(len(t)))
        sf.write(speaker / f"{name}.wav", np.clip(x, -1, 1), 8000, subtype="PCM_16")
    doc = docs / "asterisk-core-sounds-es"
    doc.mkdir(parents=True)
    with gzip.open(doc / "core-sounds-es.txt.gz", "wt", encoding="utf-8") as f:
        f.write(TRANSCRIPT)
    return sounds, docs


def test_transcripts_drop_comments_tones_notes_and_empty_lines(tmp_path):
    _, docs = fake_asterisk(tmp_path)
    assert real_voices.transcripts("es", docs) == {
        "agent-pass": "Por favor, ingrese su clave seguida de la tecla de numero.",
        "digits/1": "uno",
        "not-installed": "Este archivo no existe.",
    }


@pytest.mark.parametrize("language", ["en", "en_GB", "en-au"])
def test_the_english_prompts_are_refused(tmp_path, language):
    with pytest.raises(ValueError, match="reserved"):
        real_voices.transcripts(language, tmp_path)


def test_prompts_are_the_installed_wavs_with_a_transcript_in_order(tmp_path):
    sounds, docs = fake_asterisk(tmp_path)
    got = real_voices.prompts(sounds, docs)
    assert [(p.path.relative_to(sounds).as_posix(), p.language, p.text) for p in got] == [
        ("es_MX_f_Allison/agent-pass.wav", "es", "Por favor, ingrese su clave seguida de la tecla de numero."),
        ("es_MX_f_Allison/digits/1.wav", "es", "uno"),
    ]
    with pytest.raises(FileNotFoundError, match="no Asterisk prompts"):
        real_voices.prompts(tmp_path / "nothing", docs)


def test_no_english_speaker_is_listed():
    assert all(not lang.startswith("en") for lang, _ in real_voices.SPEAKERS)
    assert all(not folder.startswith("en") for _, folder in real_voices.SPEAKERS)


def test_real_shards_have_no_english_text_and_spanish_phonemes(tmp_path):
    sounds, docs = fake_asterisk(tmp_path)
    out = tmp_path / "shards"
    proc = subprocess.run([sys.executable, str(RECIPE / "prepare_extra.py"), str(out), "--source", "real",
                           "--copies", "2", "--jobs", "1", "--sounds", str(sounds), "--docs", str(docs)],
                          capture_output=True, text=True, timeout=120, cwd=RECIPE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    z = np.load(out / "shard-real-00000.npz")
    assert len(z["lens"]) == 4 and list(z["texts"]) == [""] * 4
    assert z["feats"].shape == (int(z["lens"].sum()), 80)
    phones = sorted(set(str(p) for p in z["phones"]))
    assert len(phones) == 2 and any("ˈuno" in p for p in phones), phones  # espeak-ng -v es-419
    assert all(str(d).startswith("real:es_MX_f_Allison|") for d in z["desc"])


def test_alaw_round_trip_is_g711():
    x = np.linspace(-1, 1, 200001)
    y = augment.alaw_roundtrip(x)
    assert y.dtype == np.float32 and len(np.unique(y)) == 256  # 8 bits
    away = np.abs(x) >= 1 / 8192  # what rounds to the 13-bit zero may come back either side
    assert np.all(np.sign(y[away]) == np.sign(x[away]))
    # half a step of the top segment (128 / 4096) plus the 13-bit rounding
    assert float(np.max(np.abs(y - x))) <= 1 / 64 + 1 / 8192 + 1e-7
    small = np.linspace(-0.007, 0.007, 10001)  # the two lowest segments: steps of 2 / 4096
    assert float(np.max(np.abs(augment.alaw_roundtrip(small) - small))) <= 1 / 4096 + 1 / 8192 + 1e-7
    assert augment.alaw_roundtrip(np.array([0.0, 1 / 4096, -3 / 4096])).tolist() == [1 / 4096, 1 / 4096, -3 / 4096]


def test_gsm_round_trip_keeps_the_length_and_most_of_the_signal():
    t = np.arange(8000) / 8000
    x = (0.4 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    y = augment.gsm_roundtrip(x)
    assert y.shape == x.shape and y.dtype == np.float32
    c = np.correlate(y[1000:7000], x[1000:7000]) / np.sqrt(np.sum(y[1000:7000] ** 2) * np.sum(x[1000:7000] ** 2))
    assert float(c[0]) > 0.8


@pytest.mark.parametrize("cents", [-400, 300])
def test_pitch_shift_moves_a_tone_by_the_cents_at_the_same_length_and_level(cents):
    t = np.arange(16000) / 16000
    x = (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    y = augment.pitch_shift(x, cents)
    assert y.shape == x.shape and y.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(y[2000:14000] * np.hanning(12000)))
    peak_hz = np.argmax(spectrum) * 16000 / 12000
    assert abs(peak_hz - 220 * 2 ** (cents / 1200)) < 4  # the FFT's bins are 1.33 Hz apart
    assert 0.4 < float(np.max(np.abs(y))) < 0.6


def test_browser_resample_keeps_a_tone_and_the_length_within_a_sample():
    t = np.arange(16000) / 16000
    x = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    for seed in range(6):
        y = augment.browser_resample(x, random.Random(seed))
        assert abs(len(y) - len(x)) <= 1
        n = min(len(x), len(y)) - 200
        assert float(np.max(np.abs(y[200:n] - x[200:n]))) < 0.05


def test_channel_augmentation_is_off_for_the_shipped_recipe():
    x = (0.3 * np.sin(np.arange(16000) / 7)).astype(np.float32)
    for seed in range(40):
        _, _, tag = augment.augment(x, random.Random(seed))
        assert "resample" not in tag and "clip" not in tag
    tags = {t for seed in range(200) for t in augment.augment(x, random.Random(seed), channel=True)[2].split("+")}
    assert {"resample", "clip", "tel"} <= tags


def test_utterances_without_text_train_only_the_phoneme_head():
    train, data, model_module = (recipe_module(n) for n in ("train", "data", "model"))
    Utterance, collate = data.Utterance, data.collate
    ModelConfig, Transducer = model_module.ModelConfig, model_module.Transducer

    torch.manual_seed(0)
    model = Transducer(ModelConfig(vocab_size=29, num_phones=12, d_model=32, num_layers=2))
    rng = np.random.default_rng(1)

    def utt(text_ids, phones, frames):
        return Utterance(rng.standard_normal((frames, 80)).astype(np.float16), text_ids, phones, "", "")

    english = [utt([3, 4, 1, 5], [1, 2, 3], 120), utt([6, 7], [4, 5], 100)]
    foreign = [utt([], [6, 7, 8, 9], 110)]
    model.eval()  # no dropout: the two computations below must agree
    mixed, parts = train.losses(model, collate(english + foreign), 0.3, 0.2, "mixed")
    alone, parts_alone = train.losses(model, collate(english), 0.3, 0.2, "mixed")
    # the transducer and char CTC terms see only the English utterances
    assert parts["rnnt"] == pytest.approx(parts_alone["rnnt"], rel=1e-4)
    assert parts["ctc"] == pytest.approx(parts_alone["ctc"], rel=1e-4)
    assert parts["phone"] != pytest.approx(parts_alone["phone"], rel=1e-3)
    # a batch of foreign voices only: no transducer term, no gradient into decoder or joiner
    model.zero_grad()
    loss, parts = train.losses(model, collate(foreign), 0.3, 0.2, "mixed")
    loss.backward()
    assert set(parts) == {"phone"}
    for name, p in model.named_parameters():
        if name.startswith(("decoder.", "joiner.", "ctc_head.")):
            assert p.grad is None or float(p.grad.abs().max()) == 0.0, name
    assert float(model.phone_head.weight.grad.abs().max()) > 0

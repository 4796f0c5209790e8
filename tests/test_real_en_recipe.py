"""The real-English stage of the recipe (recipes/synthetic-en/real_en.py, the real-en source
of prepare_extra.py, make_dev.py --real-en, augment's real-voice augmentations) on a
stand-in for ``../shared/data/real-en``: each set's manifest and folder layout as the
shared data has them, with short made-up clips (the tests must not need the data itself)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "synthetic-en"
sys.path.insert(0, str(RECIPE))

import augment  # noqa: E402
import real_en  # noqa: E402

# (set, manifest path, transcript as the corpus writes it): two speakers per set where the
# set holds speakers out, one of them held out
CLIPS = [
    ("mini_librispeech_train_clean_5", "audio/LibriSpeech/train-clean-5/1088/134315/1088-134315-0000.opus",
     "AS YOU KNOW"),
    ("mini_librispeech_train_clean_5", "audio/LibriSpeech/train-clean-5/1867/154075/1867-154075-0001.opus",
     "HELD OUT SPEAKER"),
    ("librispeech_textgrid_504", "audio/sample_data_libriSpeech/audio/4088/158077/4088-158077-0000.opus",
     "THE WAR MESSAGE"),
    ("an4", "audio/wav/train/an4_clstk/fash/an251-fash-b.opus", "YES"),
    ("an4", "audio/wav/test/an4test_clstk/fjlp/an416-fjlp-b.opus", "ENTER NINE ONE"),
    ("vctk_p239", "audio/data/VCTK-Corpus/wav48/p239/p239_001.opus", "Please call Stella."),
    ("ljspeech_7", "audio/coqui/tests/data/ljspeech/wavs/LJ001-0002.opus", "in being comparatively modern."),
    ("speechcommands_test_v2", "audio/dataset/_unknown_/backward_0c540988_nohash_0.wav.opus", "backward"),
    ("picovoice_wakewords", "audio/audio/alexa/0.opus", "alexa"),
    ("fsdd", "audio/recordings/3_george_10.opus", "three"),
]


def fake_real_en(root: Path) -> Path:
    """The sets of real_en.SENTENCE_SETS + WORD_SETS with CLIPS in them: 16 kHz Opus, a
    word clip padded with 0.5 s of digital silence either side as the word sets are."""
    rng = np.random.default_rng(0)
    for corpus, rel, text in CLIPS:
        path = root / corpus / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        t = np.arange(int(16000 * 0.8)) / 16000
        x = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * rng.standard_normal(len(t)))
        if corpus in real_en.WORD_SETS:
            x = np.concatenate([np.zeros(8000), x, np.zeros(8000)])
        sf.write(path, np.clip(x, -1, 1), 16000, format="OGG", subtype="OPUS")
        with open(root / corpus / "manifest.tsv", "a", encoding="utf-8") as f:
            f.write(f"{rel}\t{text}\n")
    return root


def test_speakers_are_read_from_each_corpus_paths():
    got = [real_en.speaker_of(corpus, rel) for corpus, rel, _ in CLIPS]
    assert got == ["1088", "1867", "4088", "fash", "fjlp", "vctk_p239", "ljspeech_7", "0c540988",
                   "picovoice_wakewords:alexa", "george"]


def test_held_out_speakers_are_never_in_training(tmp_path):
    data = fake_real_en(tmp_path)
    train, held = real_en.clips("train", data), real_en.clips("heldout", data)
    assert [(c.corpus, c.speaker, c.text) for c in held] == [
        ("mini_librispeech_train_clean_5", "1867", "HELD OUT SPEAKER"),
        ("an4", "fjlp", "ENTER NINE ONE"),
    ]
    assert [c.text for c in train] == ["AS YOU KNOW", "THE WAR MESSAGE", "YES", "PLEASE CALL STELLA",
                                       "IN BEING COMPARATIVELY MODERN", "BACKWARD", "ALEXA", "THREE"]
    assert [c.is_word for c in train] == [False] * 5 + [True] * 3
    assert not {(c.corpus, c.speaker) for c in train} & {(c.corpus, c.speaker) for c in held}
    with pytest.raises(ValueError, match="'train' or 'heldout'"):
        real_en.clips("dev", data)


def test_trim_keeps_the_margin_around_the_speech():
    x = np.concatenate([np.zeros(8000), 0.5 * np.ones(3200), np.zeros(8000)]).astype(np.float32)
    y = real_en.trim(x, 16000, margin_s=0.15)
    assert len(y) == 3200 + 2 * 2400  # the speech and 0.15 s either side
    assert float(np.abs(y[2400:5600] - 0.5).max()) == 0.0


def test_real_voice_augmentations_keep_rate_and_length():
    rng = random.Random(3)
    t = np.arange(16000) / 16000
    x = (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    y = augment.opus_roundtrip(x, rng)
    assert y.dtype == np.float32 and len(y) == 16000
    assert float(np.sqrt(np.mean((y - x) ** 2))) < 0.1  # a codec's error, not another signal
    faster = augment.tempo(x, 1.1)
    assert abs(len(faster) - 16000 / 1.1) < 400  # sox tempo: 1.1x faster, within 25 ms
    seen = set()
    for seed in range(40):
        out, rate, tag = augment.augment(x, random.Random(seed), channel=True, voice=True)
        assert rate in (8000, 16000) and out.dtype == np.float32
        seen |= {part.rstrip("+-.0123456789") for part in tag.split("+")}
    assert {"tempo", "pitch", "opus"} <= seen, seen


def test_prepare_extra_real_en_writes_training_speakers_only(tmp_path):
    data = fake_real_en(tmp_path / "real-en")
    out = tmp_path / "shards"
    env = dict(os.environ, REAL_EN=str(data), PYTHONPATH=f"{RECIPE}:{ROOT}")
    subprocess.run([sys.executable, str(RECIPE / "prepare_extra.py"), str(out), "--source", "real-en",
                    "--copies", "2", "--word-copies", "1", "--shard-size", "4", "--jobs", "1"],
                   check=True, env=env, capture_output=True, timeout=120)
    names = sorted(p.name for p in out.glob("shard-*.npz"))
    assert names == ["shard-real-en-c0-00000.npz", "shard-real-en-c0-00001.npz",
                     "shard-real-en-c1-00000.npz", "shard-real-en-c1-00001.npz"]
    texts = [str(t) for n in names for t in np.load(out / n)["texts"]]
    assert len(texts) == 8 + 5  # copy 0: every training clip; copy 1: the sentences only
    assert "HELD OUT SPEAKER" not in texts and "ENTER NINE ONE" not in texts
    subprocess.run([sys.executable, str(RECIPE / "make_dev.py"), str(tmp_path / "dev"), "--real-en"],
                   check=True, env=env, capture_output=True, timeout=60)
    refs = (tmp_path / "dev" / "heldout" / "refs.tsv").read_text().splitlines()
    assert refs == ["mini_librispeech_train_clean_5-1867-154075-0001\tHELD OUT SPEAKER",
                    "an4-an416-fjlp-b\tENTER NINE ONE"]
    assert sf.info(tmp_path / "dev" / "heldout" / "an4-an416-fjlp-b.wav").samplerate == 16000


def test_lm_text_adds_the_training_speakers_transcripts_only(tmp_path):
    from make_lang import lm_text

    data = fake_real_en(tmp_path / "real-en")
    train = tmp_path / "train.txt"
    train.write_text("A SYNTHETIC SENTENCE\n", encoding="utf-8")
    assert lm_text(train, tmp_path / "lm.txt", 0, data) == train  # K = 0: the text alone
    lines = lm_text(train, tmp_path / "lm.txt", 2, data).read_text(encoding="utf-8").splitlines()
    assert lines[0] == "A SYNTHETIC SENTENCE"
    assert lines.count("AS YOU KNOW") == 2 and lines.count("PLEASE CALL STELLA") == 2
    assert lines.count("ALEXA") == 2 and lines.count("THREE") == 2
    assert "HELD OUT SPEAKER" not in lines and "ENTER NINE ONE" not in lines  # held-out speakers
    assert len(lines) == 1 + 2 * 8

"""Real English speech with transcripts: the sets of ``../shared/data/real-en`` (16 kHz
Ogg Opus, one ``manifest.tsv`` per set: path TAB transcript; see its SOURCES.md for
licences and attributions), split by speaker into training and held-out utterances.

Held out (never trained on; they pick the checkpoints): 3 of the 28 Mini LibriSpeech
speakers and 4 of AN4's 9 test speakers (2 women, 2 men: AN4 names its speaker folders
f... and m...). The real dev set of the reports (pocketsphinx-testdata, the alsa-utils
phrases) is not here at all: it is never trained or tuned on.

Sentence sets (read speech) and word sets (one word or digit a clip, padded with
silence: ``trim`` cuts the padding down to a margin) are told apart, so the recipe can
render them a different number of times.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from text_norm import normalize

__all__ = ["DATA", "SENTENCE_SETS", "WORD_SETS", "HELD_OUT", "Clip", "clips", "speaker_of", "trim"]

DATA = Path(os.environ.get("REAL_EN", Path(__file__).resolve().parents[3] / "shared" / "data" / "real-en"))
SENTENCE_SETS = ("mini_librispeech_train_clean_5", "librispeech_textgrid_504", "an4", "vctk_p239", "ljspeech_7")
WORD_SETS = ("speechcommands_test_v2", "picovoice_wakewords", "fsdd")
HELD_OUT = {"mini_librispeech_train_clean_5": {"1867", "3947", "7859"},
            "an4": {"fjlp", "fvap", "marh", "mjgm"}}


@dataclass(frozen=True)
class Clip:
    path: Path
    text: str  # normalised to the model's units (text_norm.normalize)
    corpus: str
    speaker: str

    @property
    def is_word(self) -> bool:
        return self.corpus in WORD_SETS


def speaker_of(corpus: str, rel: str) -> str:
    """The speaker of a manifest path, as each corpus names it (a set whose speakers the
    path does not name is one speaker per file's prefix)."""
    parts = rel.split("/")
    if corpus in ("mini_librispeech_train_clean_5", "librispeech_textgrid_504"):
        return Path(rel).name.split("-")[0]
    if corpus == "an4":
        return parts[-2]
    if corpus == "fsdd":
        return Path(rel).name.split("_")[1]
    if corpus == "speechcommands_test_v2":
        return Path(rel).name.split("_")[-3]
    if corpus in ("vctk_p239", "ljspeech_7"):
        return corpus
    return f"{corpus}:{parts[-2]}"  # picovoice: speakers are not named; the folder is the word


def clips(split: str, data: Path = DATA, sets: tuple[str, ...] = SENTENCE_SETS + WORD_SETS) -> list[Clip]:
    """The clips of ``split`` ('train' or 'heldout'), in manifest order, with a non-empty
    normalised transcript."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split {split!r}: 'train' or 'heldout'")
    out = []
    for corpus in sets:
        held = HELD_OUT.get(corpus, set())
        for line in (data / corpus / "manifest.tsv").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rel, text = line.split("\t", 1)
            speaker = speaker_of(corpus, rel)
            if (speaker in held) != (split == "heldout"):
                continue
            norm = normalize(text)
            if norm:
                out.append(Clip(data / corpus / rel, norm, corpus, speaker))
    return out


def trim(x: np.ndarray, sample_rate: int = 16000, margin_s: float = 0.15) -> np.ndarray:
    """Cut leading and trailing silence to ``margin_s``: frames of 10 ms whose energy is
    within 35 dB of the loudest frame count as speech."""
    hop = sample_rate // 100
    n = len(x) // hop
    if n < 3:
        return x
    energy = 10 * np.log10(np.mean(x[:n * hop].reshape(n, hop) ** 2, axis=1) + 1e-10)
    voiced = np.nonzero(energy > energy.max() - 35)[0]
    margin = int(margin_s * sample_rate)
    start = max(0, int(voiced[0]) * hop - margin)
    end = min(len(x), (int(voiced[-1]) + 1) * hop + margin)
    return x[start:end]

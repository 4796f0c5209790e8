"""Speech synthesis with espeak-ng and flite, plus the voice inventory and its splits.

Every synthesised utterance comes back as 16 kHz float32 mono samples in [-1, 1]
and the IPA phoneme string espeak-ng says for the text (used by the auxiliary
phoneme CTC loss; for flite the IPA is espeak-ng's reading of the same text).

Voice splits (fixed, so training never sees a dev voice):
- espeak-ng: every English base voice x every variant, except ``DEV_ESPEAK_VARIANTS``,
  which only the espeak dev set uses.
- flite: ``TRAIN_FLITE_VOICES`` for training, ``DEV_FLITE_VOICE`` only for dev.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import soundfile as sf
import soxr

SAMPLE_RATE = 16000
ESPEAK_BASES = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp",
                "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
DEV_ESPEAK_VARIANTS = ["Andy", "Belinda", "Jacky", "Linda", "Mario", "Steph2", "Zac",
                       "female3", "klatt4", "male5"]
TRAIN_FLITE_VOICES = ["kal", "kal16", "awb", "rms"]
DEV_FLITE_VOICE = "slt"


@dataclass(frozen=True)
class Voice:
    """One synthesis setting. engine: 'espeak' or 'flite'."""

    engine: str
    name: str  # espeak 'base+variant', flite voice name
    rate: float  # espeak words per minute; flite duration_stretch
    pitch: float  # espeak pitch 0-99; flite f0 mean in Hz
    spread: float = 0.0  # espeak word gap (10 ms units); flite f0 stddev

    def describe(self) -> str:
        return f"{self.engine}:{self.name}:r{self.rate:g}:p{self.pitch:g}:s{self.spread:g}"


@lru_cache(maxsize=1)
def espeak_variants() -> list[str]:
    out = subprocess.run(["espeak-ng", "--voices=variant"], check=True, capture_output=True,
                         text=True).stdout.splitlines()[1:]
    return sorted({line.split()[3] for line in out if line.strip()})


def train_espeak_variants() -> list[str]:
    return [v for v in espeak_variants() if v not in DEV_ESPEAK_VARIANTS]


def random_espeak_voice(rng: random.Random, variants: list[str]) -> Voice:
    return Voice("espeak", f"{rng.choice(ESPEAK_BASES)}+{rng.choice(variants)}",
                 rate=rng.randint(120, 230), pitch=rng.randint(15, 85), spread=rng.choice([0, 0, 0, 1, 2, 4]))


def random_flite_voice(rng: random.Random, name: str) -> Voice:
    female_like = rng.random() < 0.4
    pitch = rng.uniform(160, 240) if female_like else rng.uniform(80, 150)
    return Voice("flite", name, rate=rng.uniform(0.8, 1.3), pitch=round(pitch), spread=rng.randint(8, 40))


def _read(path: str) -> np.ndarray:
    x, sr = sf.read(path, dtype="float32", always_2d=False)
    if sr != SAMPLE_RATE:
        x = soxr.resample(x, sr, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return x


def espeak_ipa(text: str, base: str = "en-us") -> str:
    """espeak-ng's IPA reading of ``text`` (no audio)."""
    out = subprocess.run(["espeak-ng", "-v", base, "-q", "--ipa", text.lower()], check=True,
                         capture_output=True, text=True).stdout
    return " ".join(out.split())


def synthesize(voice: Voice, text: str) -> tuple[np.ndarray, str]:
    """Speak ``text`` (normalised, any case) with ``voice``.

    Returns (samples (num_samples,) float32 at 16 kHz, IPA phonemes as one string)."""
    fd, path = tempfile.mkstemp(suffix=".wav", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.close(fd)
    try:
        words = text.lower()
        if voice.engine == "espeak":
            ipa = subprocess.run(
                ["espeak-ng", "-v", voice.name, "-s", str(int(voice.rate)), "-p", str(int(voice.pitch)),
                 "-g", str(int(voice.spread)), "--ipa", "-w", path, words],
                check=True, capture_output=True, text=True).stdout
            ipa = " ".join(ipa.split())
        elif voice.engine == "flite":
            subprocess.run(
                ["flite", "-voice", voice.name, "--setf", f"duration_stretch={voice.rate:.3f}",
                 "--setf", f"int_f0_target_mean={voice.pitch:g}",
                 "--setf", f"int_f0_target_stddev={voice.spread:g}", "-t", words, "-o", path],
                check=True, capture_output=True)
            ipa = espeak_ipa(words)
        else:
            raise ValueError(f"unknown engine {voice.engine!r}")
        return _read(path), ipa
    finally:
        os.unlink(path)

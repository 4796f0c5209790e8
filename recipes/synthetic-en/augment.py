"""Waveform augmentation: speed, gain, silence padding, noise, reverberation, telephone band.

All functions take and return float32 mono samples; ``telephone`` returns 8 kHz
mu-law-decoded samples so that the features are computed through the very same
8 kHz -> 16 kHz soxr resampling that inference uses (``streamdec.features``).
"""

from __future__ import annotations

import random

import numpy as np
import soxr
from scipy import signal

__all__ = ["speed", "pad_silence", "add_noise", "reverberate", "telephone", "mulaw_roundtrip", "augment"]


def speed(x: np.ndarray, factor: float, sample_rate: int = 16000) -> np.ndarray:
    """Play ``factor`` times faster (tempo and pitch together), like sox ``speed``."""
    return soxr.resample(x, int(round(sample_rate * factor)), sample_rate, quality="HQ").astype(np.float32)


def pad_silence(x: np.ndarray, rng: random.Random, sample_rate: int = 16000) -> np.ndarray:
    """Digital silence before (0-0.3 s) and after (0.2-0.6 s), as streams pad their tail."""
    head = int(rng.uniform(0.0, 0.3) * sample_rate)
    tail = int(rng.uniform(0.2, 0.6) * sample_rate)
    return np.concatenate([np.zeros(head, np.float32), x, np.zeros(tail, np.float32)])


def _colored_noise(n: int, exponent: float, nrng: np.random.Generator) -> np.ndarray:
    """Noise with power spectrum ~ 1/f**exponent (0 white, 1 pink, 2 brown)."""
    spec = np.fft.rfft(nrng.standard_normal(n))
    f = np.maximum(np.fft.rfftfreq(n), 1.0 / n)
    return np.fft.irfft(spec / f ** (exponent / 2), n).astype(np.float32)


def add_noise(x: np.ndarray, rng: random.Random, snr_db: float, sample_rate: int = 16000) -> np.ndarray:
    """Add white/pink/brown noise or mains hum at ``snr_db`` (relative to the speech power)."""
    nrng = np.random.default_rng(rng.getrandbits(32))
    kind = rng.choice(["white", "pink", "brown", "hum"])
    if kind == "hum":
        t = np.arange(len(x)) / sample_rate
        f0 = rng.choice([50.0, 60.0])
        noise = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6.28)) / k for k in range(1, 6))
        noise = noise.astype(np.float32) + 0.1 * nrng.standard_normal(len(x)).astype(np.float32)
    else:
        noise = _colored_noise(len(x), {"white": 0.0, "pink": 1.0, "brown": 2.0}[kind], nrng)
    speech_power = float(np.mean(x[np.abs(x) > 1e-4] ** 2)) if np.any(np.abs(x) > 1e-4) else 1e-4
    noise *= np.sqrt(speech_power / (np.mean(noise ** 2) + 1e-12) / 10 ** (snr_db / 10))
    return (x + noise).astype(np.float32)


def reverberate(x: np.ndarray, rng: random.Random, sample_rate: int = 16000) -> np.ndarray:
    """Convolve with a synthetic room response: direct path + exponentially decaying noise."""
    nrng = np.random.default_rng(rng.getrandbits(32))
    rt60 = rng.uniform(0.15, 0.8)
    n = int(rt60 * sample_rate)
    t = np.arange(n) / sample_rate
    rir = nrng.standard_normal(n) * np.exp(-6.9 * t / rt60) * rng.uniform(0.1, 0.5)
    rir[: int(0.002 * sample_rate)] = 0.0
    rir[0] = 1.0
    y = signal.fftconvolve(x, rir)[: len(x) + n // 2]
    return (y / (np.max(np.abs(y)) + 1e-9) * np.max(np.abs(x))).astype(np.float32)


def mulaw_roundtrip(x: np.ndarray, mu: int = 255) -> np.ndarray:
    """8-bit mu-law encode + decode (G.711-like companding and quantisation)."""
    x = np.clip(x, -1.0, 1.0)
    y = np.sign(x) * np.log1p(mu * np.abs(x)) / np.log1p(mu)
    q = np.round((y + 1) / 2 * mu) / mu * 2 - 1
    return (np.sign(q) * np.expm1(np.abs(q) * np.log1p(mu)) / mu).astype(np.float32)


def telephone(x: np.ndarray, rng: random.Random, sample_rate: int = 16000) -> np.ndarray:
    """Resample to 8 kHz, optionally band-limit to 300-3400 Hz, mu-law round trip.

    Returns 8 kHz samples (feed them to compute_fbank with rate 8000)."""
    y = soxr.resample(x, sample_rate, 8000, quality="HQ").astype(np.float32)
    if rng.random() < 0.5:
        sos = signal.butter(4, [300, 3400], btype="bandpass", fs=8000, output="sos")
        y = signal.sosfilt(sos, y).astype(np.float32)
    return mulaw_roundtrip(y)


def augment(x: np.ndarray, rng: random.Random, sample_rate: int = 16000) -> tuple[np.ndarray, int, str]:
    """One random augmentation chain for a 16 kHz utterance.

    Returns (samples, their rate, a short description such as 'speed1.1+noise12+tel')."""
    tags = []
    if rng.random() < 0.3:
        f = rng.choice([0.9, 0.95, 1.05, 1.1])
        x, tags = speed(x, f, sample_rate), tags + [f"speed{f:g}"]
    x = pad_silence(x, rng, sample_rate)
    if rng.random() < 0.2:
        x, tags = reverberate(x, rng, sample_rate), tags + ["reverb"]
    if rng.random() < 0.35:
        snr = rng.uniform(5, 30)
        x, tags = add_noise(x, rng, snr, sample_rate), tags + [f"noise{snr:.0f}"]
    peak = float(np.max(np.abs(x))) + 1e-9
    x = (x / peak * rng.uniform(0.05, 0.95)).astype(np.float32)
    if rng.random() < 0.25:
        return telephone(x, rng, sample_rate), 8000, "+".join(tags + ["tel"])
    return x, sample_rate, "+".join(tags) or "clean"

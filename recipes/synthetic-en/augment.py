"""Waveform augmentation: speed, gain, silence padding, noise, reverberation, telephone band.

All functions take and return float32 mono samples; ``telephone`` returns 8 kHz
mu-law-decoded samples so that the features are computed through the very same
8 kHz -> 16 kHz soxr resampling that inference uses (``streamdec.audio.features``).
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import tempfile
from contextlib import contextmanager

import numpy as np
import soundfile as sf
import soxr
from scipy import signal

__all__ = ["speed", "tempo", "pitch_shift", "opus_roundtrip", "pad_silence", "add_noise", "reverberate", "telephone", "mulaw_roundtrip", "alaw_roundtrip",
           "gsm_roundtrip", "browser_resample", "clip", "augment"]


def speed(x: np.ndarray, factor: float, sample_rate: int = 16000) -> np.ndarray:
    """Play ``factor`` times faster (tempo and pitch together), like sox ``speed``."""
    return soxr.resample(x, int(round(sample_rate * factor)), sample_rate, quality="HQ").astype(np.float32)


@contextmanager
def _scratch():
    """A temporary folder for sox's files (in /dev/shm where there is one)."""
    d = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        yield d
    finally:
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)


def _same_length(y: np.ndarray, n: int) -> np.ndarray:
    return y[:n] if len(y) >= n else np.pad(y, (0, n - len(y)))


def pitch_shift(x: np.ndarray, cents: float, sample_rate: int = 16000) -> np.ndarray:
    """Raise (or lower) the pitch by ``cents`` at the same tempo (sox ``pitch``): with
    VTLP's formant warp at training time, one voice becomes many."""
    peak = float(np.max(np.abs(x))) + 1e-9
    with _scratch() as d:
        src, back = os.path.join(d, "a.wav"), os.path.join(d, "b.wav")
        sf.write(src, x / peak * 0.7, sample_rate, subtype="PCM_16")
        subprocess.run(["sox", "-D", "-q", src, "-b", "16", back, "pitch", f"{cents:.0f}"],
                       check=True, capture_output=True)
        y, _ = sf.read(back, dtype="float32")
    return (_same_length(y, len(x)) / 0.7 * peak).astype(np.float32)


def tempo(x: np.ndarray, factor: float, sample_rate: int = 16000) -> np.ndarray:
    """Play ``factor`` times faster at the same pitch (sox ``tempo``, speech mode)."""
    peak = float(np.max(np.abs(x))) + 1e-9
    with _scratch() as d:
        src, back = os.path.join(d, "a.wav"), os.path.join(d, "b.wav")
        sf.write(src, x / peak * 0.7, sample_rate, subtype="PCM_16")
        subprocess.run(["sox", "-D", "-q", src, "-b", "16", back, "tempo", "-s", f"{factor:.3f}"],
                       check=True, capture_output=True)
        y, _ = sf.read(back, dtype="float32")
    return (y / 0.7 * peak).astype(np.float32)


def opus_roundtrip(x: np.ndarray, rng: random.Random, sample_rate: int = 16000) -> np.ndarray:
    """Through a low-bitrate Opus encoder and back (libsndfile's; compression level
    0.75-1.0 of its range: roughly 6-16 kbit/s for speech), as VoIP and browser calls carry it."""
    buf = io.BytesIO()
    sf.write(buf, np.clip(x, -1, 1), sample_rate, format="OGG", subtype="OPUS",
             compression_level=rng.uniform(0.75, 1.0))
    buf.seek(0)
    y, _ = sf.read(buf, dtype="float32")
    return _same_length(y, len(x))


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


def alaw_roundtrip(x: np.ndarray) -> np.ndarray:
    """G.711 A-law encode + decode: 13-bit linear, 8 segments of 16 steps (the lowest two
    share one step size), decoded to the middle of the step; A-law has no zero code."""
    s = np.clip(np.round(np.asarray(x, np.float64) * 4096), -4096, 4095)
    mag = np.minimum(np.abs(s), 4095).astype(np.int64)
    seg = np.where(mag < 32, 0, np.floor(np.log2(np.maximum(mag, 1))).astype(np.int64) - 4)
    mant = np.where(seg == 0, mag >> 1, (mag >> np.maximum(seg, 0)) & 0xF)
    back = np.where(seg == 0, (mant << 1) + 1,
                    ((mant | 0x10) << np.maximum(seg, 0)) + (1 << np.maximum(seg - 1, 0)))
    return (np.where(s < 0, -1.0, 1.0) * back / 4096).astype(np.float32)


def gsm_roundtrip(x: np.ndarray) -> np.ndarray:
    """8 kHz samples through the GSM 06.10 full-rate codec (sox), as SIP trunks and
    Asterisk's own prompt files carry them."""
    with _scratch() as d:
        src, gsm, back = (os.path.join(d, n) for n in ("a.wav", "a.gsm", "b.wav"))
        sf.write(src, np.clip(x, -1, 1), 8000, subtype="PCM_16")
        subprocess.run(["sox", "-D", "-q", src, "-r", "8000", gsm], check=True, capture_output=True)
        subprocess.run(["sox", "-D", "-q", gsm, "-b", "16", back], check=True, capture_output=True)
        y, _ = sf.read(back, dtype="float32")
    return _same_length(y, len(x))


def browser_resample(x: np.ndarray, rng: random.Random, sample_rate: int = 16000) -> np.ndarray:
    """A capture path that is not soxr: up to 44.1 / 48 kHz and back with linear
    interpolation (what a browser's AudioContext or a naive client does) or with
    scipy's polyphase filter (a speex-like windowed-sinc resampler)."""
    high = rng.choice([44100, 48000])
    if rng.random() < 0.5:
        n_hi = int(len(x) * high / sample_rate)
        hi = np.interp(np.arange(n_hi) * sample_rate / high, np.arange(len(x)), x)
        n_lo = int(len(hi) * sample_rate / high)
        return np.interp(np.arange(n_lo) * high / sample_rate, np.arange(len(hi)), hi).astype(np.float32)
    g = np.gcd(high, sample_rate)
    hi = signal.resample_poly(x, high // g, sample_rate // g)
    return signal.resample_poly(hi, sample_rate // g, high // g).astype(np.float32)


def clip(x: np.ndarray, rng: random.Random) -> np.ndarray:
    """An overdriven input: gain 1.5-4x past full scale, hard clipped."""
    return np.clip(x / (np.max(np.abs(x)) + 1e-9) * rng.uniform(1.5, 4.0), -1.0, 1.0).astype(np.float32)


def telephone(x: np.ndarray, rng: random.Random, sample_rate: int = 16000, codecs: bool = False) -> np.ndarray:
    """Resample to 8 kHz, optionally band-limit to 300-3400 Hz, mu-law round trip
    (``codecs``: mu-law, A-law or GSM full rate, a third each).

    Returns 8 kHz samples (feed them to compute_fbank with rate 8000)."""
    y = soxr.resample(x, sample_rate, 8000, quality="HQ").astype(np.float32)
    if rng.random() < 0.5:
        sos = signal.butter(4, [300, 3400], btype="bandpass", fs=8000, output="sos")
        y = signal.sosfilt(sos, y).astype(np.float32)
    if codecs:
        return rng.choice([mulaw_roundtrip, alaw_roundtrip, gsm_roundtrip])(y)
    return mulaw_roundtrip(y)


def augment(x: np.ndarray, rng: random.Random, sample_rate: int = 16000,
            channel: bool = False, voice: bool = False) -> tuple[np.ndarray, int, str]:
    """One random augmentation chain for a 16 kHz utterance. ``channel`` (the real-voice
    fine-tuning; off for the shipped base recipe, whose data it would change) adds
    capture paths: other resamplers (20%), clipping (8%), A-law and GSM besides mu-law.

    ``voice`` (real recorded speech, which is scarce: each recording is rendered several
    times) adds tempo (20%) and pitch (20%, up to 300 cents either way) changes and
    low-bitrate Opus (12%).

    Returns (samples, their rate, a short description such as 'speed1.1+noise12+tel')."""
    tags = []
    if rng.random() < 0.3:
        f = rng.choice([0.9, 0.95, 1.05, 1.1])
        x, tags = speed(x, f, sample_rate), tags + [f"speed{f:g}"]
    if voice and rng.random() < 0.2:
        f = rng.uniform(0.9, 1.1)
        x, tags = tempo(x, f, sample_rate), tags + [f"tempo{f:.2f}"]
    if voice and rng.random() < 0.2:
        c = rng.uniform(-300, 300)
        x, tags = pitch_shift(x, c, sample_rate), tags + [f"pitch{c:+.0f}"]
    x = pad_silence(x, rng, sample_rate)
    if rng.random() < 0.2:
        x, tags = reverberate(x, rng, sample_rate), tags + ["reverb"]
    if rng.random() < 0.35:
        snr = rng.uniform(5, 30)
        x, tags = add_noise(x, rng, snr, sample_rate), tags + [f"noise{snr:.0f}"]
    if channel and rng.random() < 0.2:
        x, tags = browser_resample(x, rng, sample_rate), tags + ["resample"]
    peak = float(np.max(np.abs(x))) + 1e-9
    x = (x / peak * rng.uniform(0.05, 0.95)).astype(np.float32)
    if channel and rng.random() < 0.08:
        x, tags = clip(x, rng), tags + ["clip"]
    if voice and rng.random() < 0.12:
        x, tags = opus_roundtrip(x, rng, sample_rate), tags + ["opus"]
    if rng.random() < 0.25:
        return telephone(x, rng, sample_rate, codecs=channel), 8000, "+".join(tags + ["tel"])
    return x, sample_rate, "+".join(tags) or "clean"

"""Kaldi's log-mel filterbank (as kaldi-native-fbank computes it), for many frames at once.

The models were trained on kaldi-native-fbank's features; kaldi-native-fbank computes them
one frame at a time in C++ while holding the GIL. This module takes from it what defines
the features (the window and the mel filter bank weights, so the bins are Kaldi's to the
last bit) and runs the per-frame arithmetic with numpy over a block of frames at once:

    frame (25 ms, reflected at the signal's edges) -> minus its mean -> pre-emphasis
    -> window -> FFT (zero-padded to a power of two) -> power spectrum -> mel weights
    -> log (floored at float32 epsilon)

The framing follows kaldi-native-fbank's online extractor exactly: which frames exist,
when each becomes ready, and how the last frames are reflected at the end of the input.
The FFT runs in double precision, so the values differ from kaldi-native-fbank's only by
float rounding (tests/test_features.py states the tolerance); each frame's values depend
only on its own samples, never on how the audio was split or how many frames were
computed together.

    fbank = Fbank(FeatureConfig())       # shared by every stream of one config
    online = OnlineFbank(fbank)          # one per stream
    online.accept_waveform(samples)      # counts the frames now ready (num_frames_ready)
    new_frames = online.take()           # computes them: (n, num_bins) float32
    online.input_finished()
    last_frames = online.take()

The frames are computed when taken, not when their samples arrive: a live stream's
messages bring ~10 frames each, a decode takes a chunk's ~32 at once, and numpy's cost per
frame is about half as large in blocks of 32 as in blocks of 10 (the per-call overhead).
"""

from __future__ import annotations

import functools
from typing import Protocol

import kaldi_native_fbank as knf
import numpy as np

from ..buffers import size_class

__all__ = ["Fbank", "OnlineFbank", "fbank_options", "fbank_for", "FbankSettings"]

#: frames computed per numpy call: bounds the temporary arrays (blocks of 64 measured
#: slower per frame than blocks of 32 here, likely their temporaries crossing glibc's mmap
#: threshold)
BLOCK_FRAMES = 32
#: a stream's sample store holds at least this many samples (a few messages and the samples
#: of the frames not computed yet: in a live stream it is never replaced)
STORE_MIN_SAMPLES = 4096


class FbankSettings(Protocol):
    """The fields of ``features.FeatureConfig`` that define the fbank (this module sits below
    ``features``, which imports it)."""

    sample_rate: int
    num_bins: int
    frame_length_ms: float
    frame_shift_ms: float
    low_freq: float
    high_freq: float


def fbank_options(config: FbankSettings) -> knf.FbankOptions:
    """kaldi-native-fbank options, every one set explicitly (its own defaults differ:
    dither 3e-5, snip_edges true, high_freq 0)."""
    opts = knf.FbankOptions()
    opts.frame_opts.samp_freq = float(config.sample_rate)
    opts.frame_opts.frame_length_ms = config.frame_length_ms
    opts.frame_opts.frame_shift_ms = config.frame_shift_ms
    opts.frame_opts.dither = 0.0
    opts.frame_opts.snip_edges = False
    opts.frame_opts.window_type = "povey"
    opts.frame_opts.preemph_coeff = 0.97
    opts.frame_opts.remove_dc_offset = True
    opts.frame_opts.round_to_power_of_two = True
    opts.mel_opts.num_bins = config.num_bins
    opts.mel_opts.low_freq = config.low_freq
    opts.mel_opts.high_freq = config.high_freq
    opts.mel_opts.is_librosa = False
    opts.use_energy = False
    opts.use_log_fbank = True
    opts.use_power = True
    return opts


class Fbank:
    """The constants of one feature configuration: frame geometry, window, mel weights.
    Immutable; shared by every stream (``fbank_for``)."""

    def __init__(self, config: FbankSettings) -> None:
        opts = fbank_options(config)
        frame = opts.frame_opts
        self.num_bins = config.num_bins
        self.window = np.array(knf.FeatureWindowFunction(frame).window, np.float32)
        self.frame_length = len(self.window)
        # kaldi-native-fbank's window shift: float32 arithmetic, truncated
        self.frame_shift = int(np.float32(frame.samp_freq) * np.float32(0.001)
                               * np.float32(frame.frame_shift_ms))
        self.preemph = np.float32(frame.preemph_coeff)
        weights = knf.MelBanks(opts.mel_opts, frame, 1.0).get_matrix()  # (bins, fft/2 + 1)
        self.fft_size = 2 * (weights.shape[1] - 1)
        # the weights by the parity of their mel bin: the triangles of bins b and b + 2 never
        # overlap (a bin spans its neighbours' centres), so an FFT bin weighs in at most one
        # even and one odd mel bin; log_mel weighs the power spectrum once per parity (rows
        # [0, K) even, [K, 2K) odd, 2K zero) and gathers each mel bin's terms k = 0.. as
        # rows of that: (width, bins), zero-padded
        num_fft_bins = weights.shape[1]
        nonzero = [np.flatnonzero(row) for row in weights]
        width = max(nz[-1] + 1 - nz[0] for nz in nonzero)
        self._parity_weight = np.zeros((2, num_fft_bins, 1), np.float32)
        self._term_row = np.full((width, self.num_bins), 2 * num_fft_bins, np.intp)
        for b, nz in enumerate(nonzero):
            lo, hi = nz[0], nz[-1] + 1
            column = self._parity_weight[b % 2, lo:hi, 0]
            if column.any():
                raise ValueError(f"mel bins {b - 2} and {b} overlap: not Kaldi's mel banks")
            column[:] = weights[b, lo:hi]
            self._term_row[:hi - lo, b] = b % 2 * num_fft_bins + np.arange(lo, hi)
        self._floor = np.finfo(np.float32).eps

    def first_sample(self, frame: int) -> int:
        """Absolute index of frame ``frame``'s first sample (negative: before the start)."""
        return self.frame_shift * frame + self.frame_shift // 2 - self.frame_length // 2

    def num_frames(self, num_samples: int, flush: bool) -> int:
        """Frames that ``num_samples`` samples make: all of them at the end of the input
        (``flush``), else those that end within the samples."""
        n = (num_samples + self.frame_shift // 2) // self.frame_shift
        if flush:
            return n
        while n > 0 and self.first_sample(n - 1) + self.frame_length > num_samples:
            n -= 1
        return n

    def log_mel(self, frames: np.ndarray) -> np.ndarray:
        """Raw frames (n, frame_length) float32 -> log-mel features (n, num_bins) float32.
        Row-wise: a row's result depends on that row only. ``frames`` is overwritten (the
        callers pass arrays made for the call)."""
        n, length = frames.shape
        # the mean as ndarray.mean computes it (sum, then divided), without its wrappers
        mean = np.add.reduce(frames, axis=1, keepdims=True)
        mean /= np.float32(length)
        x = np.subtract(frames, mean, out=frames)
        x[:, 1:] -= self.preemph * x[:, :-1]
        x[:, 0] -= self.preemph * x[:, 0]
        # zero-padded here: numpy's own padding (rfft's n=) makes the FFT take twice as
        # long, for the same values
        padded = np.zeros((n, self.fft_size))
        np.multiply(x, self.window, out=padded[:, :length], dtype=np.float32)
        spectrum = np.fft.rfft(padded, axis=1)
        power = np.square(spectrum.real)
        power += np.square(spectrum.imag)
        power_t = power.T.astype(np.float32)  # (K, n)
        fft_bins = len(power_t)
        # rows: the power weighed by the even bins, by the odd bins, a zero row
        weighted = np.empty((2 * fft_bins + 1, n), np.float32)
        np.multiply(power_t, self._parity_weight[0], out=weighted[:fft_bins])
        np.multiply(power_t, self._parity_weight[1], out=weighted[fft_bins:2 * fft_bins])
        weighted[2 * fft_bins] = 0.0
        # (width, bins, n): the k-th weighted FFT bin of every mel bin, summed over k in
        # order for each element
        terms = np.take(weighted, self._term_row, axis=0)
        energy = np.add.reduce(terms, axis=0)
        np.maximum(energy, self._floor, out=energy)
        return np.log(energy, out=energy).T.copy()


@functools.lru_cache(maxsize=16)
def fbank_for(config: FbankSettings) -> Fbank:
    """The shared Fbank of a configuration."""
    return Fbank(config)


class OnlineFbank:
    """One stream's framing state: samples not yet needed by a computed frame are kept;
    ``num_frames_ready`` follows kaldi-native-fbank's online rules (a frame is ready when
    its last sample has arrived, the rest at the end of the input, reflected at the edges
    of what is kept); ``take`` computes the ready frames not computed yet, ``skip`` passes
    over frames nobody needs."""

    def __init__(self, fbank: Fbank) -> None:
        self.fbank = fbank
        # the kept samples are _store[_lo:_hi] (absolute index _offset at _lo): appended in
        # place; when the store is full they move to its front, and only when they would
        # not fit there is it replaced by one of the next size class (few sizes, reused
        # whole by the C heap: a long-lived stream's store neither churns nor fragments it)
        self._store = np.zeros(0, np.float32)
        self._lo = self._hi = 0
        self._offset = 0
        self.num_frames_ready = 0
        self.num_frames_taken = 0  # frames computed by take() or passed over by skip()
        self.finished = False

    def accept_waveform(self, samples: np.ndarray) -> None:
        """Add float32 samples (``num_frames_ready`` counts the frames they complete)."""
        n = len(samples)
        if self._hi + n > len(self._store):
            kept = self._hi - self._lo
            store = (self._store if 2 * (kept + n) <= len(self._store)  # no view of it is out
                     else np.empty(size_class(2 * (kept + n), STORE_MIN_SAMPLES), np.float32))
            store[:kept] = self._store[self._lo:self._hi]
            self._store, self._lo, self._hi = store, 0, kept
        self._store[self._hi:self._hi + n] = samples
        self._hi += n
        self.num_frames_ready = self.fbank.num_frames(self._offset + self._hi - self._lo, False)

    @property
    def _wave(self) -> np.ndarray:
        """The kept samples (a view)."""
        return self._store[self._lo:self._hi]

    def input_finished(self) -> None:
        """End of input: every remaining frame is ready."""
        self.finished = True
        self.num_frames_ready = self.fbank.num_frames(self._offset + self._hi - self._lo, True)

    def take(self) -> np.ndarray:
        """The ready frames not taken yet, computed: (n, num_bins) float32."""
        fb, old, new = self.fbank, self.num_frames_taken, self.num_frames_ready
        if new <= old:
            return np.zeros((0, fb.num_bins), np.float32)
        blocks = [fb.log_mel(self._windows(a, min(a + BLOCK_FRAMES, new)))
                  for a in range(old, new, BLOCK_FRAMES)]
        self._taken(new)
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)

    def take_windows(self) -> np.ndarray:
        """The raw samples of the ready frames not taken yet, (n, frame_length) float32,
        now taken: what ``take`` computes, for a caller that computes the frames of several
        streams in one ``log_mel`` (row-wise: the same values). One array of them all: for
        a few chunks' frames, not a long file's."""
        old, new = self.num_frames_taken, self.num_frames_ready
        if new <= old:
            return np.zeros((0, self.fbank.frame_length), np.float32)
        windows = self._windows(old, new)
        self._taken(new)
        return windows

    def skip(self, upto: int) -> None:
        """Pass over the frames before ``upto`` (at most the ready ones) without computing
        them."""
        upto = min(upto, self.num_frames_ready)
        if upto > self.num_frames_taken:
            self._taken(upto)

    def _taken(self, frames: int) -> None:
        self.num_frames_taken = frames
        drop = self.fbank.first_sample(frames) - self._offset  # samples no later frame needs
        if drop > 0:
            self._lo = min(self._lo + drop, self._hi)
            self._offset += drop

    def _windows(self, a: int, b: int) -> np.ndarray:
        """Raw samples of frames [a, b): (b - a, frame_length) float32."""
        fb, wave = self.fbank, self._wave
        shift, length = fb.frame_shift, fb.frame_length
        start = fb.first_sample(a) - self._offset  # index in _wave
        # frames [a + lo, a + hi) lie inside the kept samples; the others need reflection
        lo = min(b - a, max(0, -(start // shift)))
        hi = max(lo, min(b - a, (len(wave) - length - start) // shift + 1))
        if hi > lo:
            step = wave.strides[0]  # the frames' rows as a view of the samples
            inside = np.ndarray((hi - lo, length), np.float32, buffer=wave,
                                offset=step * (start + lo * shift), strides=(step * shift, step))
            if lo == 0 and hi == b - a:
                return inside.copy()
        out = np.empty((b - a, length), np.float32)
        if hi > lo:
            out[lo:hi] = inside
        edges = [r for r in range(b - a) if not lo <= r < hi]
        idx = (start + shift * np.array(edges))[:, None] + np.arange(length)
        n = len(wave)
        while True:  # reflect about the ends of the kept samples (again if still outside)
            low, high = idx < 0, idx >= n
            if not (low.any() or high.any()):
                break
            idx = np.where(low, -idx - 1, np.where(high, 2 * n - 1 - idx, idx))
        out[edges] = wave[idx]
        return out

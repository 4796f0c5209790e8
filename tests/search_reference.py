"""Plain offline reference searches for the equivalence tests, and small test helpers.

Each ``*_ref`` runs one algorithm over a whole utterance's encoder output (T, D) at once,
one hypothesis at a time, with no batching, no caching and no state carried between calls.
They follow the conventions documented in ``streamdec.search.beam_utils`` (<unk> as blank,
log-add merging keeping the better alignment, ranking by score / (tokens + context)) and return
``Hypothesis`` lists, best first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from streamdec.models.base import ModelMeta
from streamdec.search.base import Hypothesis, initial_context, log_softmax

# -- models ------------------------------------------------------------------------------


class ToyModel:
    """A numpy transducer (decoder + joiner only) with random weights; encoder frames are
    supplied by the test. ``unk_id`` is the last id."""

    def __init__(self, vocab: int = 7, dim: int = 6, context_size: int = 2, seed: int = 0,
                 blank_bias: float = 0.5, scale: float = 2.0):
        rng = np.random.RandomState(seed)
        self.meta = ModelMeta(model_type="toy", chunk_frames=1, chunk_shift=4,
                              encoder_frames_per_chunk=1, feature_dim=1, joiner_dim=dim,
                              context_size=context_size, vocab_size=vocab,
                              blank_id=0, frame_shift_ms=10.0, sample_rate=16000)
        self.emb = rng.randn(vocab, dim).astype(np.float32)
        self.proj = rng.randn(context_size * dim, dim).astype(np.float32) * 0.5
        self.out = rng.randn(dim, vocab).astype(np.float32) * scale
        self.out_bias = np.zeros(vocab, np.float32)
        self.out_bias[0] = blank_bias
        self.decode_calls = 0
        self.join_calls = 0

    def decode(self, contexts: np.ndarray) -> np.ndarray:
        self.decode_calls += 1
        mask = (contexts >= 0)[..., None].astype(np.float32)
        e = self.emb[np.maximum(contexts, 0)] * mask
        return np.tanh(e.reshape(len(contexts), -1) @ self.proj)

    def join(self, encoder_out: np.ndarray, decoder_out: np.ndarray) -> np.ndarray:
        self.join_calls += 1
        return np.tanh(encoder_out + decoder_out) @ self.out + self.out_bias

    def random_encoder_out(self, frames: int, seed: int = 0) -> np.ndarray:
        """(T, D) float32 frames that make the toy model emit a few tokens."""
        return np.random.RandomState(seed).randn(frames, self.meta.joiner_dim).astype(np.float32)


def encoder_output(rec, audio: np.ndarray, rate: int = 16000) -> np.ndarray:
    """(T', D) encoder output of a whole utterance, computed chunk by chunk as the
    Recognizer does (tail padding included)."""
    meta, layout = rec.meta, rec.model.state_layout
    stream = rec.create_stream()
    stream.accept_waveform(rate, audio)
    stream.input_finished()
    states, out, start = layout.initial(), [], 0
    while stream.features.num_frames_ready >= start + meta.chunk_frames:
        x = stream.features.frames(start, meta.chunk_frames)[None]
        enc, states = rec.model.encode(x, states)
        out.append(enc[0])
        start += meta.chunk_shift
    return np.concatenate(out)


# -- shared reference pieces -----------------------------------------------------------


@dataclass(frozen=True)
class RefOptions:
    beam: int = 4
    nbest: int = 4
    unk_id: int | None = None
    blank_id: int = 0
    max_sym_per_frame_alsd: int = 3
    max_sym_exp: int = 2
    nstep: int = 2
    prefix_alpha: int = 1
    max_sym_per_frame_beam: int = 4


def logp_of(model, context: tuple[int, ...], frame: np.ndarray, opts: RefOptions) -> np.ndarray:
    """(V,) float64 log-probs of one hypothesis at one frame."""
    dec = model.decode(np.array([context], np.int64))
    return log_softmax(model.join(frame[None].astype(np.float32), dec)).astype(np.float64)[0]


def add_token(hyp: Hypothesis, token: int, frame: int, logp: np.ndarray) -> Hypothesis:
    return hyp.extend(token, frame, float(logp[token]), hyp.score + float(logp[token]))


def add_blank(hyp: Hypothesis, logp: np.ndarray, blank_id: int = 0) -> Hypothesis:
    """The child that keeps the sequence, by ``blank_id`` (or <unk> as blank)."""
    return replace(hyp, score=hyp.score + float(logp[blank_id]))


def recombine(hyps):
    """Equal sequences log-added; the best single member gives the alignment."""
    groups = {}
    for h in hyps:
        groups.setdefault(h.tokens, []).append(h)
    out = []
    for same in groups.values():
        best = max(same, key=lambda h: h.score)  # first of the best on ties
        out.append(replace(best, score=float(np.logaddexp.reduce([h.score for h in same]))))
    return out


def best_k(hyps, k):
    return sorted(hyps, key=lambda h: -h.score)[:k]


def nbest_of(hyps, n):
    return sorted(hyps, key=lambda h: -h.normalized_score)[:n]


def top_tokens(logp: np.ndarray, k: int, opts: RefOptions) -> list[int]:
    """The k best tokens that are neither blank nor <unk>-as-blank."""
    row = logp.copy()
    row[opts.blank_id] = -np.inf
    if opts.unk_id is not None:
        row[opts.unk_id] = -np.inf
    order = np.argsort(-row, kind="stable")[:k]
    return [int(v) for v in order if np.isfinite(row[v])]


def start(model, opts: RefOptions) -> Hypothesis:
    return Hypothesis(context=initial_context(model.meta.context_size, opts.blank_id))


# -- the algorithms --------------------------------------------------------------------


def modified_beam_ref(model, enc: np.ndarray, opts: RefOptions) -> list[Hypothesis]:
    """icefall's modified beam search over (T, D)."""
    beam = [start(model, opts)]
    for t in range(len(enc)):
        cands = []
        for h in beam:
            logp = logp_of(model, h.context, enc[t], opts)
            for v in range(len(logp)):
                if np.isfinite(logp[v]):
                    cands.append((h.score + float(logp[v]), len(cands), h, v, logp))
        cands.sort(key=lambda c: (-c[0], c[1]))
        children = [add_blank(h, lp, v) if v in (opts.blank_id, opts.unk_id)
                    else add_token(h, v, t, lp) for _, _, h, v, lp in cands[:opts.beam]]
        beam = recombine(children)
    return nbest_of(beam, opts.nbest)


def alsd_ref(model, enc: np.ndarray, opts: RefOptions) -> list[Hypothesis]:
    """ALSD over (T, D): a hyp with u tokens is at frame t = i - u; per-frame symbol cap."""
    total = len(enc)
    beam, final, i = [start(model, opts)], [], 0
    while any(i - len(h.tokens) < total for h in beam):
        children = []
        for h in beam:
            t = i - len(h.tokens)
            if t >= total:
                continue
            logp = logp_of(model, h.context, enc[t], opts)
            children.append(add_blank(h, logp, opts.blank_id))
            if t == total - 1:
                final.append(children[-1])
            if sum(f == t for f in h.frames) < opts.max_sym_per_frame_alsd:
                children += [add_token(h, v, t, logp) for v in top_tokens(logp, opts.beam, opts)]
        beam = best_k(recombine(children), opts.beam)
        i += 1
    return nbest_of(final or beam, opts.nbest)


def tsd_ref(model, enc: np.ndarray, opts: RefOptions) -> list[Hypothesis]:
    """Time synchronous decoding over (T, D): max_sym_exp rounds per frame."""
    beam = [start(model, opts)]
    for t in range(len(enc)):
        ended, current = [], beam
        for v in range(opts.max_sym_exp):
            grown = []
            for h in current:
                logp = logp_of(model, h.context, enc[t], opts)
                ended = recombine(ended + [add_blank(h, logp, opts.blank_id)])
                if v < opts.max_sym_exp - 1:
                    grown += [add_token(h, tok, t, logp) for tok in top_tokens(logp, opts.beam, opts)]
            current = best_k(recombine(grown), opts.beam)
        beam = best_k(ended, opts.beam)
    return nbest_of(beam, opts.nbest)


def beam_ref(model, enc: np.ndarray, opts: RefOptions) -> list[Hypothesis]:
    """Graves' beam search over (T, D), blank extension always added, symbol cap per frame."""
    beam = [start(model, opts)]
    for t in range(len(enc)):
        open_, kept = list(beam), []
        while True:
            h = open_.pop(max(range(len(open_)), key=lambda i: open_[i].score))
            logp = logp_of(model, h.context, enc[t], opts)
            kept = recombine(kept + [add_blank(h, logp, opts.blank_id)])
            if sum(f == t for f in h.frames) < opts.max_sym_per_frame_beam:
                open_ = recombine(open_ + [add_token(h, v, t, logp)
                                           for v in top_tokens(logp, opts.beam, opts)])
            if not open_:
                break
            top = max(o.score for o in open_)
            if len([k for k in kept if k.score > top]) >= opts.beam:
                break
        beam = best_k(kept, opts.beam)
    return nbest_of(beam, opts.nbest)


def nsc_ref(model, enc: np.ndarray, opts: RefOptions) -> list[Hypothesis]:
    """N-step constrained beam search over (T, D) with prefix merging."""
    beam = [start(model, opts)]
    for t in range(len(enc)):
        hyps = sorted(beam, key=lambda h: -len(h.tokens))
        merged = []
        for j, long in enumerate(hyps):
            score = long.score
            for short in hyps[j + 1:]:
                du = len(long.tokens) - len(short.tokens)
                if 0 < du <= opts.prefix_alpha and long.tokens[:len(short.tokens)] == short.tokens:
                    path, ctx = short.score, short.context
                    for tok in long.tokens[len(short.tokens):]:
                        path += float(logp_of(model, ctx, enc[t], opts)[tok])
                        ctx = ctx[1:] + (tok,)
                    score = float(np.logaddexp(score, path))
            merged.append(replace(long, score=score))
        hyps, ended = merged, []
        for n in range(opts.nstep + 1):
            grown = []
            for h in hyps:
                logp = logp_of(model, h.context, enc[t], opts)
                ended.append(add_blank(h, logp, opts.blank_id))
                if n < opts.nstep:
                    grown += [add_token(h, v, t, logp) for v in top_tokens(logp, opts.beam, opts)]
            hyps = best_k(recombine(grown), opts.beam)
        beam = best_k(recombine(ended), opts.beam)
    return nbest_of(beam, opts.nbest)

"""Modified beam search against sherpa-onnx's, utterance by utterance, with the reason for
every difference.

    python bench/decode/beam_parity.py --model-dir DIR --out report.json            # fp32
    python bench/decode/beam_parity.py --model-dir DIR --utterances 20 --out r.json

The audio: the first ``--utterances`` lines of a manifest of real speech (``--manifest``,
TSV: path relative to the manifest's folder, then the text) and the model folder's
``test_wavs/0.wav`` when it has one. Each utterance is decoded alone (a batch of one) by
streamdec and by sherpa-onnx (modified beam search, ``--beam`` active paths, endpointing
off); a transcript is its symbols and their encoder frames, as in ``throughput.py``.

For each utterance whose transcripts differ the script finds why. sherpa-onnx's own rule
(its ``online-transducer-modified-beam-search-decoder.cc`` and ``hypothesis.cc``) is:
per frame, log-softmax of the joiner's logits in float32, plus the hypothesis' score
rounded to float32, added in float32; the ``beam`` best of all (hypothesis, token) pairs
by ``std::partial_sort`` (not stable: among equal scores the order is unspecified, and
the hypotheses' order comes from an ``unordered_map``); children with equal sequences
merged by log-add in double, the first one added (the best, or any of equal ones) keeping
its timestamps. The script replays that rule on streamdec's encoder output (``replay``),
records every decision taken between candidates whose float32 scores are within
``--ulps`` units in the last place (a *tie*: which pair enters the beam at its edge,
which of two merged paths gives the timestamps, or which hypothesis is a chunk's result:
``max_element`` of score / len(ys) keeps the first of equal ones), and searches for the ties whose other
order gives sherpa-onnx's result chunk by chunk (sherpa-onnx's best hypothesis after each
chunk), the earliest chunk first (a flip is kept when that chunk's best hypothesis then
agrees with sherpa-onnx's for longer). An utterance is *explained* when flipping ties alone
reproduces sherpa-onnx's transcript exactly; the report gives, per utterance, the first
diverging step (frame, chunk, the two candidates, their float32 scores, their distance in
ulps, and streamdec's own float64 scores of the same pair).

Counts: ``identical`` (streamdec = sherpa-onnx), ``replay_identical`` (the replay with
ties ordered by index = sherpa-onnx), ``explained``, ``unexplained``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parents[1]  # bench/
sys.path.insert(0, str(HERE.parent))

from bench.common.abtest import load_average, machine, write_report  # noqa: E402
from bench.decode.batch_decode import WORD_START, sherpa_tail  # noqa: E402
from bench.common.devset import Utterance  # noqa: E402
from bench.common.peer import (add_model_options, model_config, model_report,  # noqa: E402
                               sherpa_recognizer)
from streamdec import EndpointConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402
from streamdec.search.beam_utils import logaddexp  # noqa: E402

# Mini LibriSpeech's train-clean-5 (CC BY 4.0) as a TSV of WAV paths and texts, in a shared
# folder beside the clone (any such manifest can be given with --manifest)
MANIFEST = HERE.parent.parent / "shared/data/real-en/mini_librispeech_train_clean_5/manifest.tsv"


def utterances(manifest: Path, count: int, model_dir: Path) -> list[Utterance]:
    out = []
    for line in manifest.read_text(encoding="utf-8").splitlines()[:count]:
        path, text = line.split("\t", 1)
        out.append(_read(manifest.parent / path, text))
    wav = model_dir / "test_wavs" / "0.wav"
    if wav.is_file():
        out.append(_read(wav, ""))
    return out


def _read(path: Path, text: str) -> Utterance:
    samples, rate = sf.read(path, dtype="float32", always_2d=True)
    samples = samples[:, 0]
    return Utterance(str(path), text, samples, rate)


# -- the two decoders, chunk by chunk -----------------------------------------------------
def spell(rec, tokens, frames) -> tuple:
    return (tuple(rec.symbols.id_to_symbol[t].replace(WORD_START, " ") for t in tokens),
            tuple(frames))


def decode_sherpa(srec, u: Utterance, tail_frames: int, frame_seconds: float) -> list[tuple]:
    """sherpa-onnx's best hypothesis (symbols, frames) after each chunk."""
    s = srec.create_stream()
    s.accept_waveform(u.rate, np.concatenate([u.samples, sherpa_tail(tail_frames, u.rate)]))
    s.input_finished()
    out = []
    while srec.is_ready(s):
        srec.decode_stream(s)
        r = srec.get_result_all(s)
        out.append((tuple(r.tokens), tuple(round(t / frame_seconds) for t in r.timestamps)))
    return out


def decode_streamdec(rec, u: Utterance, search: SearchConfig):
    """streamdec's final transcript and its encoder output per chunk."""
    chunks = []
    encode = rec.model.encode

    def recording(features, states):
        out = encode(features, states)
        chunks.append(np.array(out[0][0], copy=True))
        return out

    rec.model.encode = recording
    try:
        s = rec.create_stream(search=search)
        s.accept_waveform(u.rate, u.samples)
        s.input_finished()
        events = []
        while rec.is_ready(s):
            rec.decode([s])
            events += s.pop_events()
    finally:
        del rec.model.encode
    frame = rec.meta.encoder_frame_seconds
    finals = [e for e in events if e.is_final]
    final = (tuple(t.replace(WORD_START, " ") for e in finals for t in e.tokens),
             tuple(round(t / frame) for e in finals for t in e.absolute_timestamps))
    return final, chunks


# -- sherpa-onnx's rule, replayed --------------------------------------------------------------
@dataclass
class Hyp:
    ys: tuple[int, ...]  # tokens after the start context
    frames: tuple[int, ...]
    score: float  # double, as sherpa-onnx keeps it (float32 sums, log-added in double)
    score64: float  # the same path in float64 throughout (streamdec's arithmetic)


@dataclass(frozen=True)
class Tie:
    frame: int
    kind: str  # "edge": which pair enters the beam; "merge": which path keeps the timestamps
    first: tuple  # (hypothesis key, token) ranked first by index order
    second: tuple
    scores32: tuple[float, float]
    ulps: float
    scores64: tuple[float, float]


@dataclass
class Replay:
    chunk_best: list[tuple] = field(default_factory=list)  # (tokens, frames) per chunk
    ties: list[Tie] = field(default_factory=list)
    # frames where streamdec's float64 order of the same candidates gives another beam
    # (other pairs in it, or other timestamps kept): (frame, its pair, our pair, float32
    # scores of both, float64 scores of both)
    float64_differs: list[dict] = field(default_factory=list)
    beams: dict[int, list[Hyp]] = field(default_factory=dict)  # beam before each frame


def log_softmax32(x: np.ndarray) -> np.ndarray:
    """sherpa-onnx's LogSoftmax in float32: max, a left-to-right sum of exp, one offset."""
    x = x.astype(np.float32)
    m = x.max(axis=1, keepdims=True)
    total = np.cumsum(np.exp(x - m), axis=1, dtype=np.float32)[:, -1:]
    return x - (m + np.log(total)).astype(np.float32)


class SherpaRule:
    """Modified beam search by sherpa-onnx's rule on given encoder frames; ``flips``: ties
    (frame, first, second) to take in the other order."""

    def __init__(self, rec, beam: int, ulps: float) -> None:
        self.model, self.beam, self.ulps = rec.model, beam, ulps
        self.context_size, self.blank = rec.meta.context_size, rec.meta.blank_id
        unk = rec.symbols.unk_id  # sherpa-onnx takes <unk> as blank, as streamdec does
        self.blanks = {self.blank} | ({unk} if unk is not None else set())
        self.start = (-1,) * (self.context_size - 1) + (self.blank,)
        self._dec: dict[tuple, np.ndarray] = {}

    def decoder(self, contexts: list[tuple]) -> np.ndarray:
        missing = [c for c in dict.fromkeys(contexts) if c not in self._dec]
        if missing:
            for c, v in zip(missing, self.model.decode(np.array(missing, np.int64))):
                self._dec[c] = v
        return np.stack([self._dec[c] for c in contexts])

    def run(self, chunks: list[np.ndarray], flips: frozenset = frozenset(),
            start: tuple[int, list[Hyp]] | None = None, until: int | None = None) -> Replay:
        out = Replay()
        t0, hyps = start if start else (0, [Hyp((), (), 0.0, 0.0)])
        frame = 0
        for enc in chunks:
            for row in enc:
                if frame >= t0 and (until is None or frame < until):
                    out.beams[frame] = hyps
                    hyps = self.frame(hyps, row, frame, flips, out)
                frame += 1
            if frame > t0:
                out.chunk_best.append(self.best(hyps, frame - 1, flips, out))
            else:
                out.chunk_best.append(None)
            if until is not None and frame >= until:
                break
        if until is None and not out.float64_differs:  # the final result, by float64
            norm = [h.score64 / (len(h.ys) + self.context_size) for h in hyps]
            mine = max(range(len(hyps)), key=norm.__getitem__)
            if (hyps[mine].ys, hyps[mine].frames) != out.chunk_best[-1]:
                chosen = next(h for h in hyps if (h.ys, h.frames) == out.chunk_best[-1])
                out.float64_differs.append({
                    "frame": frame - 1, "sherpa_rule": (chosen.ys, -1),
                    "float64": (hyps[mine].ys, -1),
                    "float32_scores": (chosen.score / (len(chosen.ys) + self.context_size),
                                       hyps[mine].score / (len(hyps[mine].ys)
                                                           + self.context_size)),
                    "float64_scores": (chosen.score64 / (len(chosen.ys) + self.context_size),
                                       norm[mine])})
        return out

    def best(self, hyps: list[Hyp], t: int, flips, out: Replay) -> tuple:
        """The result after a chunk: the best by score / len(ys) (``max_element``: among
        equal ones the first in the beam's order), or the second with a flip (a "best" tie)."""
        def norm(h: Hyp, score: float) -> float:
            return score / (len(h.ys) + self.context_size)

        order = sorted(hyps, key=lambda h: -norm(h, h.score))
        if len(order) > 1:
            a, b = order[0], order[1]
            na, nb = norm(a, a.score), norm(b, b.score)
            ulps = abs(na - nb) / float(np.spacing(np.float32(max(abs(na), abs(nb)))))
            if ulps <= self.ulps:
                tie = Tie(t, "best", (a.ys, -1), (b.ys, -1), (na, nb), ulps,
                          (norm(a, a.score64), norm(b, b.score64)))
                out.ties.append(tie)
                if (t, tie.first, tie.second) in flips:
                    return b.ys, b.frames
        return order[0].ys, order[0].frames

    def frame(self, hyps: list[Hyp], enc: np.ndarray, t: int, flips, out: Replay
              ) -> list[Hyp]:
        contexts = [(self.start + h.ys)[-self.context_size:] for h in hyps]
        logits = self.model.join(np.repeat(enc[None], len(hyps), 0), self.decoder(contexts))
        logp = log_softmax32(logits)
        prev = np.array([h.score for h in hyps], np.float64).astype(np.float32)
        total = logp + prev[:, None]  # float32, as sherpa-onnx adds
        total64 = logp.astype(np.float64) + np.array([h.score64 for h in hyps])[:, None]
        vocab = total.shape[1]
        flat = total.ravel()
        order = list(np.argsort(-flat, kind="stable")[:self.beam + 1])
        key = [(hyps[i // vocab].ys, i % vocab) for i in order]
        for n in range(len(order) - 1):  # adjacent pairs; a flip swaps one pair
            if (t, key[n], key[n + 1]) in flips:
                order[n], order[n + 1] = order[n + 1], order[n]
                key[n], key[n + 1] = key[n + 1], key[n]
        seq = [self.sequence(hyps[i // vocab], i % vocab) for i in order]
        for n in range(len(order) - 1):
            a, b = float(flat[order[n]]), float(flat[order[n + 1]])
            ulps = abs(a - b) / float(np.spacing(np.float32(max(abs(a), abs(b)))))
            if ulps > self.ulps:
                continue
            kind = ("edge" if n + 1 == self.beam and seq[n] != seq[n + 1] else
                    "merge" if seq[n] == seq[n + 1] and n + 1 < self.beam else None)
            if kind:
                out.ties.append(Tie(t, kind, key[n], key[n + 1], (a, b), ulps,
                                (float(total64.flat[order[n]]),
                                 float(total64.flat[order[n + 1]]))))
        order64 = list(np.argsort(-total64.ravel(), kind="stable")[:self.beam])
        beam = self.merge(hyps, order[:self.beam], flat, total64, vocab, t)
        if not out.float64_differs:
            other = self.merge(hyps, order64, flat, total64, vocab, t)
            # other pairs in the beam (merged into the same sequences they change its score)
            # or other timestamps kept
            if (set(order[:self.beam]) != set(order64) or
                    {(h.ys, h.frames) for h in beam} != {(h.ys, h.frames) for h in other}):
                n = next(n for n, (i, j) in enumerate(zip(order, order64)) if i != j)
                i, j = order[n], order64[n]
                out.float64_differs.append({
                    "frame": t, "sherpa_rule": (hyps[i // vocab].ys, i % vocab),
                    "float64": (hyps[j // vocab].ys, j % vocab),
                    "float32_scores": (float(flat[i]), float(flat[j])),
                    "float64_scores": (float(total64.flat[i]), float(total64.flat[j]))})
        return beam

    def merge(self, hyps: list[Hyp], chosen: list[int], flat: np.ndarray,
              total64: np.ndarray, vocab: int, t: int) -> list[Hyp]:
        """The children ``chosen`` (flat indices, in order) merged: the first of equal
        sequences keeps its timestamps, scores log-added in double."""
        merged: dict[tuple, Hyp] = {}
        for i in chosen:
            h, v = hyps[i // vocab], i % vocab
            ys = self.sequence(h, v)
            score, score64 = float(flat[i]), float(total64.flat[i])
            old = merged.get(ys)
            if old is None:
                frames = h.frames if v in self.blanks else h.frames + (t,)
                merged[ys] = Hyp(ys, frames, score, score64)
            else:
                old.score = logaddexp(old.score, score)
                old.score64 = logaddexp(old.score64, score64)
        return list(merged.values())

    def sequence(self, h: Hyp, v: int) -> tuple:
        return h.ys if v in self.blanks else h.ys + (v,)


def first_difference(ours: list, theirs: list) -> int | None:
    for c, (a, b) in enumerate(zip(ours, theirs)):
        if a is not None and a != b:
            return c
    return None


def explain(rule: SherpaRule, rec, chunks: list[np.ndarray], sherpa: list[tuple],
            max_flips: int, max_tries: int) -> dict:
    """Search for the ties whose other order reproduces sherpa-onnx's result per chunk."""
    target = [(tuple(s for s in toks), frames) for toks, frames in sherpa]
    ends = np.cumsum([len(c) for c in chunks]).tolist()

    def spelled(replay: Replay) -> list:
        return [None if b is None else spell(rec, *b) for b in replay.chunk_best]

    def agreement(best: tuple, c: int) -> int:
        """How many leading (symbol, frame) pairs chunk c's best shares with sherpa-onnx's."""
        pairs, theirs = list(zip(*best)), list(zip(*target[c]))
        n = next((i for i, (a, b) in enumerate(zip(pairs, theirs)) if a != b),
                 min(len(pairs), len(theirs)))
        return len(pairs) + len(theirs) + 1 if best == target[c] else n

    flips: list[tuple] = []
    taken: list[Tie] = []
    base = rule.run(chunks)
    tries = 0
    while True:
        got = spelled(base)
        c = first_difference(got, target)
        if c is None:
            return {"explained": True, "flips": [tie_report(t, rec) for t in taken],
                    "tries": tries, "first_diverging_step": diverging(base, rec)}
        if len(flips) >= max_flips:
            break
        # a flip is kept when chunk c's best then agrees with sherpa-onnx's for longer (some
        # differences need two ties, e.g. two merges each keeping the other timestamps)
        now = agreement(got[c], c)
        candidates = sorted((t for t in base.ties if t.frame < ends[c]
                             and (t.frame, t.first, t.second) not in flips),
                            key=lambda t: (-t.frame, t.ulps))
        found = None
        for tie in candidates:
            if tries >= max_tries:
                break
            tries += 1
            trial = frozenset(flips) | {(tie.frame, tie.first, tie.second)}
            part = rule.run(chunks, trial, (tie.frame, base.beams[tie.frame]), ends[c])
            if agreement(spelled(part)[c], c) > now:
                found = tie
                break
        if found is None:
            break
        flips.append((found.frame, found.first, found.second))
        taken.append(found)
        base = rule.run(chunks, frozenset(flips))
    return {"explained": False, "flips": [tie_report(t, rec) for t in taken],
            "stuck_at_chunk": c, "tries": tries}


def diverging(replay: Replay, rec) -> dict | None:
    """The first frame where streamdec's float64 order would leave sherpa-onnx's path, with
    the two candidates and how far apart their float32 scores are (in ulps)."""
    if not replay.float64_differs:
        return None
    d = replay.float64_differs[0]
    names = rec.symbols.id_to_symbol
    a, b = d["float32_scores"]
    return {"frame": d["frame"],
            **{side: {"tokens_tail": [names[x] for x in d[side][0][-3:]],
                      "token": names[d[side][1]] if d[side][1] >= 0 else "(the result)"}
               for side in ("sherpa_rule", "float64")},
            "float32_scores": [a, b],
            "ulps": round(abs(a - b) / float(np.spacing(np.float32(max(abs(a), abs(b))))), 3),
            "float64_scores": list(d["float64_scores"]),
            "float64_difference": d["float64_scores"][1] - d["float64_scores"][0]}


def tie_report(t: Tie, rec) -> dict:
    def cand(k):
        ys, v = k
        names = rec.symbols.id_to_symbol
        return {"tokens_tail": [names[x] for x in ys[-3:]],
                "token": names[v] if v >= 0 else "(the hypothesis itself)"}
    return {"frame": t.frame, "kind": t.kind, "first": cand(t.first), "second": cand(t.second),
            "float32_scores": list(t.scores32), "ulps": round(t.ulps, 3),
            "float64_scores": list(t.scores64),
            "float64_difference": t.scores64[0] - t.scores64[1]}


# -- the report -------------------------------------------------------------------------------
def measure(args) -> dict:
    rec = Recognizer(RecognizerConfig(model=model_config(args, args.threads),
                                      endpoint=EndpointConfig(enabled=False)))
    utts = utterances(args.manifest, args.utterances, rec.model_files.directory)
    srec = sherpa_recognizer(rec.model_files, rec.meta.model_type, "modified_beam_search",
                             args.beam, args.threads)
    search = SearchConfig(method="modified_beam", beam=args.beam)
    rule = SherpaRule(rec, args.beam, args.ulps)
    load_before = load_average()
    t0 = time.perf_counter()
    rows, counts = [], {"utterances": len(utts), "identical": 0, "replay_identical": 0,
                        "explained": 0, "unexplained": 0}
    for u in utts:
        sherpa = decode_sherpa(srec, u, rec.meta.chunk_frames, rec.meta.encoder_frame_seconds)
        final, chunks = decode_streamdec(rec, u, search)
        replayed = spell(rec, *rule.run(chunks).chunk_best[-1])
        row = {"utterance": Path(u.utt).name, "seconds": round(u.seconds, 2),
               "chunks": len(chunks), "identical": final == sherpa[-1],
               "replay_identical": replayed == sherpa[-1]}
        counts["identical"] += row["identical"]
        counts["replay_identical"] += row["replay_identical"]
        if not (row["identical"] and row["replay_identical"]):
            why = explain(rule, rec, chunks, sherpa, args.max_flips, args.max_tries)
            row.update(why)
            counts["explained" if why["explained"] else "unexplained"] += 1
            step = why.get("first_diverging_step")
            print(f"{row['utterance']}: streamdec {'=' if row['identical'] else '!='}, "
                  f"replay {'=' if row['replay_identical'] else '!='}; "
                  f"{'explained' if why['explained'] else 'UNEXPLAINED'} by "
                  f"{len(why['flips'])} ties flipped" + (
                      f"; streamdec leaves at frame {step['frame']}, {step['ulps']} ulp"
                      if step else ""), file=sys.stderr, flush=True)
        rows.append(row)
    ulps = [f["ulps"] for r in rows for f in r.get("flips", [])]
    steps = [r["first_diverging_step"]["ulps"] for r in rows
             if not r["identical"] and r.get("first_diverging_step")]
    return {"setup": {"benchmark": "beam_parity", "model": model_report(rec.model_files,
                                                                         args.int8),
                      "manifest": str(args.manifest), "beam": args.beam,
                      "threads": args.threads, "ulps": args.ulps, "batch": 1,
                      "endpointing": False, "command": " ".join(sys.argv)},
            "counts": counts,
            "ties_flipped": {"count": len(ulps), "max_ulps": max(ulps) if ulps else None},
            "first_diverging_steps": {"count": len(steps),
                                      "max_ulps": max(steps) if steps else None},
            "seconds": round(time.perf_counter() - t0, 1),
            "utterances": rows, "machine": machine(load_before)}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON report to write")
    add_model_options(ap)
    ap.add_argument("--manifest", type=Path, default=MANIFEST,
                    help="TSV of audio paths (relative to its folder) and texts")
    ap.add_argument("--utterances", type=int, default=99, help="first N lines of the manifest")
    ap.add_argument("--beam", type=int, default=4, help="max active paths")
    ap.add_argument("--threads", type=int, default=1, help="ONNX Runtime threads, both peers")
    ap.add_argument("--ulps", type=float, default=1.0,
                    help="a tie: float32 scores at most this many units in the last place apart")
    ap.add_argument("--max-flips", type=int, default=30, help="ties flipped per utterance")
    ap.add_argument("--max-tries", type=int, default=400, help="replays tried per utterance")
    return ap


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    write_report(args.out, measure(args))


if __name__ == "__main__":
    main()

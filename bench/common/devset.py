"""Dev sets of the built-in model and decoding helpers shared by the search benchmark and
the search tests that need a real model.

A dev set is a folder with ``refs.tsv`` (``utt_id<TAB>text``) and ``utt_id.wav`` files, as
``recipes/synthetic-en/make_dev.py`` writes them. ``dev_set()`` uses an existing folder
(``recipes/synthetic-en/data/dev/NAME``), or synthesises the first ``limit`` utterances
from the committed references with the recipe's own code (espeak-ng / flite needed) into a
cache folder. Scoring uses the recipe's normalisation and edit distance (``score.py``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "synthetic-en"

__all__ = ["Utterance", "dev_set", "folder_set", "transcribe", "error_rates", "normalize", "RECIPE"]


def _recipe():
    if str(RECIPE) not in sys.path:
        sys.path.insert(0, str(RECIPE))


def normalize(text: str) -> str:
    """The recipe's text normalisation (upper case words, apostrophes kept)."""
    _recipe()
    from text_norm import normalize as norm

    return norm(text)


def error_rates(refs: dict[str, str], hyps: dict[str, str]) -> dict[str, float]:
    """{'cer', 'wer', 'utts'} on the recipe's normalised text."""
    _recipe()
    from score import error_rates as rates

    return rates(refs, hyps)


@dataclass(frozen=True)
class Utterance:
    utt: str
    text: str
    samples: np.ndarray  # float32 mono
    rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


def _cache_dir() -> Path:
    return Path(os.environ.get("STREAMDEC_DEV_CACHE", Path(tempfile.gettempdir()) / "streamdec-dev"))


def dev_set(name: str = "espeak", limit: int = 0) -> list[Utterance]:
    """The first ``limit`` (0: all) utterances of dev set ``name``: espeak, flite, or
    espeak8k (the espeak audio as 8 kHz mu-law, converted by sox as make_dev.py does)."""
    import soundfile as sf

    _recipe()
    from make_dev import read_refs

    source = "espeak" if name == "espeak8k" else name
    refs = read_refs(RECIPE / "dev" / f"{source}.tsv")
    if limit:
        refs = refs[:limit]
    folder = RECIPE / "data" / "dev" / name
    if not all((folder / f"{u}.wav").is_file() for u, _ in refs):
        folder = _cache_dir() / name
        missing = [(i, u, t) for i, (u, t) in enumerate(refs) if not (folder / f"{u}.wav").is_file()]
        if missing and name == "espeak8k":
            _telephone(dev_set("espeak", limit), folder)
        elif missing:
            _synthesise(name, missing, folder)
    out = []
    for utt, text in refs:
        samples, rate = sf.read(folder / f"{utt}.wav", dtype="float32")
        out.append(Utterance(utt, text, samples, rate))
    return out


def folder_set(folder: Path) -> list[Utterance]:
    """The utterances of a dev set folder (``refs.tsv`` and ``UTT.wav``, as make_dev.py
    writes them), in refs.tsv's order; a missing refs.tsv or wav is an error naming it."""
    import soundfile as sf

    _recipe()
    from make_dev import read_refs

    folder = Path(folder)
    if not (folder / "refs.tsv").is_file():
        raise SystemExit(f"{folder / 'refs.tsv'} missing: a dev set folder has refs.tsv "
                         "(utt<TAB>text) and UTT.wav files")
    refs = read_refs(folder / "refs.tsv")
    missing = [u for u, _ in refs if not (folder / f"{u}.wav").is_file()]
    if missing:
        raise SystemExit(f"{folder}: {len(missing)} of the {len(refs)} utterances of refs.tsv "
                         f"have no wav, first {folder / (missing[0] + '.wav')}")
    return [Utterance(u, t, *sf.read(folder / f"{u}.wav", dtype="float32")) for u, t in refs]


def _synthesise(engine: str, rows: list[tuple[int, str, str]], folder: Path) -> None:
    import soundfile as sf

    from make_dev import dev_voice
    from synth import synthesize

    folder.mkdir(parents=True, exist_ok=True)
    for i, utt, text in rows:  # the same voice per index as make_dev.py
        samples, _ = synthesize(dev_voice(engine, i), text)
        samples = samples / (abs(samples).max() + 1e-9) * 0.8
        tmp = folder / f".{utt}.wav"
        sf.write(tmp, samples, 16000, subtype="PCM_16")
        tmp.replace(folder / f"{utt}.wav")


def _telephone(utts: list[Utterance], folder: Path) -> None:
    """8 kHz mu-law copies of 16 kHz utterances (sox, as make_dev.py makes espeak8k)."""
    import subprocess

    import soundfile as sf

    folder.mkdir(parents=True, exist_ok=True)
    for u in utts:
        if (folder / f"{u.utt}.wav").is_file():
            continue
        src, tmp = folder / f".{u.utt}.16k.wav", folder / f".{u.utt}.wav"
        sf.write(src, u.samples, u.rate, subtype="PCM_16")
        subprocess.run(["sox", "-D", str(src), "-r", "8000", "-e", "mu-law", str(tmp)], check=True)
        src.unlink()
        tmp.replace(folder / f"{u.utt}.wav")


def transcribe(rec, utts: Sequence[Utterance], search=None, hotwords: Sequence[str] = (),
               batch: int = 16, phrases: Sequence[str] | None = None) -> dict[str, str]:
    """Final text of each utterance (segments joined by a space), decoded ``batch`` streams
    at a time with all audio given at once."""
    from streamdec.core.drive import decode_ready

    out = {}
    for i in range(0, len(utts), batch):
        group = utts[i:i + batch]
        streams = [rec.create_stream(search=search, hotwords=hotwords, phrases=phrases)
                   for _ in group]
        for s, u in zip(streams, group):
            s.accept_waveform(u.rate, u.samples)
            s.input_finished()
        decode_ready(rec, streams)
        for s, u in zip(streams, group):
            texts = [e.text for e in s.pop_events() if e.is_final and e.text]
            out[u.utt] = " ".join(texts)
    return out

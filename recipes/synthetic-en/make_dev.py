"""Regenerate the dev audio deterministically from the committed reference texts.

- espeak:   dev/espeak.tsv spoken by espeak-ng with held-out variants
            (synth.DEV_ESPEAK_VARIANTS, never used in training), 16 kHz wav;
- flite:    dev/flite.tsv spoken by the held-out flite voice (synth.DEV_FLITE_VOICE),
            default duration and f0, 16 kHz wav;
- espeak8k: the espeak dev audio converted by sox to 8 kHz mu-law wav (telephony);
- piper:    (``--piper``, step 3d's checkpoint choice) dev/flite.tsv spoken by the Piper
            voice en_US-joe-medium, which step 3c and 3d train on (so this set measures
            held-out sentences in a trained voice, not a new voice); Piper's noise makes it
            differ slightly from run to run.
- heldout:  (``--real-en``) the held-out real speakers of ``real_en`` (3 Mini LibriSpeech
            speakers, 4 AN4 test speakers), as 16 kHz wav decoded from the set's Opus
            files: it picks the checkpoints of the real-English fine-tuning.
Each set also gets ``refs.tsv`` (``utt_id<TAB>text``); wav stems are the utt ids.

Usage: python make_dev.py OUT_DIR [--limit N] [--piper | --real-en]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
from pathlib import Path

import soundfile as sf

from synth import DEV_ESPEAK_VARIANTS, DEV_FLITE_VOICE, ESPEAK_BASES, Voice, synthesize

HERE = Path(__file__).resolve().parent


def read_refs(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            utt, text = line.split("\t", 1)
            rows.append((utt, text))
    return rows


def dev_voice(engine: str, index: int) -> Voice:
    rng = random.Random(10_000 + index)
    if engine == "espeak":
        return Voice("espeak", f"{ESPEAK_BASES[index % len(ESPEAK_BASES)]}+"
                     f"{DEV_ESPEAK_VARIANTS[index % len(DEV_ESPEAK_VARIANTS)]}",
                     rate=rng.randint(140, 200), pitch=rng.randint(25, 75))
    return Voice("flite", DEV_FLITE_VOICE, rate=1.0, pitch=rng.randint(170, 190), spread=20)


def write_wav(path: Path, samples) -> None:
    """16 kHz 16-bit, peak at 0.8 (headroom for sox's resampling)."""
    sf.write(path, samples / (abs(samples).max() + 1e-9) * 0.8, 16000, subtype="PCM_16")


def make_set(name: str, engine: str, refs: list[tuple[str, str]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for i, (utt, text) in enumerate(refs):
        write_wav(out / f"{utt}.wav", synthesize(dev_voice(engine, i), text)[0])
    write_refs(out, refs)


def make_piper_set(refs: list[tuple[str, str]], out: Path) -> None:
    from prepare_extra import piper_speak

    out.mkdir(parents=True, exist_ok=True)
    for utt, text in refs:
        write_wav(out / f"{utt}.wav", piper_speak(text)[0])
    write_refs(out, refs)


def make_heldout_set(out: Path, limit: int = 0) -> None:
    from real_en import clips

    out.mkdir(parents=True, exist_ok=True)
    refs = []
    for c in clips("heldout")[: limit or None]:
        utt = f"{c.corpus}-{c.path.stem}"
        samples, rate = sf.read(c.path, dtype="float32")
        sf.write(out / f"{utt}.wav", samples, rate, subtype="PCM_16")
        refs.append((utt, c.text))
    write_refs(out, refs)


def write_refs(out: Path, refs: list[tuple[str, str]]) -> None:
    (out / "refs.tsv").write_text("".join(f"{u}\t{t}\n" for u, t in refs), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--refs-dir", type=Path, default=HERE / "dev")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--piper", action="store_true", help="only the piper set (needs piper-tts)")
    ap.add_argument("--real-en", action="store_true", help="only the held-out real speakers (heldout)")
    args = ap.parse_args()
    if args.real_en:
        make_heldout_set(args.out_dir / "heldout", args.limit)
        return
    if args.piper:
        make_piper_set(read_refs(args.refs_dir / "flite.tsv")[: args.limit or None], args.out_dir / "piper")
        return
    if shutil.which("sox") is None:
        raise SystemExit("make_dev: sox is required")
    for name in ("espeak", "flite"):
        refs = read_refs(args.refs_dir / f"{name}.tsv")
        if args.limit:
            refs = refs[: args.limit]
        make_set(name, name, refs, args.out_dir / name)
    # telephony: same audio as espeak, 8 kHz mu-law (what a phone line delivers)
    src, dst = args.out_dir / "espeak", args.out_dir / "espeak8k"
    dst.mkdir(parents=True, exist_ok=True)
    refs = read_refs(src / "refs.tsv")
    for utt, _ in refs:
        subprocess.run(["sox", "-D", str(src / f"{utt}.wav"), "-r", "8000", "-e", "mu-law",
                        str(dst / f"{utt}.wav")], check=True)
    write_refs(dst, refs)
    print(f"dev sets written to {args.out_dir}")


if __name__ == "__main__":
    main()

"""Real human voices for the encoder: Debian's Asterisk prompt packages in Spanish,
French, Italian and Russian (never English: ``asterisk-core-sounds-en*`` is reserved
as an outside check of the model and is refused here).

Each prompt is a professionally read telephone sentence with its transcript
(``/usr/share/doc/asterisk-core-sounds-LANG/core-sounds-LANG.txt.gz``). The model's
English character targets cannot describe them, so they train only the IPA-phoneme
CTC head (``espeak-ng --ipa`` in the prompt's language): the lower encoder layers
learn real voices, the English heads never see a foreign word.

    apt-get install asterisk-core-sounds-{es,fr,it,ru} asterisk-core-sounds-{es,fr,it,ru}-wav \
        asterisk-prompt-it-menardi-wav
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SPEAKERS", "ESPEAK_LANGUAGE", "Prompt", "transcripts", "prompts"]

SOUNDS = Path("/usr/share/asterisk/sounds")
DOCS = Path("/usr/share/doc")
# (language, speaker folder): each folder is one speaker's 8 kHz WAV prompts
SPEAKERS = [("es", "es_MX_f_Allison"), ("fr", "fr_CA_f_June"), ("it", "it_IT_m_Carlo"),
            ("it", "it_IT_f_Menardi"), ("ru", "ru_RU_f_IvrvoiceRU")]
ESPEAK_LANGUAGE = {"es": "es-419", "fr": "fr-fr", "it": "it", "ru": "ru"}


@dataclass(frozen=True)
class Prompt:
    path: Path
    language: str
    speaker: str
    text: str


def _clean(text: str) -> str:
    """Drop editorial notes in parentheses; '' for descriptions of tones ('[beep]')."""
    text = text.strip().lstrip("\ufeff")
    if not text or text.startswith("["):
        return ""
    text = re.sub(r"\([^)]*\)", " ", text)
    return " ".join(text.replace("“", " ").replace("”", " ").replace('"', " ").split())


def transcripts(language: str, docs: Path = DOCS) -> dict[str, str]:
    """prompt name (e.g. 'digits/7', 'agent-pass') -> transcript, from the package's list."""
    if language.startswith("en"):
        raise ValueError("the English Asterisk prompts are reserved for an outside check")
    path = docs / f"asterisk-core-sounds-{language}" / f"core-sounds-{language}.txt.gz"
    out = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.lstrip("\ufeff")
            if line.startswith(";") or ":" not in line:
                continue
            name, text = line.split(":", 1)
            text = _clean(text)
            if text and re.search(r"\w", text):
                out[name.strip()] = text
    return out


def prompts(sounds: Path = SOUNDS, docs: Path = DOCS) -> list[Prompt]:
    """Every installed WAV prompt of SPEAKERS that has a transcript, sorted (deterministic).
    A folder that is not installed is skipped; none at all is an error."""
    out = []
    for language, speaker in SPEAKERS:
        folder = sounds / speaker
        if not folder.is_dir():
            continue
        texts = transcripts(language, docs)
        for wav in sorted(folder.rglob("*.wav")):
            name = wav.relative_to(folder).with_suffix("").as_posix()
            if name in texts:
                out.append(Prompt(wav, language, speaker, texts[name]))
    if not out:
        raise FileNotFoundError(f"no Asterisk prompts with transcripts under {sounds} (see this module's doc)")
    return out

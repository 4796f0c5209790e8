"""Output units: characters (the model's tokens) and IPA phonemes (auxiliary CTC only).

Tokens: ``<blk>`` = 0, ``▁`` (U+2581, word boundary) = 1, then ``'`` and A-Z. A
transcript "HI THERE" is the id sequence of "HI▁THERE"; decoders that turn ``▁`` into a
space (sherpa-onnx, streamdec) reproduce the text.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TOKENS", "WORD_BOUNDARY", "text_to_ids", "ids_to_text", "write_tokens",
           "PhoneSet", "ipa_symbols"]

WORD_BOUNDARY = "\u2581"
TOKENS = ["<blk>", WORD_BOUNDARY, "'"] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
_TOKEN_ID = {t: i for i, t in enumerate(TOKENS)}


def text_to_ids(text: str) -> list[int]:
    """Normalised text (see text_norm.normalize) -> token ids (no blank)."""
    return [_TOKEN_ID[c] for c in "\u2581".join(text.split())]


def ids_to_text(ids) -> str:
    return "".join(TOKENS[i] for i in ids if i > 0).replace(WORD_BOUNDARY, " ").strip()


def write_tokens(path: Path) -> None:
    path.write_text("".join(f"{t} {i}\n" for i, t in enumerate(TOKENS)), encoding="utf-8")


_IGNORED_IPA = set(" ˈˌ-_'\u200d")


def ipa_symbols(ipa: str) -> list[str]:
    """Split an espeak-ng IPA string into symbols: one per character, stress marks and
    word spaces dropped, the length mark kept on its vowel (ɑː is one symbol)."""
    out: list[str] = []
    for ch in ipa:
        if ch in _IGNORED_IPA:
            continue
        if ch == "ː" and out:
            out[-1] += ch
        else:
            out.append(ch)
    return out


class PhoneSet:
    """IPA symbol inventory built from the training data; id 0 is the CTC blank."""

    def __init__(self, symbols: list[str]) -> None:
        self.symbols = ["<blk>"] + sorted(set(symbols) - {"<blk>"})
        self._id = {s: i for i, s in enumerate(self.symbols)}

    @classmethod
    def from_ipa(cls, ipa_strings, min_count: int = 20) -> "PhoneSet":
        counts: dict[str, int] = {}
        for ipa in ipa_strings:
            for s in ipa_symbols(ipa):
                counts[s] = counts.get(s, 0) + 1
        return cls([s for s, c in counts.items() if c >= min_count])

    def __len__(self) -> int:
        return len(self.symbols)

    def encode(self, ipa: str) -> list[int]:
        return [self._id[s] for s in ipa_symbols(ipa) if s in self._id]

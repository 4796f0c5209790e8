"""Lexicons: ``word unit unit ...`` lines (several lines for several pronunciations), read,
written, and made from plain word lists by spelling each word with the model's own units.

    entries = read_lexicon("lang/lexicon.txt")          # [(word, (unit, ...)), ...]
    entries, skipped = spell_words(["HELLO", "WORLD"], symbols)

Spelling uses ``SymbolTable.encode`` (characters with the word-boundary unit, or the
model's sentencepiece pieces), the same tokenisation the hotwords use, so a lexicon
made from a word list matches what the model emits. A word the units cannot write is
skipped and reported, never guessed.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import ConfigError, TokenizeError

__all__ = ["read_lexicon", "write_lexicon", "spell_words", "read_words", "open_text"]


def open_text(path: str | Path, mode: str = "rt"):
    """A text file, gzip-compressed when its name ends with ``.gz``."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, mode, encoding="utf-8")
    return open(path, mode[0], encoding="utf-8")


def read_lexicon(path: str | Path) -> list[tuple[str, tuple[str, ...]]]:
    """(word, units) per line of a lexicon file (``.gz`` allowed); ConfigError for a line
    without units."""
    out = []
    try:
        with open_text(path) as f:
            for num, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) < 2:
                    raise ConfigError(f"{path}:{num}: a lexicon line needs a word and its "
                                      f"units: {line.rstrip()!r}")
                out.append((parts[0], tuple(parts[1:])))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read lexicon ({e})") from e
    return out


def read_words(path: str | Path) -> list[str]:
    """The first field of each non-empty line (a word list, or words.txt with ids)."""
    try:
        with open_text(path) as f:
            return [line.split()[0] for line in f if line.split()]
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read word list ({e})") from e


def write_lexicon(path: str | Path, entries: Iterable[tuple[str, Sequence[str]]]) -> None:
    with open_text(path, "wt") as f:
        for word, units in entries:
            f.write(f"{word} {' '.join(units)}\n")


def spell_words(words: Iterable[str], symbols) -> tuple[list[tuple[str, tuple[str, ...]]],
                                                        list[str]]:
    """(lexicon entries, skipped words): each distinct word spelled with ``symbols`` (a
    ``SymbolTable``); words it cannot write are skipped. Words keep the case the model
    writes (``SymbolTable.encode`` decides it)."""
    entries, skipped, seen = [], [], set()
    for word in words:
        if word in seen or word.startswith("<") or word.startswith("#"):
            continue
        seen.add(word)
        try:
            ids = symbols.encode(word)
        except TokenizeError:
            skipped.append(word)
            continue
        units = tuple(symbols.id_to_symbol[i] for i in ids)
        entries.append((symbols.text(ids), units))
    return entries, skipped

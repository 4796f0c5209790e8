"""Reading a lang directory for the search.

A lang directory (``streamdec lang`` writes one) holds the lexicon and the word LM:

- ``lexicon.txt`` (``word unit unit ...``), or else ``words.txt`` / ``words`` (one word a
  line, an id may follow), spelled with the model's units;
- ``G.arpa``: the word n-gram in ARPA form.

Each file may be gzip-compressed (``lexicon.txt.gz``, ``G.arpa.gz``). The search reads
them through their compiled form (``compiled.py``: ``load_word_graph``), made on first use
and kept.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .lexicon import read_lexicon, read_words, spell_words

__all__ = ["find_file", "load_lexicon", "word_sources"]


def find_file(folder: Path, *names: str) -> Path | None:
    """The first of ``names`` (or ``name.gz``) present in ``folder``."""
    for name in names:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def _lexicon_file(folder: Path) -> Path:
    """lexicon.txt, else the word list of a lang directory; ConfigError when neither."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: lang directory not found")
    found = find_file(folder, "lexicon.txt") or find_file(folder, "words.txt", "words")
    if found is None:
        raise ConfigError(f"{folder}: lang directory without lexicon.txt or words.txt")
    return found


def load_lexicon(folder: str | Path, symbols) -> list[tuple[str, tuple[str, ...]]]:
    """The lexicon of a lang directory: lexicon.txt, or words.txt spelled with ``symbols``."""
    path = _lexicon_file(Path(folder))
    if path.name.startswith("lexicon.txt"):
        return read_lexicon(path)
    entries, _ = spell_words(read_words(path), symbols)
    return entries


def word_sources(folder: str | Path) -> tuple[Path, Path]:
    """(lexicon or word list, G.arpa): the files a lang directory's words come from."""
    folder = Path(folder)
    lexicon = _lexicon_file(folder)
    arpa = find_file(folder, "G.arpa")
    if arpa is None:
        raise ConfigError(f"{folder}: lang directory without G.arpa (make one with "
                          f"'streamdec lang lm')")
    return lexicon, arpa


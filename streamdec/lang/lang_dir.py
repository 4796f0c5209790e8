"""Reading a lang directory for the search.

A lang directory (``streamdec lang`` writes one) holds the lexicon and the word LM:

- ``lexicon.txt`` (``word unit unit ...``), or else ``words.txt`` / ``words`` (one word a
  line, an id may follow), spelled with the model's units;
- ``G.arpa``: the word n-gram in ARPA form.

Each file may be gzip-compressed (``lexicon.txt.gz``, ``G.arpa.gz``).

    graph = load_word_graph("lang", symbols, WordOptions(lm_scale=0.5))
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .lexicon import read_lexicon, read_words, spell_words
from .ngram import NgramLm

__all__ = ["find_file", "load_lexicon", "load_word_graph"]


def find_file(folder: Path, *names: str) -> Path | None:
    """The first of ``names`` (or ``name.gz``) present in ``folder``."""
    for name in names:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def load_lexicon(folder: str | Path, symbols) -> list[tuple[str, tuple[str, ...]]]:
    """The lexicon of a lang directory: lexicon.txt, or words.txt spelled with ``symbols``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: lang directory not found")
    lex = find_file(folder, "lexicon.txt")
    if lex is not None:
        return read_lexicon(lex)
    words = find_file(folder, "words.txt", "words")
    if words is None:
        raise ConfigError(f"{folder}: lang directory without lexicon.txt or words.txt")
    entries, _ = spell_words(read_words(words), symbols)
    return entries


def load_word_graph(folder: str | Path, symbols, options):
    """The ``WordGraph`` of a lang directory (lexicon x G.arpa) for the model's ``symbols``."""
    from ..search.word_graph import WordGraph

    folder = Path(folder)
    lexicon = load_lexicon(folder, symbols)
    arpa = find_file(folder, "G.arpa")
    if arpa is None:
        raise ConfigError(f"{folder}: lang directory without G.arpa (make one with "
                          f"'streamdec lang lm')")
    return WordGraph.build(lexicon, NgramLm.from_arpa(arpa), symbols, options)

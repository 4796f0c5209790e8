"""Writing a lang directory (the layout of icefall's prepare_lang) from a lexicon.

    write_lang_dir("lang", entries, symbols)          # entries: [(word, units), ...]

writes:

- ``tokens.txt``: the model's units with their ids, then ``#0``, ``#1``... after them;
- ``words.txt``: ``<eps> 0``, ``<unk> 1`` (for G; no pronunciation), the words (sorted),
  ``#0``, ``<s>``, ``</s>``;
- ``lexicon.txt``; ``lexicon_disambig.txt``: the same with ``#1``... appended where one
  pronunciation is a proper prefix of another or several words share it (``#0`` is kept
  for the LM's back-off arcs);
- ``L.fst``, ``L_disambig.fst`` (OpenFst, kaldifst), ``L.pt``, ``L_disambig.pt`` (k2's
  dict, torch) and ``L.txt``, ``L_disambig.txt`` (k2's text form): see ``lexicon_fst``.

The search needs only ``lexicon.txt`` (or ``words.txt``) and ``G.arpa``; the FSTs are for
graph tools (k2, OpenFst/Kaldi).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError
from .lexicon import write_lexicon
from .lexicon_fst import k2_text, lexicon_fst, write_k2_dict, write_openfst

__all__ = ["add_disambig", "write_lang_dir"]


def add_disambig(entries: Sequence[tuple[str, Sequence[str]]]
                 ) -> tuple[list[tuple[str, tuple[str, ...]]], int]:
    """(entries with disambiguation symbols, the highest k of ``#k`` used).

    A pronunciation gets ``#k`` when it is a proper prefix of another pronunciation or when
    several entries share it; the entries sharing one get ``#1``, ``#2``... in order."""
    count: dict[tuple[str, ...], int] = defaultdict(int)
    prefixes: set[tuple[str, ...]] = set()
    for _, units in entries:
        units = tuple(units)
        if not units:
            raise ConfigError("lexicon: a pronunciation without units")
        count[units] += 1
        for n in range(1, len(units)):
            prefixes.add(units[:n])
    last: dict[tuple[str, ...], int] = defaultdict(int)
    out, highest = [], 0
    for word, units in entries:
        units = tuple(units)
        if units not in prefixes and count[units] == 1:
            out.append((word, units))
            continue
        last[units] += 1
        highest = max(highest, last[units])
        out.append((word, units + (f"#{last[units]}",)))
    return out, highest


def write_lang_dir(folder: str | Path, entries: Sequence[tuple[str, Sequence[str]]], symbols,
                   sil_unit: str | None = None, sil_prob: float = 0.5, fsts: bool = True,
                   k2_dicts: bool = True) -> dict[str, int]:
    """Write the lang directory (see the module notes); returns counts for a summary.
    ``symbols``: the model's ``SymbolTable``; ``sil_unit``: a silence unit of the model for
    optional silence between words (None: none)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if sil_unit is not None and sil_unit not in symbols.symbol_to_id:
        raise ConfigError(f"silence unit {sil_unit!r} is not one of the model's units")
    entries = [(w, tuple(u)) for w, u in entries]
    for word, units in entries:
        missing = [u for u in units if u not in symbols.symbol_to_id]
        if missing:
            raise ConfigError(f"lexicon word {word!r}: the model has no unit "
                              f"{', '.join(missing)}")
    disambig, highest = add_disambig(entries)
    token_ids = dict(symbols.symbol_to_id)
    first = max(symbols.id_to_symbol) + 1
    for k in range(highest + 1):
        token_ids[f"#{k}"] = first + k
    words = sorted({w for w, _ in entries})
    word_ids = {"<eps>": 0, "<unk>": 1, **{w: i for i, w in enumerate(words, 2)}}
    for extra in ("#0", "<s>", "</s>"):
        word_ids[extra] = len(word_ids)
    (folder / "tokens.txt").write_text(
        "".join(f"{s} {i}\n" for s, i in sorted(token_ids.items(), key=lambda x: x[1])),
        encoding="utf-8")
    (folder / "words.txt").write_text("".join(f"{w} {i}\n" for w, i in word_ids.items()),
                                      encoding="utf-8")
    write_lexicon(folder / "lexicon.txt", entries)
    write_lexicon(folder / "lexicon_disambig.txt", disambig)
    if fsts:
        plain = lexicon_fst(entries, token_ids, word_ids, sil_unit, sil_prob)
        with_loop = lexicon_fst(disambig, token_ids, word_ids, sil_unit, sil_prob,
                                disambig_loop=True)
        for name, fst in (("L", plain), ("L_disambig", with_loop)):
            write_openfst(fst, folder / f"{name}.fst")
            (folder / f"{name}.txt").write_text(k2_text(fst), encoding="utf-8")
            if k2_dicts:
                write_k2_dict(fst, folder / f"{name}.pt")
    return {"words": len(words), "entries": len(entries), "disambig": highest}

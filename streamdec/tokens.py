"""The model's units (tokens.txt): ids to symbols and text.

tokens.txt holds one ``symbol id`` per line; a line holding only an id is a space. Blank
is ``<blk>`` (id 0), ``<unk>`` is never emitted. A ``▁`` (U+2581) marks a word start and
becomes a space in text; ``<0xNN>`` pieces are byte fallback (their bytes are joined, then
read as UTF-8). Disambiguation symbols ``#0``, ``#1``, ... that icefall's lang directories
append are not units of the model and are skipped; ``check_vocab`` then asks that the ids
be exactly 0..V-1 for a joiner with V outputs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

from .errors import ModelLoadError, TokenizeError

__all__ = ["SymbolTable", "WORD_START"]

WORD_START = "\u2581"
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SPECIAL = re.compile(r"^<[^>]+>$")
_DISAMBIG = re.compile(r"^#\d+$")


def _symbol_bytes(sym: str) -> bytes:
    """What one symbol contributes to text."""
    m = _BYTE_PIECE.match(sym)
    if m:
        return bytes([int(m.group(1), 16)])
    if _SPECIAL.match(sym):
        return b""
    return sym.replace(WORD_START, " ").encode("utf-8")


def _ids(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:5]))
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")


_WORD_START, _HAS_TEXT = 1, 2  # SymbolTable._unit_kinds flags


class SymbolTable:
    """Bidirectional id <-> symbol map of one model."""

    def __init__(self, id_to_symbol: dict[int, str]) -> None:
        if not id_to_symbol:
            raise ModelLoadError("tokens: empty symbol table")
        self.id_to_symbol = dict(id_to_symbol)
        self.symbol_to_id = {s: i for i, s in self.id_to_symbol.items()}
        self.blank_id = self.symbol_to_id.get("<blk>", 0)
        self.unk_id = self.symbol_to_id.get("<unk>")
        self.bpe_model: Path | None = None  # sentencepiece model used by ``encode``
        self.path: Path | None = None  # the tokens file read, for messages
        self._sp = None
        self._bytes = {i: _symbol_bytes(s) for i, s in self.id_to_symbol.items()}  # id -> text
        # id -> WORD_START (its text begins with a boundary) | HAS_TEXT (not only a boundary
        # or special); an id missing here is neither: word_spans looks each unit up once
        self._unit_kinds = {i: (_WORD_START if b[:1].isspace() else 0)
                               | (_HAS_TEXT if b.strip() else 0)
                            for i, b in self._bytes.items()}

    @classmethod
    def from_file(cls, path: str | Path) -> "SymbolTable":
        path = Path(path)
        if not path.is_file():
            raise ModelLoadError(f"{path}: tokens file not found")
        table: dict[int, str] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ModelLoadError(f"{path}: cannot read tokens file ({e})") from e
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split()
            sym, idx = (" ", parts[0]) if len(parts) == 1 else (parts[0], parts[-1])
            if _DISAMBIG.match(sym):
                continue
            try:
                i = int(idx)
            except ValueError:
                raise ModelLoadError(f"{path}:{n}: expected 'symbol id', got {line!r}") from None
            if i in table:
                raise ModelLoadError(f"{path}:{n}: id {i} given twice ({table[i]!r} and "
                                     f"{sym!r})")
            table[i] = sym
        symbols = cls(table)
        symbols.path = path
        bpe = path.parent / "bpe.model"
        symbols.bpe_model = bpe if bpe.is_file() else None
        return symbols

    def __len__(self) -> int:
        return len(self.id_to_symbol)

    def check_vocab(self, vocab_size: int) -> None:
        """ModelLoadError unless the ids are exactly 0..vocab_size-1 (the joiner's outputs)."""
        where = self.path or "tokens"
        missing = [i for i in range(vocab_size) if i not in self.id_to_symbol]
        extra = sorted(i for i in self.id_to_symbol if not 0 <= i < vocab_size)
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"lacks id(s) {_ids(missing)}")
            if extra:
                problems.append(f"has id(s) {_ids(extra)} beyond them")
            raise ModelLoadError(f"{where}: the joiner outputs {vocab_size} units (ids 0.."
                                 f"{vocab_size - 1}) but the tokens file {' and '.join(problems)}"
                                 f" ({len(self)} symbols, not counting #N disambiguation "
                                 "symbols)")

    def symbols(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_symbol.get(i, "<unk>") for i in ids]

    def text(self, ids: Iterable[int]) -> str:
        """Text of a token sequence: word-start marks become spaces, byte pieces are
        decoded, special symbols (``<blk>``, ``<unk>``...) are dropped."""
        out = b"".join([self._bytes.get(i, b"") for i in ids])
        return " ".join(out.decode("utf-8", errors="replace").split())

    def starts_word(self, token_id: int) -> bool:
        """True for a unit whose text begins with a word boundary (``▁`` alone or as a
        prefix, or a space symbol)."""
        return bool(self._unit_kinds.get(token_id, 0) & _WORD_START)

    def word_spans(self, ids: Sequence[int]) -> list[tuple[str, int, int]]:
        """Words of a token sequence as (text, first token index, last token index), in
        order. A word starts at a unit whose text begins with a space (``▁`` alone or as a
        prefix, or a space symbol); units that are only a boundary or special (``<blk>``)
        belong to no word."""
        spans: list[tuple[str, int, int]] = []
        kinds = self._unit_kinds
        current: list[int] = []  # token indices of the open word
        for n, i in enumerate(ids):
            kind = kinds.get(i, 0)
            if kind & _WORD_START and current:
                self._close_word(ids, current, spans)
                current = []
            if kind & _HAS_TEXT:
                current.append(n)
        if current:
            self._close_word(ids, current, spans)
        return spans

    def _close_word(self, ids: Sequence[int], current: list[int],
                    spans: list[tuple[str, int, int]]) -> None:
        pieces = self._bytes
        word = b"".join([pieces[ids[k]] for k in current]).decode(
            "utf-8", errors="replace").strip()
        if word:
            spans.append((word, current[0], current[-1]))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` in the model's units (hotword phrases).

        With a ``bpe.model`` beside tokens.txt: its sentencepiece pieces. Otherwise
        characters: each word preceded by ``▁`` when that symbol exists, letters in the case
        the table mostly uses (upper case unless it holds more lower-case letters). Raises
        TokenizeError for a unit the table lacks."""
        words = text.split()
        if not words:
            raise TokenizeError(f"nothing to tokenize in {text!r}")
        letters = [s for s in self.symbol_to_id if len(s) == 1 and s.isalpha()]
        lower = sum(s.islower() for s in letters) > sum(s.isupper() for s in letters)
        words = [w.lower() if lower else w.upper() for w in words]
        if self.bpe_model is not None:
            pieces = self._sentencepiece().encode(" ".join(words), out_type=str)
        else:
            start = [WORD_START] if WORD_START in self.symbol_to_id else []
            pieces = [p for w in words for p in start + list(w)]
        missing = sorted({p for p in pieces if p not in self.symbol_to_id})
        if missing:
            raise TokenizeError(f"{text!r}: the model has no unit for {', '.join(missing)}")
        return [self.symbol_to_id[p] for p in pieces]

    def _sentencepiece(self):
        if self._sp is None:
            try:
                import sentencepiece
            except ImportError as e:
                raise TokenizeError(f"{self.bpe_model}: tokenizing text with a BPE model needs "
                                    "the sentencepiece package (pip install sentencepiece)") from e
            self._sp = sentencepiece.SentencePieceProcessor(model_file=str(self.bpe_model))
        return self._sp

"""Fuzz target: a model's ``tokens.txt`` (``SymbolTable.from_file``), then what is made
of its units: text and words of every id, the vocabulary check, a phrase encoded in
them. Invariants: the only errors are ModelLoadError (the file) and TokenizeError (a
phrase the units cannot write); text of any id sequence is a str without leading or
trailing space."""

from __future__ import annotations

from harness import fuzz, instrumented, scratch_file

with instrumented():
    from streamdec.errors import ModelLoadError, TokenizeError
    from streamdec.tokens import SymbolTable

_FILE = scratch_file("tokens.txt")


def TestOneInput(data: bytes) -> None:
    _FILE.write_bytes(data)
    try:
        table = SymbolTable.from_file(_FILE)
    except ModelLoadError:
        return
    ids = sorted(table.id_to_symbol)
    text = table.text(ids + [max(ids) + 1])
    assert isinstance(text, str) and text == text.strip()
    for word, first, last in table.word_spans(ids):
        assert word and 0 <= first <= last < len(ids)
    try:
        table.check_vocab(len(table))
    except ModelLoadError:
        assert ids != list(range(len(ids)))
    try:
        encoded = table.encode("hello world")
    except TokenizeError:
        return
    assert all(i in table.id_to_symbol for i in encoded)


if __name__ == "__main__":
    fuzz(TestOneInput)

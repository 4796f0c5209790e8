"""Punctuation and casing of spoken words: the shipped ONNX tagger.

``assets/punct-case/tagger.onnx`` (trained by ``recipes/punct-case``; see its MODEL.md)
reads word ids (``vocab.txt``: line n is id n + 2; 0 padding, 1 unknown) and gives, per
word, logits of the mark after it (none ``,`` ``.`` ``?``) and of its casing (lower,
Capitalised, UPPER). ``PunctCaseTagger.tag`` takes the most likely of each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ModelLoadError
from ..models.config import ModelConfig
from ..models.onnx_backend import open_session

__all__ = ["PunctCaseTagger", "TAGGER_DIR", "MARKS", "CASINGS"]

TAGGER_DIR = Path(__file__).resolve().parent.parent / "assets" / "punct-case"
MARKS = ("", ",", ".", "?")
CASINGS = ("lower", "cap", "upper")


class PunctCaseTagger:
    """Shared and stateless: ``tag(words)`` -> per word (mark after it, casing)."""

    def __init__(self, directory: Path = TAGGER_DIR, num_threads: int = 1):
        directory = Path(directory)
        vocab = directory / "vocab.txt"
        if not vocab.is_file():
            raise ModelLoadError(f"{vocab}: tagger vocabulary not found")
        self._session = open_session(directory / "tagger.onnx",
                                     ModelConfig(num_threads=num_threads))
        meta = dict(self._session.get_modelmeta().custom_metadata_map)
        labels = (meta.get("punct_labels"), meta.get("case_labels"))
        if labels != (",".join(m or "none" for m in MARKS), ",".join(CASINGS)):
            raise ModelLoadError(f"{directory / 'tagger.onnx'}: labels {labels} are not "
                                 f"{MARKS} and {CASINGS}")
        self._unk = int(meta.get("unk_id", 1))
        words = vocab.read_text(encoding="utf-8").split("\n")
        self._index = {w: n + 2 for n, w in enumerate(words) if w}

    def tag(self, words: Sequence[str]) -> list[tuple[str, str]]:
        """``words`` (any case) -> [(mark after the word: "" , . ?, casing)] per word."""
        if not words:
            return []
        ids = np.array([[self._index.get(w.upper(), self._unk) for w in words]], np.int64)
        punct, case = self._session.run(["punct", "case"], {"ids": ids})
        return [(MARKS[p], CASINGS[c])
                for p, c in zip(punct[0].argmax(-1).tolist(), case[0].argmax(-1).tolist())]

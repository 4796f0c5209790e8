"""The lexicon transducer L (units -> words), as icefall's prepare_lang builds it, in three
forms: OpenFst (``L.fst``, via kaldifst), k2's dict (``L.pt``, ``torch.save`` of what
``k2.Fsa.as_dict()`` returns, written without importing k2) and k2's text form (``L.txt``,
what ``k2.Fsa.from_str(..., acceptor=False)`` reads).

Structure (arcs as ``src dst unit word score``, scores are log-probabilities; OpenFst
weights are their negatives):

- without a silence unit: one loop state 0 that every word leaves and re-enters; a word's
  units form a chain from it, the word label on its first arc, the last arc back to 0;
- with a silence unit and ``sil_prob`` p > 0: start state 0 goes by epsilon to the loop
  state 1 (log(1 - p)) or to the silence state 2 (log p), whose silence unit leads to the
  loop state; a word's last arc goes to the loop state (log(1 - p)) or to the silence state
  (log p);
- ``L_disambig``: the same over ``lexicon_disambig`` (units followed by ``#1``...) plus a
  ``#0:#0`` self-loop on every state that has an arc with a word label (the loop state), so
  that the back-off arcs of G (input ``#0``) pass through L o G, as Kaldi's
  ``fstaddselfloops`` does;
- the loop state is final (k2: an arc with label -1 to a final state of its own).

    fst = lexicon_fst(entries, token_ids, word_ids, sil_unit=None, sil_prob=0.5)
    write_openfst(fst, "L.fst"); write_k2_dict(fst, "L.pt"); Path("L.txt").write_text(k2_text(fst))
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError

__all__ = ["Arc", "LexiconFst", "lexicon_fst", "k2_text", "write_k2_dict", "write_openfst",
           "to_openfst"]


@dataclass(frozen=True)
class Arc:
    src: int
    dst: int
    label: int  # unit id (0: epsilon)
    aux: int  # word id (0: epsilon)
    score: float  # log-probability


@dataclass(frozen=True)
class LexiconFst:
    arcs: tuple[Arc, ...]
    final: int  # the loop state, final with score 0
    num_states: int


def lexicon_fst(entries: Sequence[tuple[str, Sequence[str]]], token_ids: dict[str, int],
                word_ids: dict[str, int], sil_unit: str | None = None, sil_prob: float = 0.5,
                disambig_loop: bool = False) -> LexiconFst:
    """L (or L_disambig with ``disambig_loop``) of ``entries`` (word, units); see the module
    notes. ``token_ids``/``word_ids``: tokens.txt / words.txt of the lang directory."""
    def tid(u: str) -> int:
        if u not in token_ids:
            raise ConfigError(f"lexicon unit {u!r} is not in tokens.txt")
        return token_ids[u]

    arcs: list[Arc] = []
    with_sil = sil_unit is not None and sil_prob > 0
    if with_sil:
        if not 0 < sil_prob < 1:
            raise ConfigError(f"sil_prob must be in (0, 1), got {sil_prob}")
        sil_score, no_sil = math.log(sil_prob), math.log(1 - sil_prob)
        start, loop, sil_state, nxt = 0, 1, 2, 3
        arcs += [Arc(start, loop, 0, 0, no_sil), Arc(start, sil_state, 0, 0, sil_score),
                 Arc(sil_state, loop, tid(sil_unit), 0, 0.0)]
    else:
        loop, nxt = 0, 1
    for word, units in entries:
        if word not in word_ids:
            raise ConfigError(f"lexicon word {word!r} is not in words.txt")
        ids = [tid(u) for u in units]
        if not ids:
            raise ConfigError(f"lexicon word {word!r} has no units")
        cur = loop
        for i, t in enumerate(ids[:-1]):
            arcs.append(Arc(cur, nxt, t, word_ids[word] if i == 0 else 0, 0.0))
            cur, nxt = nxt, nxt + 1
        w = word_ids[word] if len(ids) == 1 else 0
        if with_sil:
            arcs += [Arc(cur, loop, ids[-1], w, no_sil), Arc(cur, sil_state, ids[-1], w, sil_score)]
        else:
            arcs.append(Arc(cur, loop, ids[-1], w, 0.0))
    if disambig_loop:
        d_tok, d_word = tid("#0"), word_ids.get("#0")
        if d_word is None:
            raise ConfigError("words.txt lacks #0")
        with_words = sorted({a.src for a in arcs if a.aux != 0})
        arcs += [Arc(s, s, d_tok, d_word, 0.0) for s in with_words]
    arcs.sort(key=lambda a: a.src)  # stable: k2 wants arcs grouped by source state
    return LexiconFst(tuple(arcs), final=loop, num_states=nxt)


def k2_text(fst: LexiconFst) -> str:
    """k2's text form of a transducer: ``src dst label aux_label score`` lines, the final
    arc (label -1) to a final state numbered last, then that state alone."""
    final = fst.num_states
    lines = [f"{a.src} {a.dst} {a.label} {a.aux} {a.score:.8g}" for a in fst.arcs]
    lines.append(f"{fst.final} {final} -1 -1 0")
    lines.append(str(final))
    return "\n".join(_sorted_by_src(lines[:-1])) + "\n" + lines[-1] + "\n"


def _sorted_by_src(lines: list[str]) -> list[str]:
    return sorted(lines, key=lambda line: int(line.split()[0]))


def _k2_rows(fst: LexiconFst) -> tuple[list[list[int]], list[int]]:
    """(arcs [src, dst, label, score bits], aux_labels) in k2's order."""
    arcs = [(a.src, a.dst, a.label, a.aux, a.score) for a in fst.arcs]
    arcs.append((fst.final, fst.num_states, -1, -1, 0.0))
    arcs.sort(key=lambda a: a[0])
    rows = [[s, d, lab, struct.unpack("<i", struct.pack("<f", sc))[0]] for s, d, lab, _, sc in arcs]
    return rows, [a[3] for a in arcs]


def write_k2_dict(fst: LexiconFst, path: str | Path) -> None:
    """``torch.save`` of the dict ``k2.Fsa.as_dict()`` gives for this transducer: ``arcs``
    int32 (num_arcs, 4) = src, dst, label, score (float32 bits), ``aux_labels`` int32
    (num_arcs,), ``labels_version`` 0. Needs torch (not k2)."""
    try:
        import torch
    except ImportError as e:
        raise ConfigError("writing L.pt needs torch (python3 -m pip install -e '.[torch]' "
                          "in the streamdec folder)") from e
    rows, aux = _k2_rows(fst)
    torch.save({"arcs": torch.tensor(rows, dtype=torch.int32),
                "aux_labels": torch.tensor(aux, dtype=torch.int32), "labels_version": 0},
               str(path))


def to_openfst(fst: LexiconFst):
    """A kaldifst ``StdVectorFst`` (tropical weights = -log-probability)."""
    import kaldifst

    out = kaldifst.StdVectorFst()
    for _ in range(fst.num_states):
        out.add_state()
    out.start = 0
    for a in fst.arcs:
        out.add_arc(a.src, kaldifst.StdArc(a.label, a.aux, -a.score, a.dst))
    out.set_final(fst.final, 0.0)
    return out


def write_openfst(fst: LexiconFst, path: str | Path) -> None:
    """``L.fst`` in OpenFst's binary format (needs kaldifst)."""
    try:
        import kaldifst  # noqa: F401
    except ImportError as e:
        raise ConfigError("writing L.fst needs kaldifst (python3 -m pip install -e '.[words]' "
                          "in the streamdec folder)") from e
    to_openfst(fst).write(str(path))

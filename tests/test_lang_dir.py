"""``streamdec lang``: disambiguation symbols, the L / L_disambig structure, determinisation
and composition with a small grammar (kaldifst), and the round trip through every written
form (OpenFst, k2 text, k2 dict). ``test_k2_loads_and_composes`` proves the files with the
real k2 library in a Python 3.9 virtualenv (see ``k2_env``)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest

from streamdec.cli.main import main
from streamdec.lang.lexicon_fst import lexicon_fst
from streamdec.lang.prepare import add_disambig, write_lang_dir
from streamdec.tokens import SymbolTable

B = "\u2581"
SYMS = SymbolTable({0: "<blk>", 1: B, 2: "A", 3: "B", 4: "C", 5: "D", 6: "SIL"})
# A is a prefix of AB; BAD and BAD2 are homophones (same units); CAB stands alone
LEXICON = [("A", (B, "A")), ("AB", (B, "A", "B")), ("BAD", (B, "B", "A", "D")),
           ("BAD2", (B, "B", "A", "D")), ("CAB", (B, "C", "A", "B"))]


def test_prefixes_and_homophones_get_disambiguation_symbols():
    out, highest = add_disambig(LEXICON)
    assert out == [("A", (B, "A", "#1")), ("AB", (B, "A", "B")),
                   ("BAD", (B, "B", "A", "D", "#1")), ("BAD2", (B, "B", "A", "D", "#2")),
                   ("CAB", (B, "C", "A", "B"))]
    assert highest == 2


@pytest.fixture(scope="module")
def lang(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lang")
    write_lang_dir(folder, LEXICON, SYMS)
    return folder


def table(path: Path) -> dict[str, int]:
    return {line.split()[0]: int(line.split()[1]) for line in path.read_text().splitlines()}


def test_lang_dir_files(lang):
    tokens, words = table(lang / "tokens.txt"), table(lang / "words.txt")
    assert tokens == {"<blk>": 0, B: 1, "A": 2, "B": 3, "C": 4, "D": 5, "SIL": 6,
                      "#0": 7, "#1": 8, "#2": 9}
    assert list(words) == ["<eps>", "<unk>", "A", "AB", "BAD", "BAD2", "CAB", "#0", "<s>",
                           "</s>"]
    assert list(words.values()) == list(range(10))
    assert (lang / "lexicon_disambig.txt").read_text().splitlines()[0] == f"A {B} A #1"
    for name in ("L.fst", "L_disambig.fst", "L.pt", "L_disambig.pt", "L.txt", "L_disambig.txt"):
        assert (lang / name).is_file(), name


def read_k2_text(text: str):
    """(arcs as (src, dst, label, aux, score), final state) of k2's text form."""
    lines = text.strip().splitlines()
    arcs = [(int(a), int(b), int(c), int(d), float(e))
            for a, b, c, d, e in (line.split() for line in lines[:-1])]
    return arcs, int(lines[-1])


def test_l_structure_and_the_disambig_self_loop(lang):
    words, tokens = table(lang / "words.txt"), table(lang / "tokens.txt")
    plain, final = read_k2_text((lang / "L.txt").read_text())
    loop_arcs = [a for a in plain if a[0] == 0]
    # every word leaves the loop state with its word label on its first arc
    assert sorted(a[3] for a in loop_arcs if a[2] != -1) == sorted(words[w] for w, _ in LEXICON)
    assert (0, final, -1, -1, 0.0) in plain
    assert [a[0] for a in plain] == sorted(a[0] for a in plain)  # grouped by source state
    dis, _ = read_k2_text((lang / "L_disambig.txt").read_text())
    loops = [a for a in dis if a[0] == a[1]]
    assert loops == [(0, 0, tokens["#0"], words["#0"], 0.0)]
    assert any(a[2] == tokens["#2"] for a in dis)


def test_optional_silence_structure():
    token_ids = {**SYMS.symbol_to_id, "#0": 7}
    word_ids = {"<eps>": 0, "A": 1, "#0": 2}
    fst = lexicon_fst([("A", (B, "A"))], token_ids, word_ids, sil_unit="SIL", sil_prob=0.25)
    arcs = {(a.src, a.dst, a.label, a.aux): a.score for a in fst.arcs}
    import math

    assert arcs[(0, 1, 0, 0)] == pytest.approx(math.log(0.75))  # start -> loop, no silence
    assert arcs[(0, 2, 0, 0)] == pytest.approx(math.log(0.25))  # start -> silence state
    assert arcs[(2, 1, 6, 0)] == 0.0  # the silence unit back to the loop state
    assert arcs[(3, 1, 2, 0)] == pytest.approx(math.log(0.75))  # word end, no silence
    assert arcs[(3, 2, 2, 0)] == pytest.approx(math.log(0.25))  # word end, then silence
    assert fst.final == 1


def paths(fst, max_len: int = 12) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input labels, output labels) of every accepted path (epsilons dropped) of an
    acyclic-enough kaldifst FST, paths of at most ``max_len`` arcs."""
    import kaldifst

    out = set()
    stack = [(fst.start, (), (), 0)]
    while stack:
        s, ins, outs, n = stack.pop()
        if fst.final(s).value != float("inf"):
            out.add((ins, outs))
        if n == max_len:
            continue
        for arc in kaldifst.ArcIterator(fst, s):
            stack.append((arc.nextstate, ins + ((arc.ilabel,) if arc.ilabel else ()),
                          outs + ((arc.olabel,) if arc.olabel else ()), n + 1))
    return out


def small_grammar(word_ids: dict[str, int]):
    """G accepting exactly 'A AB' and 'BAD2', with a #0 back-off style arc on the way."""
    import kaldifst

    g = kaldifst.StdVectorFst()
    for _ in range(5):
        g.add_state()
    g.start = 0
    for src, dst, w in ((0, 1, "A"), (1, 2, "#0"), (2, 3, "AB"), (0, 4, "BAD2")):
        g.add_arc(src, kaldifst.StdArc(word_ids[w], word_ids[w], 0.0, dst))
    g.set_final(3, 0.0)
    g.set_final(4, 0.0)
    return g


def test_l_disambig_determinizes_and_composed_with_g_accepts_exactly_its_sentences(lang):
    import kaldifst

    words, tokens = table(lang / "words.txt"), table(lang / "tokens.txt")
    lfst = kaldifst.StdVectorFst.read(str(lang / "L_disambig.fst"))
    det = kaldifst.determinize(lfst)
    for s in range(det.num_states):  # deterministic on the input side
        labels = [arc.ilabel for arc in kaldifst.ArcIterator(det, s)]
        assert len(labels) == len(set(labels))
    kaldifst.arcsort(lfst, sort_type="olabel")
    lg = kaldifst.compose(lfst, small_grammar(words))
    got = paths(lg)
    t = tokens
    want = {((t[B], t["A"], t["#1"], t["#0"], t[B], t["A"], t["B"]),
             (words["A"], words["#0"], words["AB"])),
            ((t[B], t["B"], t["A"], t["D"], t["#2"]), (words["BAD2"],))}
    assert got == want


def test_every_written_form_holds_the_same_arcs(lang):
    import kaldifst
    import torch

    for name in ("L", "L_disambig"):
        arcs, final = read_k2_text((lang / f"{name}.txt").read_text())
        d = torch.load(str(lang / f"{name}.pt"))
        assert set(d) == {"arcs", "aux_labels", "labels_version"}
        assert d["arcs"].dtype == torch.int32 and d["aux_labels"].dtype == torch.int32
        rows = d["arcs"].tolist()
        scores = [struct.unpack("<f", struct.pack("<i", r[3]))[0] for r in rows]
        assert [(r[0], r[1], r[2], aux, sc) for r, aux, sc in
                zip(rows, d["aux_labels"].tolist(), scores)] == arcs
        fst = kaldifst.StdVectorFst.read(str(lang / f"{name}.fst"))
        ofst = {(s, arc.nextstate, arc.ilabel, arc.olabel, -arc.weight.value)
                for s in range(fst.num_states) for arc in kaldifst.ArcIterator(fst, s)}
        assert ofst == {a for a in arcs if a[2] != -1}
        loop = next(a[0] for a in arcs if a[2] == -1)
        assert fst.final(loop).value == 0.0 and final == fst.num_states


def test_lang_command_from_a_word_list(tmp_path):
    (tmp_path / "words.txt").write_text("hello\nworld\nhell\nnaïve\n", encoding="utf-8")
    assert main(["lang", str(tmp_path / "lang"), "--words", str(tmp_path / "words.txt")]) == 0
    lines = (tmp_path / "lang" / "lexicon.txt").read_text(encoding="utf-8").splitlines()
    assert lines == [f"HELLO {B} H E L L O", f"WORLD {B} W O R L D", f"HELL {B} H E L L"]
    assert (tmp_path / "lang" / "lexicon_disambig.txt").read_text().splitlines()[2] == \
        f"HELL {B} H E L L #1"
    assert main(["lang", str(tmp_path / "x"), "--lexicon", str(tmp_path / "missing")]) == 2


# -- the real k2 ---------------------------------------------------------------------------

K2_SCRIPT = r"""
import json, sys
import torch, k2
lang = sys.argv[1]
res = {}
for name in ("L", "L_disambig"):
    f = k2.Fsa.from_dict(torch.load(f"{lang}/{name}.pt"))
    t = k2.Fsa.from_str(open(f"{lang}/{name}.txt").read(), acceptor=False)
    res[name] = {"same_arcs": torch.equal(f.arcs.values(), t.arcs.values()),
                 "same_aux": torch.equal(f.aux_labels, t.aux_labels),
                 "same_scores": torch.equal(f.scores, t.scores),
                 "num_arcs": f.num_arcs}
L = k2.arc_sort(k2.Fsa.from_dict(torch.load(f"{lang}/L_disambig.pt")))
det = k2.determinize(L)
res["determinized_arcs"] = det.num_arcs
words = {l.split()[0]: int(l.split()[1]) for l in open(f"{lang}/words.txt")}
G = k2.arc_sort(k2.Fsa.from_str(
    f"0 1 {words['A']} 0\n0 3 {words['BAD2']} 0\n1 2 {words['#0']} 0\n2 3 {words['AB']} 0\n"
    f"3 4 -1 0\n4", acceptor=True))
LG = k2.connect(k2.compose(L, G))
arcs = LG.arcs.values()[:, :3].tolist()
aux = LG.aux_labels.tolist()
final = LG.shape[0] - 1
out = set()
stack = [(0, (), ())]
while stack:
    s, ins, outs = stack.pop()
    if s == final:
        out.add((ins, outs))
        continue
    for (src, dst, lab), a in zip(arcs, aux):
        if src == s and len(ins) < 12:
            stack.append((dst, ins + ((lab,) if lab > 0 else ()), outs + ((a,) if a > 0 else ())))
res["paths"] = sorted([list(i), list(o)] for i, o in out)
print(json.dumps(res))
"""


@pytest.mark.slow
def test_k2_loads_and_composes(lang, tmp_path):
    from k2_env import k2_python

    script = tmp_path / "prove.py"
    script.write_text(K2_SCRIPT)
    out = subprocess.run([str(k2_python()), str(script), str(lang)], check=True,
                         capture_output=True, text=True, timeout=600)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for name in ("L", "L_disambig"):
        assert res[name]["same_arcs"] and res[name]["same_aux"] and res[name]["same_scores"]
    assert res["determinized_arcs"] > 0
    words, t = table(lang / "words.txt"), table(lang / "tokens.txt")
    want = sorted([[[t[B], t["A"], t["#1"], t["#0"], t[B], t["A"], t["B"]],
                    [words["A"], words["#0"], words["AB"]]],
                   [[t[B], t["B"], t["A"], t["D"], t["#2"]], [words["BAD2"]]]])
    assert res["paths"] == want

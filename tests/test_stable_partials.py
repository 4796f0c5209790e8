"""Stable partials on the built-in model and its espeak dev set: what a partial calls
stable (``Result.stable_tokens`` / ``stable_text``) never changes afterwards.

Property, per search and per segment of each utterance: every later partial and the
segment's final start with every earlier partial's stable tokens and stable text; the
stable part never shrinks; a final is stable whole. And the rule per search: greedy search
calls every emitted token stable (it only appends); beam searches call stable the prefix
all live hypotheses share, so some of their partials hold tokens not yet stable.

These tests need the built-in model; they fail (never skip) when it is missing. The dev
audio is synthesised from the committed references when missing (bench/common/devset.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decode_utils import decode_in_pieces  # noqa: E402
from bench.common.devset import dev_set  # noqa: E402
from streamdec import Recognizer, RecognizerConfig  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402

NUM_UTTS = 12  # dev utterances per search
PIECE = 1600  # samples per accept_waveform (0.1 s at 16 kHz)

SEARCHES = {  # id -> config: every search, and one with a lexicon + word LM
    "greedy": SearchConfig(method="greedy"),
    "modified_beam": SearchConfig(method="modified_beam"),
    "alsd": SearchConfig(method="alsd"),
    "tsd": SearchConfig(method="tsd"),
    "nsc": SearchConfig(method="nsc"),
    "beam": SearchConfig(method="beam"),
    "modified_beam+lang": SearchConfig(method="modified_beam", lang_dir="lang"),
}


@pytest.fixture(scope="module")
def rec() -> Recognizer:
    return Recognizer(RecognizerConfig())


@pytest.fixture(scope="module")
def dev():
    return dev_set("espeak", NUM_UTTS)


def check_segment(events) -> tuple[int, int, int, int]:
    """Assert the property on one segment's events (partials then its final); returns
    (partials, those with an unstable part, with unstable tokens, with stable text)."""
    *partials, final = events
    assert final.is_final and all(not p.is_final for p in partials)
    assert final.stable_tokens == len(final.token_ids)
    assert final.stable_text == final.text
    unstable = tokens = stable = 0
    for i, p in enumerate(partials):
        assert 0 <= p.stable_tokens <= len(p.token_ids)
        assert p.text.startswith(p.stable_text)
        unstable += p.stable_chars < len(p.text)
        tokens += p.stable_tokens < len(p.token_ids)
        stable += p.stable_chars > 0
        for later in partials[i + 1:] + [final]:
            assert later.token_ids[:p.stable_tokens] == p.token_ids[:p.stable_tokens]
            assert later.text.startswith(p.stable_text), (p.stable_text, later.text)
            assert later.stable_tokens >= p.stable_tokens
            assert later.stable_chars >= p.stable_chars
    return len(partials), unstable, tokens, stable


@pytest.mark.parametrize("name", list(SEARCHES))
def test_stable_prefix_never_changes(rec, dev, name):
    search = SEARCHES[name]
    counts = [0, 0, 0, 0]  # partials, with unstable text, unstable tokens, stable text
    segments = 0
    for u in dev:
        events = decode_in_pieces(rec, u.samples, PIECE, search=search)
        by_segment: dict[int, list] = {}
        for e in events:
            by_segment.setdefault(e.segment, []).append(e)
        for seg in by_segment.values():
            # a segment closed empty has no final here: its partials (if any) are all empty
            if not seg[-1].is_final:
                assert all(not e.text for e in seg)
                continue
            counts = [a + b for a, b in zip(counts, check_segment(seg))]
            segments += 1
    partials, unstable, unstable_tokens, stable = counts
    assert segments >= NUM_UTTS and partials >= 3 * NUM_UTTS
    # the property was tested on partials with a stable and an unstable part
    assert unstable > 0 and stable > 0
    if name == "greedy":  # every emitted token is stable: only the open last word is not
        assert unstable_tokens == 0
    else:  # the live hypotheses disagree on some tail
        assert unstable_tokens > 0


# -- the stability benchmark (bench/accuracy/partial_stability.py) ----------------------------------------
def test_stability_counts_on_a_made_up_segment():
    from bench.accuracy.partial_stability import segment_counts, stable_lags

    # "HELLO WAR" rewritten to "HELLO WORLD": 2 characters ("AR") not kept; the steady part
    # "HELLO" (5) kept; the final keeps everything
    shown = [("HEL", 0, 0.32), ("HELLO WAR", 5, 0.64), ("HELLO WORLD", 5, 0.96),
             ("HELLO WORLD", 11, 1.0)]
    assert segment_counts([(t, s) for t, s, _ in shown]) == {
        "changed": 2, "steady_changed": 0, "chars": 3 + 9 + 11, "steady": 10}
    lags = stable_lags(shown)
    # H, E, L settled at 0.32 and stable at 0.64; L, O settled and stable at 0.64; " W" at
    # 0.64, "ORLD" at 0.96, all six stable at the final (1.0)
    assert lags == pytest.approx([0.32] * 3 + [0.0] * 2 + [0.36] * 2 + [0.04] * 4)


def test_stability_benchmark_smoke(tmp_path):
    import json
    import subprocess

    out = tmp_path / "report.json"
    bench = Path(__file__).resolve().parents[1] / "bench" / "accuracy" / "partial_stability.py"
    run = subprocess.run([sys.executable, str(bench), "--smoke", "--search", "greedy",
                          "--search", "modified_beam", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert [r["search"] for r in report["results"]] == ["greedy", "modified_beam"]
    for r in report["results"]:
        assert r["utterances"] == 2 and r["partials"] > 0
        assert r["steady_changed_chars_per_s"] == 0.0
        assert 0 < r["steady_share"] <= 1
    assert report["results"][0]["changed_chars_per_s"] == 0.0  # greedy only appends

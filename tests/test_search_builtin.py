"""Searches on the built-in model (streamdec/assets/synthetic-en) and its espeak dev set:
modified beam search, ALSD and TSD are at least as accurate as greedy search (the default,
one symbol per frame), and hotwords fix misrecognised phrases without disturbing
utterances that do not contain them.

The built-in model is fine-tuned with the mean of the standard and the one-symbol-per-frame
transducer loss, so the searches that let a frame emit several symbols (ALSD, TSD) fit it
as well as those that emit one (see MODEL.md).

These tests need the built-in model; they fail (never skip) when it is missing
(``STREAMDEC_TEST_MODEL_DIR`` points them at another model folder, e.g. a checkpoint being
trained). The dev audio is synthesised from the committed references when the recipe's data
folder lacks it (bench/common/devset.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common.devset import dev_set, error_rates, normalize, transcribe  # noqa: E402
from streamdec import ModelConfig, Recognizer, RecognizerConfig  # noqa: E402
from streamdec.search import SearchConfig  # noqa: E402

NUM_UTTS = 200  # dev utterances scored: the whole espeak dev set
MIN_FIXED = 2  # of the 8 misrecognised words biased one at a time
# biasing may cost at most 1 WER point on unrelated utterances (measured with 8 phrases:
# +0.85 modified beam with the 2026-12-01 model; the 2026-11-30 model stayed within 0.5)
WER_TOLERANCE = 0.01


@pytest.fixture(scope="module")
def rec() -> Recognizer:
    model_dir = os.environ.get("STREAMDEC_TEST_MODEL_DIR")  # None: the built-in model
    return Recognizer(RecognizerConfig(model=ModelConfig(model_dir=model_dir)))


@pytest.fixture(scope="module")
def dev():
    return dev_set("espeak", NUM_UTTS)


def refs_of(utts):
    return {u.utt: u.text for u in utts}


@pytest.fixture(scope="module")
def greedy_wer(rec, dev) -> float:
    return error_rates(refs_of(dev), transcribe(rec, dev, SearchConfig(method="greedy")))["wer"]


@pytest.mark.parametrize("method", ["modified_beam", "alsd", "tsd"])
def test_beam_search_is_not_worse_than_greedy(rec, dev, greedy_wer, method):
    beam_wer = error_rates(refs_of(dev), transcribe(rec, dev, SearchConfig(method=method)))["wer"]
    assert beam_wer <= greedy_wer, f"{method} WER {beam_wer:.4f} > greedy WER {greedy_wer:.4f}"


def misrecognised_words(dev, hyps, count: int) -> list[tuple[object, str]]:
    """(utterance, word): rare words (>= 6 letters, in one reference only, as hotwords
    usually are: names, terms) missing from the unbiased result, one per utterance."""
    seen: dict[str, int] = {}
    for u in dev:
        for w in set(normalize(u.text).split()):
            seen[w] = seen.get(w, 0) + 1
    out = []
    for u in dev:
        hyp = set(normalize(hyps[u.utt]).split())
        missing = [w for w in normalize(u.text).split()
                   if len(w) >= 6 and w.isalpha() and seen[w] == 1 and w not in hyp]
        if missing:
            out.append((u, missing[0]))
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("method", ["modified_beam", "alsd"])
def test_hotwords_fix_misrecognised_phrases_and_leave_the_rest(rec, dev, method):
    search = SearchConfig(method=method)
    plain = transcribe(rec, dev, search)
    cases = misrecognised_words(dev, plain, 8)
    assert cases, "the dev subset should have a misrecognised word to bias"
    fixed = []
    for u, word in cases:
        biased = transcribe(rec, [u], search, hotwords=[word])[u.utt]
        fixed.append(word in normalize(biased).split())
    # measured with the default bonus (1.0 per token): 3 of 8 (modified_beam), 4 of 8 (alsd);
    # the rest stay misspelt by a letter or two, which the beam of 4 does not reach
    assert sum(fixed) >= MIN_FIXED, list(zip([w for _, w in cases], fixed))

    phrases = [w for _, w in cases]
    others = [u for u in dev if not set(phrases) & set(normalize(u.text).split())]
    refs = refs_of(others)
    before = error_rates(refs, {u.utt: plain[u.utt] for u in others})["wer"]
    after = error_rates(refs, transcribe(rec, others, search, hotwords=phrases))["wer"]
    assert after <= before + WER_TOLERANCE, (before, after)

"""Subtitle cues made for reading: line wrapping, cue splitting by characters, lines and
duration at word boundaries, display times, and the SRT / WebVTT text."""

import pytest

from streamdec.files.formats import Cue, cue_times, cues, subtitles, wrap_lines
from streamdec.core.results import Result, Word


def result(words, segment=0, is_final=True, text=None):
    """A final result holding ``words`` ((text, start, end) in seconds)."""
    ws = tuple(Word(t, s, e, 1.0) for t, s, e in words)
    start = ws[0].start if ws else 0.0
    end = ws[-1].end if ws else 0.0
    return Result(text=" ".join(w.text for w in ws) if text is None else text, tokens=(),
                  token_ids=(), timestamps=(), log_probs=(), segment=segment,
                  start_time=start, end_time=end, is_final=is_final, words=ws)


def spaced(texts, first=0.0, step=0.5, length=0.3):
    """Words one every ``step`` seconds, each ``length`` long."""
    return [(t, first + n * step, first + n * step + length) for n, t in enumerate(texts)]


@pytest.mark.parametrize("words, max_chars, max_lines, want", [
    (["a"], 42, 2, ["a"]),
    (["hello", "world"], 42, 2, ["hello world"]),
    (["x" * 20, "y" * 21], 42, 2, ["x" * 20 + " " + "y" * 21]),  # exactly 42: one line
    (["x" * 20, "y" * 22], 42, 2, ["x" * 20, "y" * 22]),  # 43: two lines
    (["aaa", "bbb", "ccc", "ddd"], 10, 2, ["aaa bbb", "ccc ddd"]),
    # filling the first line would give 10 + 6; the even break gives 7 + 9
    (["aaaa", "bb", "cc", "dddddd"], 10, 2, ["aaaa bb", "cc dddddd"]),
    (["aaa", "bbb", "ccc", "ddd", "eee", "fff"], 7, 2, None),  # needs three lines
    (["aaa", "bbb", "ccc", "ddd", "eee", "fff"], 7, 3, ["aaa bbb", "ccc ddd", "eee fff"]),
    (["z" * 50], 42, 2, ["z" * 50]),  # a word longer than a line has a line of its own
    (["z" * 50, "a"], 42, 2, ["z" * 50, "a"]),
])
def test_wrap_lines(words, max_chars, max_lines, want):
    assert wrap_lines(words, max_chars, max_lines) == want


@pytest.mark.parametrize("first_start, last_end, next_start, want", [
    (1.0, 3.0, None, (1.0, 3.4)),  # CUE_TAIL 0.4 after the last word
    (1.0, 1.2, None, (1.0, 2.0)),  # at least MIN_CUE_SECONDS
    (1.0, 3.0, 3.2, (1.0, 3.2)),  # until the next cue starts
    (1.0, 1.2, 1.5, (1.0, 1.5)),
    (0.0, 6.9, None, (0.0, 7.0)),  # at most MAX_CUE_SECONDS
    (0.0, 7.5, None, (0.0, 7.5)),  # but never ending before its last word does
    (1.0, 1.2, 1.0, (1.0, 2.0)),  # a next cue at the same time does not cut it to nothing
])
def test_cue_times(first_start, last_end, next_start, want):
    got = cue_times(Word("a", first_start, first_start + 0.1, 1.0),
                    Word("b", last_end - 0.1, last_end, 1.0), next_start)
    assert got == pytest.approx(want, abs=1e-9)


W8 = [f"word{n:04d}" for n in range(10)]  # ten 8-character words: four fit on a 42-char line

CUE_CASES = {
    "one short segment": (
        [result(spaced(["hello", "world"], first=0.5))],
        [Cue(0.5, 1.7, ("hello world",))]),
    "characters: at most two lines of 42": (
        [result(spaced(W8))],
        [Cue(0.0, 4.0, (" ".join(W8[:4]), " ".join(W8[4:8]))),
         Cue(4.0, 5.2, (" ".join(W8[8:]),))]),
    "duration: at most 7 s": (
        [result(spaced("a b c d e f g h i j".split(), step=1.0))],
        [Cue(0.0, 6.7, ("a b c d e f g",)), Cue(7.0, 9.7, ("h i j",))]),
    "segments are never merged": (
        [result([("one", 0.0, 0.2)], segment=0), result([("two", 0.5, 0.7)], segment=1)],
        [Cue(0.0, 0.5, ("one",)), Cue(0.5, 1.5, ("two",))]),
    "partials and empty finals give no cue": (
        [result([("draft", 0.0, 0.3)], is_final=False), result([], text=""),
         result([("kept", 2.0, 2.5)])],
        [Cue(2.0, 3.0, ("kept",))]),
    "a result without word times: words spread over its span": (
        [Result(text="ab cd", tokens=(), token_ids=(), timestamps=(), log_probs=(), segment=0,
                start_time=1.0, end_time=3.0, is_final=True)],
        [Cue(1.0, 3.4, ("ab cd",))]),
}


@pytest.mark.parametrize("finals, want", list(CUE_CASES.values()), ids=list(CUE_CASES))
def test_cues(finals, want):
    got = cues(finals)
    assert [c.lines for c in got] == [c.lines for c in want]
    times = [t for c in got for t in (c.start, c.end)]
    assert times == pytest.approx([t for c in want for t in (c.start, c.end)], abs=1e-9)


def test_every_cue_is_readable_on_a_long_segment():
    words = spaced([f"w{n}" * (1 + n % 7) for n in range(300)], step=0.37, length=0.3)
    got = cues([result(words)])
    assert " ".join(" ".join(c.lines) for c in got) == " ".join(t for t, _, _ in words)
    for c in got:
        assert 1 <= len(c.lines) <= 2 and all(len(line) <= 42 for line in c.lines)
        assert c.end - c.start <= 7.0 + 1e-9
    for a, b in zip(got, got[1:]):
        assert a.end <= b.start + 1e-9


TWO = [result(spaced(["hello", "world"], first=0.5)), result([("again", 3.25, 3.5)], segment=1)]


@pytest.mark.parametrize("finals, fmt, want", [
    (TWO, "srt", "1\n00:00:00,500 --> 00:00:01,700\nhello world\n\n"
                 "2\n00:00:03,250 --> 00:00:04,250\nagain\n\n"),
    (TWO, "vtt", "WEBVTT\n\n00:00:00.500 --> 00:00:01.700\nhello world\n\n"
                 "00:00:03.250 --> 00:00:04.250\nagain\n\n"),
    ([result(spaced(W8[:6], first=3661.0))], "srt",
     "1\n01:01:01,000 --> 01:01:04,200\nword0000 word0001 word0002\n"
     "word0003 word0004 word0005\n\n"),
    ([], "srt", ""),
    ([], "vtt", "WEBVTT\n\n"),
])
def test_subtitles_text(finals, fmt, want):
    assert subtitles(finals, fmt) == want


def test_jsonl_event_says_how_much_of_a_partial_is_stable():
    import dataclasses
    import json

    from streamdec.files.formats import event_json

    partial = dataclasses.replace(result(spaced(["HELLO", "WOR"]), is_final=False),
                                  stable_tokens=6, stable_chars=5)
    line = json.loads(event_json("a.wav", partial))
    assert (line["type"], line["text"], line["stable"]) == ("partial", "HELLO WOR", 5)

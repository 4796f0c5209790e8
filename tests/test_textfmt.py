"""Text for people (streamdec.textfmt): inverse text normalisation on the call-center list,
the alignment of written tokens to spoken words, the mapping of word times and
confidences, the shipped punctuation/casing tagger, and the format levels."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from streamdec.errors import ConfigError, ModelLoadError
from streamdec.core.results import Word
from streamdec.textfmt import TEXT_FORMATS, check_text_format, default_formatter, format_words
from streamdec.textfmt.align import align
from streamdec.textfmt.itn import InverseNormalizer
from streamdec.textfmt.punct import PunctCaseTagger

CASES = Path(__file__).resolve().parent / "data" / "itn_cases.tsv"


def itn_cases() -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in CASES.read_text().splitlines()
            if line and not line.startswith("#")]
    return [(spoken, written) for spoken, written in rows]


# what the shipped grammar writes where it differs from the list's written form
DIFFERS = {
    "THE FLIGHT LEAVES AT ELEVEN FORTY FIVE": "the flight leaves at 1145",
    "MY NUMBER IS FIVE FIVE FIVE ONE TWO THREE FOUR": "my number is 5551234",
    "CALL EIGHT HUNDRED FIVE FIVE FIVE ONE TWO ONE TWO": "call 805 551212",
    "THE BALANCE IS ONE THOUSAND TWO HUNDRED DOLLARS": "the balance is $1200",
    "IT IS ONLY FIFTY CENTS": "it is only $0.50",
    "THE TWENTY FIRST OF MARCH WORKS FOR ME": "21 march works for me",
    "I HAVE BEEN WAITING FOR FORTY FIVE MINUTES": "i have been waiting for 45 min",
    "WE SOLD TWELVE THOUSAND FIVE HUNDRED UNITS": "we sold 12500 units",
}


@pytest.fixture(scope="module")
def itn():
    return InverseNormalizer()


def test_the_call_center_list_has_its_43_cases():
    cases = itn_cases()
    assert len(cases) == 43
    assert set(DIFFERS) <= {s for s, _ in cases}


@pytest.mark.parametrize("spoken,written", itn_cases())
def test_itn_call_center_list(itn, spoken, written):
    got = " ".join(t for t, _, _ in itn(spoken.split()))
    assert got == DIFFERS.get(spoken, written)


def test_itn_exact_match_rate_is_35_of_43(itn):
    exact = sum(" ".join(t for t, _, _ in itn(s.split())) == w for s, w in itn_cases())
    assert exact == 35


@pytest.mark.parametrize("spoken,want", [
    ("PLEASE CALL ME BACK AT FIVE THIRTY",
     [("please", 0, 0), ("call", 1, 1), ("me", 2, 2), ("back", 3, 3), ("at", 4, 4),
      ("5:30", 5, 6)]),
    ("TWENTY FIVE PERCENT", [("25%", 0, 2)]),
    ("MY CODE IS A B C ONE TWO", [("my", 0, 0), ("code", 1, 1), ("is", 2, 2), ("ABC12", 3, 7)]),
    ("SPELL IT S M I T H", [("spell", 0, 0), ("it", 1, 1), ("SMITH", 2, 6)]),
    ("MY INITIALS ARE J K", [("my", 0, 0), ("initials", 1, 1), ("are", 2, 2), ("JK", 3, 4)]),
    ("THE TWENTY FIRST OF MARCH WORKS FOR ME",
     [("21", 0, 3), ("march", 4, 4), ("works", 5, 5), ("for", 6, 6), ("me", 7, 7)]),
    ("THE MEETING IS AT TEN AM",
     [("the", 0, 0), ("meeting", 1, 1), ("is", 2, 2), ("at", 3, 3), ("10", 4, 4),
      ("a.m.", 5, 5)]),
])
def test_itn_tokens_carry_their_spoken_spans(itn, spoken, want):
    assert itn(spoken.split()) == want


@pytest.mark.parametrize("spoken,written,spans", [
    ("a b c", "a b c", [(0, 0), (1, 1), (2, 2)]),
    ("at five thirty", "at 5:30", [(0, 0), (1, 2)]),
    ("twenty five percent", "25 %", [(0, 0), (1, 2)]),  # a run of 3 words to 2 tokens
    ("one two three four", "1 2 34", [(0, 0), (1, 1), (2, 3)]),
    ("x one y", "x 1 1 y", [(0, 0), (1, 1), (1, 1), (2, 2)]),  # 1 word, 2 tokens
    ("the twenty first of march", "21 march", [(0, 3), (4, 4)]),  # dropped words join
    ("hello there", "hello", [(0, 1)]),  # a dropped last word joins the token before
    ("hello", "hello %", [(0, 0), (0, 0)]),  # an inserted token takes the word before
])
def test_align(spoken, written, spans):
    assert align(spoken.split(), written.split()) == spans


def test_align_needs_spoken_words_for_written_tokens():
    assert align([], []) == []
    with pytest.raises(ValueError):
        align([], ["x"])


def _words(text: str) -> list[Word]:
    # times as a recogniser makes them: multiples of a 40 ms encoder frame, rounded to 1e-6
    return [Word(w, round(0.24 + 0.52 * n, 6), round(0.24 + 0.52 * n + 0.44, 6),
                 [0.9, 0.5, 0.8, 0.64][n % 4]) for n, w in enumerate(text.split())]


class FixedTagger:
    """Tags as given: one (mark, casing) per word."""

    def __init__(self, tags):
        self.tags = tags

    def __call__(self, words):
        assert len(words) == len(self.tags)
        return self.tags


def test_formatted_words_take_the_span_and_confidence_of_their_spoken_words(itn):
    words = _words("PLEASE CALL ME BACK AT FIVE THIRTY")
    tags = FixedTagger([("", "lower")] * 5 + [("", "lower"), ("?", "lower")])
    out = format_words(words, "full", tags, itn)
    assert out.text == "Please call me back at 5:30?"
    assert [w.text for w in out.words] == ["Please", "call", "me", "back", "at", "5:30?"]
    for formatted, spoken in zip(out.words[:5], words[:5]):
        assert formatted.start == spoken.start and formatted.end == spoken.end
        assert formatted.conf == spoken.conf
    last = out.words[-1]
    assert (last.start, last.end) == (words[5].start, words[6].end)  # exact: copied
    assert last.conf == pytest.approx(math.sqrt(words[5].conf * words[6].conf), abs=1e-6)


def test_casing_from_the_first_word_mark_from_the_last_and_the_closing_rules(itn):
    words = _words("MY CODE IS A B C ONE TWO THANK YOU")
    tags = FixedTagger([("", "lower"), ("", "lower"), ("", "lower"), ("", "lower"),
                        ("", "lower"), ("", "lower"), ("", "lower"), (".", "lower"),
                        ("", "lower"), (",", "lower")])
    out = format_words(words, "full", tags, itn)
    # a capital at the start and after "."; a final "," becomes "."
    assert out.text == "My code is ABC12. Thank you."
    assert (out.words[3].start, out.words[3].end) == (words[3].start, words[7].end)


def test_punct_level_keeps_spoken_words_one_for_one(itn):
    words = _words("I LIVE ON MAIN STREET")
    tags = FixedTagger([("", "cap"), ("", "lower"), ("", "lower"), ("", "cap"),
                        ("", "cap")])
    out = format_words(words, "punct", tags)
    assert out.text == "I live on Main Street."
    assert [(w.start, w.end, w.conf) for w in out.words] == \
        [(w.start, w.end, w.conf) for w in words]


def test_raw_level_is_the_words_unchanged():
    words = _words("AT FIVE THIRTY")
    out = format_words(words, "raw")
    assert out.text == "AT FIVE THIRTY" and out.words == tuple(words)


@pytest.mark.parametrize("bad", ["", "RAW", "formatted", None, 1])
def test_bad_text_format_is_rejected(bad):
    with pytest.raises(ConfigError, match="text_format must be one of raw, punct, full"):
        check_text_format(bad)
    with pytest.raises(ConfigError):
        format_words(_words("HI"), bad)


def test_text_formats():
    assert TEXT_FORMATS == ("raw", "punct", "full")


# -- the shipped tagger --------------------------------------------------------------------

@pytest.fixture(scope="module")
def tagger():
    return PunctCaseTagger()


def test_shipped_tagger_is_small_and_declares_its_labels(tagger):
    onnx = Path(__file__).resolve().parents[1] / "streamdec" / "assets" / "punct-case"
    assert (onnx / "tagger.onnx").stat().st_size < 5 * 2 ** 20
    assert tagger.tag([]) == []
    assert len(tagger.tag(["HELLO", "WORLD"])) == 2


def test_tagger_directory_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="vocabulary not found"):
        PunctCaseTagger(tmp_path)
    (tmp_path / "vocab.txt").write_text("HELLO\n")
    with pytest.raises(ModelLoadError, match="model file not found"):
        PunctCaseTagger(tmp_path)
    (tmp_path / "tagger.onnx").write_bytes(b"not onnx")
    with pytest.raises(ModelLoadError, match="not a loadable ONNX model"):
        PunctCaseTagger(tmp_path)


def test_itn_fst_directory_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="FSTs missing"):
        InverseNormalizer(tmp_path)


def test_shipped_fsts_are_what_the_installed_grammar_builds(itn, tmp_path):
    """The FSTs in assets/itn/ rewrite the list as a fresh build of the installed
    wetextprocessing grammar does (a new release that changes them fails here)."""
    from importlib.metadata import version

    from streamdec.textfmt.itn import WETEXT_VERSION, build_fsts

    assert version("wetextprocessing") == WETEXT_VERSION
    build_fsts(tmp_path)
    fresh = InverseNormalizer(tmp_path)
    for spoken, _ in itn_cases():
        assert fresh(spoken.split()) == itn(spoken.split()), spoken


# held-out sentences of recipes/punct-case (never trained on) and what the shipped tagger
# makes of them: exact for this model file (a new model changes them, on purpose)
HELD_OUT = [
    ("A BUG IN THE HAND IS BETTER THAN ONE AS YET UNDETECTED",
     "A bug in the hand is better than one as yet undetected."),
    ("THE MAN SMILED I AM STEALING IDEAS HE SAID",
     "The man smiled I am stealing ideas, he said."),
    ("A BABY IS GOD'S OPINION THAT THE WORLD SHOULD GO ON",
     "A baby is God's opinion that the world should go on."),
    ("COULD YOU SPELL YOUR LAST NAME PLEASE", "Could you spell your last name, please?"),
    ("OKAY THANK YOU SO MUCH HI MY NAME IS WILSON OLIVER",
     "Okay, thank you so much. Hi, my name is Wilson Oliver."),
    ("HELLO ARE YOU STILL THERE YES TUESDAY WORKS FOR ME I'D LIKE TO CHECK MY ACCOUNT BALANCE",
     "Hello? Are you still there? Yes, Tuesday works for me. I'd like to check my account "
     "balance."),
    ("WELL I'M NOT SURE BUT I THINK SO", "Well, I'm not sure, but I think so."),
]


@pytest.mark.parametrize("spoken,want", HELD_OUT)
def test_shipped_tagger_on_held_out_sentences(spoken, want):
    assert default_formatter().format(_words(spoken), "punct").text == want


@pytest.mark.parametrize("spoken,want", [
    ("CAN WE MEET ON SUNDAY AT TWO FIFTEEN", "Can we meet on Sunday at 2:15?"),
    ("PLEASE HOLD WHILE I TRANSFER YOUR CALL COULD YOU SPELL YOUR LAST NAME PLEASE THE "
     "FLIGHT LEAVES AT TWO PM RIGHT",
     "Please hold while I transfer your call. Could you spell your last name, please? The "
     "flight leaves at 2 p.m., right?"),
    ("THE MEETING IS AT TEN AM", "The meeting is at 10 a.m."),
])
def test_full_format_with_the_shipped_models(spoken, want):
    assert default_formatter().format(_words(spoken), "full").text == want

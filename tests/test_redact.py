"""Redaction (``streamdec.textfmt.redact``), a pure function: each case listed.

- card numbers (Luhn-valid, 13-19 digits) read digit by digit in raw words, in groups of
  digits after inverse text normalisation, in one word with dashes, inside a longer run;
- social security numbers: a whole run of 9 digits as issued, spoken or written;
- ordinary numbers are left: a phone number, an amount, a Luhn-failing 16 digits, an
  SSN-shaped run that was never issued (area 000, 666, 9xx), 9 digits inside a longer run;
- patterns: every word a match touches;
- on results: word times and confidences kept, raw and formatted words redacted across by
  time, tokens inside redacted words removed, a redacted partial's stable prefix reset.
"""

from __future__ import annotations

import pytest

from streamdec.core.results import Result, Word
from streamdec.errors import ConfigError
from streamdec.textfmt.redact import (MARKER, RedactionRules, luhn_valid, redact_result,
                                      redact_words, ssn_valid, word_digits)

RULES = RedactionRules()
VISA = "4111111111111111"  # a test card number (passes Luhn)
SPOKEN_VISA = "four one one one one one one one one one one one one one one one"


@pytest.mark.parametrize("text, redacted", [
    (f"my card is {SPOKEN_VISA} thanks", set(range(3, 19))),
    (f"MY CARD IS {SPOKEN_VISA.upper()}", set(range(3, 19))),
    ("card 4111 1111 1111 1111.", {1, 2, 3, 4}),
    ("card 4111-1111-1111-1111 expires", {1}),
    ("number 4111 1111 1111 1111 0526", {1, 2, 3, 4}),  # the expiry date stays
    ("amex 378282246310005 ok", {1}),
    ("ssn is one two three four five six seven eight nine", set(range(2, 11))),
    ("ssn 123-45-6789", {1}),
    ("ssn 123 45 6789 please", {1, 2, 3}),
])
def test_sensitive_numbers_are_found(text, redacted):
    assert redact_words(text.split(), RULES) == redacted


@pytest.mark.parametrize("text", [
    "call me at 555 123 4567",  # 10 digits: a phone number
    "it costs 1999 dollars and 50 cents",
    "card 4111 1111 1111 1112",  # fails Luhn
    "ssn 000-12-3456", "ssn 666 12 3456", "ssn 912-34-5678", "ssn 123-00-4567",
    "reference 1234567890123",  # 13 digits, fails Luhn
    "account one two three four five six seven eight nine zero",  # 10 digits
    "room four oh five on floor two",
])
def test_ordinary_numbers_are_left(text):
    assert redact_words(text.split(), RULES) == set()


def test_checks_and_digits():
    assert [luhn_valid(d) for d in (VISA, "4111111111111112", "79927398713")] == [
        True, False, True]
    assert [ssn_valid(d) for d in ("123456789", "000456789", "123006789", "123450000")] == [
        True, False, False, False]
    assert [word_digits(w) for w in ("Four", "oh", "4111-1111,", "for", "12a", "-")] == [
        "4", "0", "41111111", None, None, None]


def test_rules_switch_off_and_patterns_redact_the_words_they_touch():
    words = f"pin is 4321 and card {SPOKEN_VISA}".split()
    assert redact_words(words, RedactionRules(cards=False, ssn=False)) == set()
    rules = RedactionRules(cards=False, ssn=False, patterns=(r"pin is \d+",))
    assert redact_words(words, rules) == {0, 1, 2}
    assert redact_words("my PIN IS 9".split(), rules) == {1, 2, 3}
    with pytest.raises(ConfigError, match="redaction pattern '\\(': "):
        RedactionRules(patterns=("(",))
    with pytest.raises(ConfigError, match="marker must be one word"):
        RedactionRules(marker="a b")


def words(text: str, start: float = 0.0, step: float = 0.25) -> tuple[Word, ...]:
    return tuple(Word(w, start + n * step, start + (n + 1) * step, 0.5 + n / 100)
                 for n, w in enumerate(text.split()))


def result(text: str, display: str | None = None, is_final: bool = True) -> Result:
    w = words(text)
    tokens = tuple(t for word in text.split() for t in ("▁" + word[:1], word[1:]))
    stamps = tuple(n * 0.125 for n in range(len(tokens)))  # two per word, inside it
    return Result(text=text, tokens=tokens, token_ids=tuple(range(len(tokens))),
                  timestamps=stamps, log_probs=(-0.1,) * len(tokens), segment=3,
                  start_time=0.0, end_time=len(w) * 0.25, is_final=is_final, words=w,
                  display=display, display_words=words(display) if display else (),
                  stable_chars=len(text) if is_final else 4,
                  stable_tokens=len(tokens) if is_final else 2)


def test_a_final_keeps_its_word_times_and_loses_the_numbers_everywhere():
    text = "SSN ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE OK"
    r = redact_result(result(text, "SSN 1 2 3 4 5 6 7 8 9 OK."), RULES)
    assert r.text == "SSN " + " ".join([MARKER] * 9) + " OK"
    assert r.display == "SSN " + " ".join([MARKER] * 9) + " OK."
    assert [(w.start, w.end, w.conf) for w in r.words] == [
        (w.start, w.end, w.conf) for w in words(text)]
    assert r.tokens == ("▁S", "SN", "▁O", "K")  # the number's tokens are gone
    assert r.timestamps == (0.0, 0.125, 2.5, 2.625)
    assert (r.stable_chars, r.stable_tokens) == (len(r.text), 4)


def test_a_number_only_the_formatted_text_shows_is_redacted_in_the_raw_words_by_time():
    raw = "CARD FORTY ONE ELEVEN ELEVEN ELEVEN ELEVEN ELEVEN ELEVEN ELEVEN OK"
    shown = "Card 41 11 11 11 11 11 11 11 OK."  # "41" spans two raw words' times
    spans = [(0.0, 0.25), (0.25, 0.75)] + [(0.5 + n * 0.25, 0.75 + n * 0.25)
                                           for n in range(1, 9)]
    display_words = tuple(Word(w, a, b, 0.9) for w, (a, b) in zip(shown.split(), spans))
    from dataclasses import replace
    r = redact_result(replace(result(raw), display=shown, display_words=display_words),
                      RULES)
    assert r.display == "Card " + " ".join([MARKER] * 8) + " OK."
    assert r.text == "CARD " + " ".join([MARKER] * 9) + " OK"


def test_nothing_to_redact_gives_the_same_result_and_a_partial_restarts_its_prefix():
    plain = result("HELLO THERE")
    assert redact_result(plain, RULES) is plain
    partial = redact_result(result("MY SSN ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE",
                                   is_final=False), RULES)
    assert partial.text == "MY SSN " + " ".join([MARKER] * 9)
    assert (partial.stable_chars, partial.stable_tokens) == (0, 0)


@pytest.mark.parametrize("text, redacted", [
    ("CARD FIVE FIVE FIVE FIVE FIVE FIVE FIVE FIVE FIVE FIVE FIVE FIVE FOR FOUR FOUR FOUR",
     set(range(1, 17))),  # "FOR": a four misheard, between two number words
    ("card 42424242 for 242 for 242.", {1, 2, 3, 4, 5}),
])
def test_a_digit_misheard_as_a_word_that_sounds_like_it_counts_between_numbers(text, redacted):
    assert redact_words(text.split(), RULES) == redacted


def test_a_word_that_sounds_like_a_digit_is_left_elsewhere():
    assert redact_words("for two people at four to five".split(), RULES) == set()


def test_a_partial_that_ends_inside_a_long_number_hides_it_until_its_final():
    rules = RedactionRules()
    words = "MY CARD IS FOUR ONE ONE ONE ONE ONE".split()
    assert redact_words(words, rules, partial=True) == set(range(3, 9))
    assert redact_words(words, rules) == set()  # a final: six digits are no card
    assert redact_words(words[:-1], rules, partial=True) == set()  # five digits
    assert redact_words(words + ["ON"], rules, partial=True) == set(range(3, 10))
    assert redact_words(words + ["OK", "SO"], rules, partial=True) == set()  # it ended

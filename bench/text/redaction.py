"""Redaction measured on spoken numbers: payment card numbers and US social security
numbers read aloud, and ordinary numbers (phone numbers, amounts, dates, codes), spoken by
espeak-ng in two voices, decoded by the built-in model, formatted (``full``: punctuation,
casing, inverse text normalisation) and redacted (``streamdec.textfmt.redact``, the cards
and ssn kinds).

Usage: python bench/text/redaction.py [--out bench/results/2026-12-07-redaction/redaction.json]

- recall: of the sensitive numbers read aloud, the share whose transcript, raw and
  formatted, keeps at most 3 of the number's digits after redaction (a card's last four
  may be read back to a caller; more is a leak);
- false redactions: of the utterances with ordinary numbers, the share with any word
  redacted.
Each utterance's texts before and after are in the report, with the version of streamdec.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from streamdec import Recognizer  # noqa: E402
from streamdec.files.transcribe import transcribe_files  # noqa: E402
from streamdec.textfmt import default_formatter  # noqa: E402
from streamdec.textfmt.redact import RedactionRules, redact_result, word_digits  # noqa: E402

VOICES = ("en-us+m3", "en-us+f2")
DIGIT = "zero one two three four five six seven eight nine".split()


def spoken(number: str, groups: tuple[int, ...]) -> str:
    """Digits read one by one, a pause (comma) between groups."""
    out, at = [], 0
    for size in groups:
        out.append(" ".join(DIGIT[int(c)] for c in number[at:at + size]))
        at += size
    return ", ".join(out)


CARDS = [("4111111111111111", (4, 4, 4, 4)), ("5555555555554444", (4, 4, 4, 4)),
         ("4012888888881881", (4, 4, 4, 4)), ("378282246310005", (4, 6, 5)),
         ("6011111111111117", (4, 4, 4, 4)), ("5105105105105100", (4, 4, 4, 4)),
         ("4242424242424242", (4, 4, 4, 4)), ("6011000990139424", (4, 4, 4, 4))]
SSNS = [("123456789", (3, 2, 4)), ("219099999", (3, 2, 4)), ("321549876", (3, 2, 4)),
        ("432105678", (3, 2, 4))]
SENSITIVE = ([(f"my card number is {spoken(n, g)}", n) for n, g in CARDS]
             + [(f"my social security number is {spoken(n, g)}", n) for n, g in SSNS])
ORDINARY = [
    "you can call me at five five five, one two three, four five six seven",
    "the total is one hundred twenty three dollars and forty cents",
    "my order number is eight six four two one three five seven",
    "my zip code is nine four one zero three",
    "i am in room four oh five on the second floor",
    "i was born in nineteen eighty four",
    "it costs two thousand five hundred dollars",
    "my flight number is two one seven",
    "please call extension four four seven one",
    "the account ending in one two three four",
    "we have twelve people and three cars",
    "the meeting is at three thirty on the twenty first",
]


def speak(text: str, voice: str, path: Path) -> None:
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(raw), text], check=True)
    subprocess.run(["sox", "-D", str(raw), "-r", "16000", str(path)], check=True)


def digits_left(text: str, number: str) -> int:
    """How many of ``number``'s digits the text still holds (digits of its number words,
    in order, matched greedily as a subsequence)."""
    found = "".join(d for w in text.split() for d in (word_digits(w) or ""))
    at = 0
    for c in found:
        if at < len(number) and c == number[at]:
            at += 1
    return at


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "bench/results/2026-12-07-redaction/redaction.json"))
    args = p.parse_args()
    rec = Recognizer()
    fmt = default_formatter()
    rules = RedactionRules()
    items = [(t, n, v) for t, n in SENSITIVE for v in VOICES] + [
        (t, None, v) for t in ORDINARY for v in VOICES]
    began = time.time()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, (text, _, voice) in enumerate(items):
            path = Path(tmp) / f"u{k}.wav"
            speak(text, voice, path)
            paths.append(path)
        for (text, number, voice), item in zip(items, transcribe_files(rec, paths)):
            finals = [fmt.apply(r, "full") for r in item.finals if r.text]
            after = [redact_result(r, rules) for r in finals]
            raw = " ".join(r.text for r in finals)
            shown = " ".join(r.display or "" for r in finals)
            raw_after = " ".join(r.text for r in after)
            shown_after = " ".join(r.display or "" for r in after)
            row = {"spoken": text, "voice": voice, "raw": raw, "display": shown,
                   "raw_redacted": raw_after, "display_redacted": shown_after,
                   "redacted_words": sum(w.text == rules.marker for r in after
                                         for w in r.words)}
            if number is not None:
                left = max(digits_left(raw_after, number), digits_left(shown_after, number))
                row.update(number=number, digits_left=left, caught=left <= 3)
            else:
                row["false_redaction"] = raw_after != raw or shown_after != shown
            rows.append(row)
    sensitive = [r for r in rows if "number" in r]
    ordinary = [r for r in rows if "number" not in r]
    report = {
        "what": "redaction of spoken card and social security numbers (recall) and of "
                "ordinary numbers (false redactions); built-in model, text_format full",
        "date": time.strftime("%Y-%m-%d", time.gmtime(began)),
        "python": platform.python_version(), "voices": list(VOICES),
        "recall": round(sum(r["caught"] for r in sensitive) / len(sensitive), 4),
        "recall_cards": round(sum(r["caught"] for r in sensitive if len(r["number"]) > 9)
                              / sum(len(r["number"]) > 9 for r in sensitive), 4),
        "recall_ssn": round(sum(r["caught"] for r in sensitive if len(r["number"]) == 9)
                            / sum(len(r["number"]) == 9 for r in sensitive), 4),
        "sensitive_utterances": len(sensitive),
        "false_redaction_rate": round(sum(r["false_redaction"] for r in ordinary)
                                      / len(ordinary), 4),
        "ordinary_utterances": len(ordinary),
        "seconds": round(time.time() - began, 1), "utterances": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "utterances"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

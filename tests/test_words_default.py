"""Words by default where they pay: ``streamdec transcribe`` and ``streamdec mic``
run the built-in model with its words (the ``accurate`` config) unless the command line
chooses the search or the model; ``serve`` keeps the built-in settings (greedy), sized by
capacity (docs/words.md, "Which search for which command")."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamdec.cli.main import build_parser, main
from streamdec.cli.options import WORDS_CONFIG, app_config_from_args, words_by_default

ROOT = Path(__file__).resolve().parents[1]
WAV = str(ROOT / "examples" / "hello.wav")
PUBLISHED = ROOT / "tests" / "fixtures" / "published-layouts"


def config_of(*argv):
    args = build_parser().parse_args(list(argv))
    return app_config_from_args(args, words_default=args.command in ("transcribe", "mic"))


@pytest.mark.parametrize("command", [["transcribe", WAV], ["mic"]])
def test_transcribe_and_mic_search_with_words_by_default(command):
    search = config_of(*command).recognizer.search
    assert (search.method, search.beam, search.lang_dir is not None) == ("alsd", 16, True)
    assert search.lang_dir == "lang"  # the model directory's (streamdec/assets/synthetic-en/lang)
    assert WORDS_CONFIG == "accurate"


@pytest.mark.parametrize("extra, method", [
    (["--search", "greedy"], "greedy"),             # the search chosen
    (["--search", "modified_beam"], "modified_beam"),
    (["--config", "default"], "greedy"),            # a config named
    (["--config", "telephony"], "alsd"),             # (beam 4, no words)
    (["--model", str(PUBLISHED / "A-streaming-zipformer2-chunk-16-left-128")], "greedy"),  # no lang/
])
def test_anything_that_chooses_the_search_or_model_turns_the_default_off(extra, method):
    app = config_of("transcribe", WAV, *extra)
    assert app.recognizer.search.method == method
    args = build_parser().parse_args(["transcribe", WAV, *extra])
    assert not words_by_default(args)


def test_a_lang_directory_of_ones_own_gets_the_words_settings():
    lang = str(ROOT / "streamdec" / "assets" / "synthetic-en" / "lang")
    for extra in ([], ["--model", str(PUBLISHED / "A-streaming-zipformer2-chunk-16-left-128")]):
        search = config_of("transcribe", WAV, "--lang", lang, *extra).recognizer.search
        assert (search.method, search.beam, search.lang_dir) == ("alsd", 16, lang)


def test_flags_that_only_tune_the_words_keep_them():
    search = config_of("transcribe", WAV, "--beam", "8", "--word-bonus", "2").recognizer.search
    assert (search.method, search.beam, search.word_bonus, search.lang_dir is not None) == (
        "alsd", 8, 2.0, True)


def test_serve_keeps_the_builtin_settings():
    args = build_parser().parse_args(["serve"])
    assert app_config_from_args(args).recognizer.search.method == "greedy"


def test_the_default_transcript_is_the_accurate_configs(capsys):
    assert main(["transcribe", WAV]) == 0
    default = capsys.readouterr().out
    assert main(["transcribe", WAV, "--config", "accurate"]) == 0
    assert capsys.readouterr().out == default
    assert default.strip().endswith("PLEASE CALL ME BACK AT FIVE THIRTY")
    assert main(["transcribe", WAV, "--search", "greedy"]) == 0
    greedy = capsys.readouterr().out
    assert main(["transcribe", WAV, "--config", "default"]) == 0
    assert capsys.readouterr().out == greedy != default

"""One default search, the model's: its words (``search.config.WORDS_SEARCH``, the built-in
config ``accurate``) where its directory ships them (lang/), else greedy; and how the
command line's options change it (``streamdec.cli.options.app_config_from_args``). That every
door gives the same text with it: tests/test_one_default.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from streamdec import ModelConfig, RecognizerConfig, SearchConfig
from streamdec.appconfig import load_config
from streamdec.cli.main import build_parser, main
from streamdec.cli.options import app_config_from_args
from streamdec.search.config import WORDS_SEARCH, default_search, with_method

ROOT = Path(__file__).resolve().parents[1]
WAV = str(ROOT / "examples" / "hello.wav")
PUBLISHED = ROOT / "tests" / "fixtures" / "published-layouts"
NO_LANG = str(PUBLISHED / "A-streaming-zipformer2-chunk-16-left-128")
LANG = str(ROOT / "streamdec" / "assets" / "synthetic-en" / "lang")


def config_of(*argv):
    return app_config_from_args(build_parser().parse_args(list(argv)))


def test_the_words_search_is_the_accurate_config():
    assert (WORDS_SEARCH.method, WORDS_SEARCH.beam, WORDS_SEARCH.lang_dir) == ("alsd", 16, "lang")
    assert load_config("accurate").recognizer.search == WORDS_SEARCH
    assert load_config("default").recognizer.search == WORDS_SEARCH  # names no search
    assert load_config(None).recognizer.search == WORDS_SEARCH


def test_the_default_follows_the_model():
    assert RecognizerConfig().search == WORDS_SEARCH  # the built-in model ships lang/
    assert RecognizerConfig(model=ModelConfig(model_dir=NO_LANG)).search == SearchConfig()
    assert default_search(Path(NO_LANG)) == SearchConfig()
    given = SearchConfig(method="modified_beam")
    assert RecognizerConfig(search=given).search is given


@pytest.mark.parametrize("command", [["transcribe", WAV], ["mic"], ["serve"]])
def test_every_command_has_the_default(command):
    assert config_of(*command).recognizer.search == WORDS_SEARCH


@pytest.mark.parametrize("extra, method, words", [
    (["--search", "greedy"], "greedy", False),           # greedy drops the words
    (["--search", "modified_beam"], "modified_beam", True),  # a beam search keeps them
    (["--config", "default"], "alsd", True),              # names no search
    (["--config", "telephony"], "alsd", False),           # its own search (beam 4, no words)
    (["--config", "low-latency"], "greedy", False),
    (["--model", NO_LANG], "greedy", False),              # a model without lang/
    (["--lang", LANG, "--model", NO_LANG], "alsd", True),  # words of one's own
    (["--beam", "8", "--word-bonus", "2"], "alsd", True),  # tuning keeps the words
])
def test_options_that_change_the_search(extra, method, words):
    search = config_of("transcribe", WAV, *extra).recognizer.search
    assert (search.method, search.lang_dir is not None) == (method, words)


def test_tuning_flags_apply_on_top():
    search = config_of("transcribe", WAV, "--beam", "8", "--word-bonus", "2").recognizer.search
    assert (search.method, search.beam, search.word_bonus, search.lang_dir) == (
        "alsd", 8, 2.0, "lang")
    search = config_of("transcribe", WAV, "--lang", LANG).recognizer.search
    assert search == replace(WORDS_SEARCH, lang_dir=LANG)


def test_with_method_drops_only_what_greedy_cannot_use():
    assert with_method(WORDS_SEARCH, "greedy") == replace(WORDS_SEARCH, method="greedy",
                                                          lang_dir=None)
    assert with_method(WORDS_SEARCH, "tsd").lang_dir == "lang"


def test_greedy_on_the_command_line_is_greedy(capsys):
    assert main(["transcribe", WAV]) == 0
    default = capsys.readouterr().out
    assert default.strip().endswith("PLEASE CALL ME BACK AT FIVE THIRTY")
    assert main(["transcribe", WAV, "--config", "accurate"]) == 0
    assert capsys.readouterr().out == default
    assert main(["transcribe", WAV, "--search", "greedy"]) == 0
    assert capsys.readouterr().out != default

"""What a recognizer shares between streams and configurations (its ``SearchResources``):
one decoder cache for every search configuration, one bounded store of search objects,
hotwords, grammars, word graphs and LMs with one eviction rule, safe from many threads,
each resource built once; hotwords checked once."""

import pytest

from conftest import make_recognizer
from decode_utils import decode_in_pieces, finals, key
from model_factory import test_audio
from streamdec import ConfigError, SearchConfig, TokenizeError
from streamdec.core.drive import decode_audio
from streamdec.core.resources import HEAVY, RESOURCE_BUDGET

AUDIO = test_audio(3.0, seed=5)


@pytest.fixture(scope="module")
def rec(model_dirs):
    return make_recognizer(model_dirs["lstm"])


def test_every_search_configuration_shares_the_decoder_cache(rec):
    greedy = rec.resources.search(SearchConfig(method="greedy"))
    beam = rec.resources.search(SearchConfig(method="modified_beam", beam=3))
    alsd = rec.resources.search(SearchConfig(method="alsd", beam=2))
    assert greedy.decoder_cache is beam.decoder_cache is alsd.decoder_cache
    decode_in_pieces(rec, AUDIO, 1600, search=SearchConfig(method="modified_beam", beam=3))
    assert len(beam.decoder_cache) > 1  # filled by one search, seen by all


def test_search_objects_are_bounded_and_eviction_is_safe(rec):
    first = SearchConfig(method="modified_beam", beam=1)
    s = rec.create_stream(search=first)
    configs = [SearchConfig(method="modified_beam", beam=n)
               for n in range(2, 2 + 2 * RESOURCE_BUDGET)]
    for c in configs:
        rec.resources.search(c)
    assert rec.resources.weight == RESOURCE_BUDGET
    assert ("search", first) not in rec.resources
    assert rec.resources.keys()[-1] == ("search", configs[-1])
    # the stream created before its configuration was evicted decodes as before
    assert key(finals(decode_audio(rec, s, 16000, [AUDIO]))) == key(finals(
        decode_in_pieces(rec, AUDIO, len(AUDIO), search=first)))


def test_hotwords_file_is_read_and_checked_when_the_recognizer_is_made(model_dirs, tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("ABC :2.0\nDEF\n")
    bad = tmp_path / "bad.txt"
    bad.write_text("ABC\nXYZ\n")  # X, Y, Z are no units of the test model
    rec = make_recognizer(model_dirs["lstm"], search=SearchConfig(
        method="modified_beam", hotwords_file=str(good)))
    good.unlink()  # already read: streams made later do not need the file
    assert rec.create_stream().search_state.graph is not None
    with pytest.raises(TokenizeError, match="the model has no unit for X, Y, Z"):
        make_recognizer(model_dirs["lstm"], search=SearchConfig(method="modified_beam",
                                                                hotwords_file=str(bad)))
    with pytest.raises(ConfigError, match="cannot read hotwords file"):
        make_recognizer(model_dirs["lstm"], search=SearchConfig(
            method="modified_beam", hotwords_file=str(tmp_path / "missing.txt")))

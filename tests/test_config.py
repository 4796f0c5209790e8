import dataclasses

import pytest

from streamdec import ConfigError, SearchConfig
from streamdec.config import CONFIG_DIR, load_config, parse_config


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.toml")))
def test_shipped_configs_load(name):
    load_config(name)


def test_telephony_expects_8khz():
    assert load_config("telephony").audio.sample_rate == 8000


@pytest.mark.parametrize("data, message", [
    ({"search": {"method": "viterbi"}}, "search.method must be one of"),
    ({"search": {"beam": 0}}, "search.beam must be >= 1"),
    ({"model": {"backend": "tf"}}, "model.backend must be one of"),
    ({"modle": {}}, "unknown table"),
    ({"endpoint": {"rule1": {"min_trailing_silence": 1.0}}}, "endpoint.rule1"),
    ({"features": {"resample_quality": "best"}}, "resample_quality"),
])
def test_invalid_values_rejected_once_up_front(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(data)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[search\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_search_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SearchConfig().beam = 3

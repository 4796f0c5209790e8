import dataclasses
from pathlib import Path

import pytest

from streamdec import ConfigError, SearchConfig
from streamdec.appconfig import CONFIG_DIR, load_config, parse_config
from streamdec.engine import EngineConfig
from streamdec.server.config import ENGINE_KEYS

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def _setting(app, table: str, key: str):
    """Where a key of a config file's table lands in the AppConfig."""
    if table in ("model", "features", "search", "endpoint", "vad", "second_pass"):
        return getattr(getattr(app.recognizer, table), key)
    if table == "server" and key in ENGINE_KEYS:
        return getattr(app.server.engine, key)
    return getattr(getattr(app, table), key)


@pytest.mark.parametrize("name, keys", [("accurate", 8), ("default", 52), ("low-latency", 5),
                                        ("telephony", 5), ("two-pass", 18)])
def test_shipped_configs_set_what_they_write(name, keys):
    """Every key of each built-in file lands in the loaded config with the file's value
    (the engine's keys of [server] in ``server.engine``; the endpoint rules as rules)."""
    assert sorted(p.stem for p in CONFIG_DIR.glob("*.toml")) == [
        "accurate", "default", "low-latency", "telephony", "two-pass"]
    data = tomllib.loads((CONFIG_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    app = load_config(name)
    checked = 0
    for table, values in data.items():
        for key, value in values.items():
            got = _setting(app, table, key)
            if isinstance(value, dict):  # endpoint.rule1..3
                got = dataclasses.asdict(got)
            assert got == value, f"{name}: {table}.{key}"
            checked += 1
    assert checked == keys


def test_server_table_nests_the_engine_keys():
    app = parse_config({"server": {"port": 7000, "max_batch": 8, "max_wait_ms": 2.5,
                                   "workers": 2, "max_pending_seconds": 1.0}})
    assert app.server.port == 7000
    assert app.server.engine == EngineConfig(max_batch=8, max_wait_ms=2.5, workers=2,
                                             max_pending_seconds=1.0)
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config({"server": {"engine": {"max_batch": 8}}})  # not a key users write


def test_telephony_expects_8khz():
    assert load_config("telephony").audio.sample_rate == 8000


@pytest.mark.parametrize("data, message", [
    ({"search": {"method": "viterbi"}}, "search.method must be one of"),
    ({"search": {"beam": 0}}, "search.beam must be >= 1"),
    ({"model": {"backend": "tf"}}, "model.backend must be one of"),
    ({"model": {"cpu_arena": "no"}}, "model.cpu_arena must be true or false"),
    ({"model": {"cpu_arena": 0}}, "model.cpu_arena must be true or false"),
    ({"modle": {}}, "unknown table"),
    ({"endpoint": {"rule1": {"min_trailing_silence": 1.0}}}, "endpoint.rule1"),
    ({"features": {"resample_quality": "best"}}, "resample_quality"),
    ({"search": {"blank_penalty": float("nan")}}, "search.blank_penalty must be a finite number"),
    ({"search": {"blank_penalty": float("inf")}}, "search.blank_penalty must be a finite number"),
    ({"search": {"hotwords_score": float("-inf")}}, "search.hotwords_score must be a finite"),
    ({"search": {"temperature": float("nan")}}, "search.temperature must be a finite number"),
    ({"features": {"low_freq": float("nan")}}, "features.low_freq must be a finite number"),
    ({"features": {"frame_shift_ms": 0.0}}, "frame_shift_ms must be positive"),
    ({"server": {"max_batch": "x"}}, r"engine.max_batch must be an integer, got 'x'"),
    ({"server": {"max_batch": 2.5}}, "engine.max_batch must be an integer, got 2.5"),
    ({"server": {"workers": True}}, "engine.workers must be an integer, got True"),
    ({"server": {"port": "6006"}}, "server.port must be an integer, got '6006'"),
    ({"server": {"max_wait_ms": "15"}}, "engine.max_wait_ms must be a number, got '15'"),
    ({"search": {"beam": 4.0}}, "search.beam must be an integer, got 4.0"),
    ({"endpoint": {"rule2": {"must_contain_nonsilence": True, "min_trailing_silence":
                             float("inf"), "min_utterance_length": 0.0}}},
     "endpoint rule.min_trailing_silence must be a finite number"),
])
def test_invalid_values_rejected_once_up_front(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(data)


def test_an_invalid_value_in_a_file_names_the_file_and_its_table(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nport = 7000\nmax_batch = 2.5\n")
    with pytest.raises(ConfigError, match=rf"^{bad} \[server\]: engine.max_batch must be an "
                                          r"integer, got 2.5$"):
        load_config(bad)
    bad.write_text("[search]\nbeam = 0\n")
    with pytest.raises(ConfigError, match=rf"^{bad} \[search\]: search.beam must be >= 1"):
        load_config(bad)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[search\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_unknown_builtin_name_lists_the_builtin_configs():
    with pytest.raises(ConfigError, match="no such config file or built-in config "
                                          r"\(built-in: accurate, default, low-latency, telephony"):
        load_config("telefony")


def test_paths_in_a_config_file_are_relative_to_it(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "words.txt").write_text("HELLO\n")
    (tmp_path / "cfg" / "c.toml").write_text(
        '[search]\nmethod = "modified_beam"\nhotwords_file = "words.txt"\n'
        '[model]\nmodel_dir = "../models/x"\n')
    monkeypatch.chdir(tmp_path)  # a different working directory
    app = load_config("cfg/c.toml")
    assert app.recognizer.search.hotwords_file == str((tmp_path / "cfg" / "words.txt").resolve())
    assert Path(app.recognizer.model.model_dir).resolve() == (tmp_path / "models" / "x").resolve()
    # files of the model (lang/, lm.onnx): beside the config when there, else the model's
    (tmp_path / "cfg" / "mylang").mkdir()
    (tmp_path / "cfg" / "d.toml").write_text(
        '[search]\nmethod = "alsd"\nlang_dir = "mylang"\nlm_file = "lm.onnx"\n')
    app = load_config("cfg/d.toml")
    assert app.recognizer.search.lang_dir == str((tmp_path / "cfg" / "mylang").resolve())
    assert app.recognizer.search.lm_file == "lm.onnx"


def test_search_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SearchConfig().beam = 3

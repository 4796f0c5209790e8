"""Where streamdec keeps a user's files: the cache (models, compiled words: can be made
again) and the data (transcripts: cannot) in separate folders, both moved by one variable."""

from __future__ import annotations

from pathlib import Path

from streamdec.home import HOME_ENV, streamdec_data, streamdec_home
from streamdec.records.config import DEFAULT_FILE, StoreConfig


def test_cache_and_data_follow_xdg_and_stay_apart(monkeypatch, tmp_path):
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert streamdec_home() == tmp_path / "cache" / "streamdec"
    assert streamdec_data() == tmp_path / "data" / "streamdec"
    assert StoreConfig().sqlite_path() == tmp_path / "data" / "streamdec" / DEFAULT_FILE


def test_without_xdg_the_data_is_under_local_share(monkeypatch, tmp_path):
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert streamdec_home() == tmp_path / ".cache" / "streamdec"
    assert streamdec_data() == tmp_path / ".local" / "share" / "streamdec"


def test_streamdec_home_moves_both(monkeypatch, tmp_path):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "all"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert streamdec_home() == streamdec_data() == Path(tmp_path / "all")

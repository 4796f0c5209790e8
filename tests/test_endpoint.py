import pytest

from streamdec import ConfigError, EndpointConfig, EndpointRule
from streamdec.core.endpoint import is_endpoint

F = 0.04  # seconds per encoder frame


@pytest.mark.parametrize("frames, trailing, expected, why", [
    (0, 0, False, "nothing decoded"),
    (100, 0, False, "speech, no silence"),
    (100, 29, False, "speech + 1.16 s silence: rule2 needs 1.2 s"),
    (100, 30, True, "speech + 1.2 s silence: rule2"),
    (59, 59, False, "2.36 s of silence only: rule1 needs 2.4 s"),
    (60, 60, True, "2.4 s of silence only: rule1"),
    (499, 0, False, "19.96 s of speech"),
    (500, 0, True, "20 s of speech: rule3"),
])
def test_default_rules(frames, trailing, expected, why):
    assert is_endpoint(EndpointConfig(), frames, trailing, F) is expected, why


def test_disabled():
    assert not is_endpoint(EndpointConfig(enabled=False), 1000, 1000, F)


def test_custom_rule():
    cfg = EndpointConfig(rule2=EndpointRule(True, 0.4, 1.0))
    assert not is_endpoint(cfg, 20, 10, F)  # 0.8 s long: rule2 needs 1.0 s
    assert is_endpoint(cfg, 25, 10, F)


def test_negative_values_rejected():
    with pytest.raises(ConfigError):
        EndpointRule(False, -1.0, 0.0)

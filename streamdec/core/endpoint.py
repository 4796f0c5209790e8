"""Endpoint rules: pure functions of (segment length, trailing silence, speech seen).

Three OR-ed rules (sherpa-onnx's, widely copied). Trailing silence is the number of
trailing blank frames of the best hypothesis times the encoder frame duration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..validation import require_finite

__all__ = ["EndpointRule", "EndpointConfig", "is_endpoint"]


@dataclass(frozen=True)
class EndpointRule:
    must_contain_nonsilence: bool  # the segment must hold speech (a token) before silence
    min_trailing_silence: float  # seconds of trailing blanks
    min_utterance_length: float  # seconds since the segment started

    def __post_init__(self) -> None:
        require_finite(self, "endpoint rule")
        if self.min_trailing_silence < 0 or self.min_utterance_length < 0:
            raise ConfigError(f"endpoint rule values must be >= 0: {self}")

    def matches(self, utterance_length: float, trailing_silence: float,
                contains_nonsilence: bool) -> bool:
        return ((contains_nonsilence or not self.must_contain_nonsilence)
                and trailing_silence >= self.min_trailing_silence
                and utterance_length >= self.min_utterance_length)


@dataclass(frozen=True)
class EndpointConfig:
    enabled: bool = True
    rule1: EndpointRule = field(default_factory=lambda: EndpointRule(False, 2.4, 0.0))
    rule2: EndpointRule = field(default_factory=lambda: EndpointRule(True, 1.2, 0.0))
    rule3: EndpointRule = field(default_factory=lambda: EndpointRule(False, 0.0, 20.0))

    @property
    def rules(self) -> tuple[EndpointRule, EndpointRule, EndpointRule]:
        return (self.rule1, self.rule2, self.rule3)


def is_endpoint(config: EndpointConfig, segment_frames: int, trailing_blank_frames: int,
                frame_seconds: float) -> bool:
    """True when any rule fires. ``segment_frames``: encoder frames decoded in this segment;
    ``trailing_blank_frames``: of those, the trailing frames without a token."""
    if not config.enabled or segment_frames <= 0:
        return False
    length = segment_frames * frame_seconds
    silence = trailing_blank_frames * frame_seconds
    speech = segment_frames > trailing_blank_frames
    return any(rule.matches(length, silence, speech) for rule in config.rules)

"""streamdec: streaming speech transcription with chunked transducer models.

    from streamdec import Recognizer, RecognizerConfig
    rec = Recognizer(RecognizerConfig())      # the built-in model
    stream = rec.create_stream()
    stream.accept_waveform(16000, samples)
    stream.input_finished()
    while rec.is_ready(stream):
        rec.decode([stream])
    for result in stream.pop_events():
        print(result.is_final, result.text)
"""

from .audio.features import FeatureConfig
from .core.endpoint import EndpointConfig, EndpointRule
from .core.recognizer import Recognizer, RecognizerConfig
from .core.results import Result
from .core.stream import Stream
from .errors import (AudioInputError, ConfigError, DecodeError, ModelLoadError,
                     StreamdecError, StreamStateError, TokenizeError)
from .models import ModelConfig, load_model
from .search import SearchConfig

__version__ = "0.1.0"
__all__ = ["Recognizer", "RecognizerConfig", "Stream", "Result", "ModelConfig", "FeatureConfig",
           "SearchConfig", "EndpointConfig", "EndpointRule", "load_model", "StreamdecError",
           "ConfigError", "ModelLoadError", "AudioInputError", "StreamStateError",
           "TokenizeError", "DecodeError"]

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

from .endpoint import EndpointConfig, EndpointRule
from .errors import (AudioInputError, ConfigError, DecodeError, ModelLoadError,
                     StreamdecError, StreamStateError, TokenizeError)
from .features import FeatureConfig
from .models import ModelConfig, load_model
from .recognizer import Recognizer, RecognizerConfig
from .results import Result
from .search import SearchConfig
from .stream import Stream

__version__ = "0.1.0"
__all__ = ["Recognizer", "RecognizerConfig", "Stream", "Result", "ModelConfig", "FeatureConfig",
           "SearchConfig", "EndpointConfig", "EndpointRule", "load_model", "StreamdecError",
           "ConfigError", "ModelLoadError", "AudioInputError", "StreamStateError",
           "TokenizeError", "DecodeError"]

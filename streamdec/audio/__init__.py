"""Audio in: samples in, frames or speech decisions out.

- ``pcm``: raw PCM bytes (s16le, f32le, mu-law) to float32 samples;
- ``fbank``: Kaldi's log-mel filterbank, many frames at once;
- ``features``: streaming fbank with the model's options, resampling any input rate;
- ``vad``: voice activity detection (silero-vad's model) gating a stream's audio.

Part of the core: no sockets, threads or asyncio; nothing here imports the engine, the
server or the command line.
"""

"""The file adapter: audio files in, transcripts out.

- ``audio_file``: audio inputs (any format soundfile reads, raw PCM, standard input) read
  as blocks of samples;
- ``transcribe``: many files decoded at once over the core's batched decode;
- ``formats``: the output formats (text, JSON lines, SRT, WebVTT), pure functions of results.
"""

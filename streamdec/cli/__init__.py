"""Command line: ``streamdec transcribe`` (and the other commands as they come)."""

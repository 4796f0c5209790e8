"""``streamdec`` entry point: sub-commands over the same config objects."""

from __future__ import annotations

import argparse
import sys

from .. import __version__, allocator
from ..errors import StreamdecError
from . import lang, mic, models, serve, transcribe


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamdec", description="Streaming speech transcription.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    transcribe.add_parser(sub)
    mic.add_parser(sub)
    lang.add_parser(sub)
    serve.add_parser(sub)
    models.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    allocator.configure()  # every command decodes for a while (see streamdec.allocator)
    try:
        return args.run(args)
    except StreamdecError as e:
        print(f"streamdec: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``streamdec ... | head``): stop quietly
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 141


if __name__ == "__main__":
    sys.exit(main())

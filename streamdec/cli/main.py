"""``streamdec`` entry point: sub-commands over the same config objects."""

from __future__ import annotations

import argparse
import sys

from ..errors import StreamdecError
from . import serve, transcribe


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamdec", description="Streaming speech transcription.")
    sub = p.add_subparsers(dest="command", required=True)
    transcribe.add_parser(sub)
    serve.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except StreamdecError as e:
        print(f"streamdec: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""Writes docs/reference/cli.md, the command line reference, from the argparse parsers
themselves (``streamdec.cli.main.build_parser`` and the two parsers of ``streamdec lang``),
so the page says what ``--help`` says: every command, its description, and per group of
options each option's names, value and help text.

    python scripts/cli_reference.py           # (re)write the page
    python scripts/cli_reference.py --check   # exit 1 if the committed page differs

tests/test_docs_site.py runs the check: a parser changed without the page fails the tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "cli.md"
sys.path.insert(0, str(ROOT))

from streamdec.cli import lang  # noqa: E402
from streamdec.cli.main import build_parser  # noqa: E402

HEADER = """# Command line

<!-- Written by scripts/cli_reference.py from the argparse parsers: do not edit by hand
(tests/test_docs_site.py checks that this page is what the script writes). -->

Every command of `streamdec`, with the options its `--help` lists, in the same words.
Options the command line does not set come from the config file (see
[Configuration](../configuration.md)).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _value(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if not action.option_strings:
        return ""
    return formatter._format_args(action, formatter._get_default_metavar_for_optional(action))


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                yield name, helps.get(name), child


def _section(title: str, summary: str | None, parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    out = [f"## `{title}`", ""]
    if summary and not " ".join((parser.description or "").split()).lower().startswith(summary.lower()):
        out += [summary[0].upper() + summary[1:] + ".", ""]
    if parser.description:
        if issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter):
            out += ["```text", parser.description.strip("\n"), "```", ""]
        else:
            out += [" ".join(parser.description.split()), ""]
    for group in parser._action_groups:
        rows = [a for a in group._group_actions
                if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]
        if not rows:
            continue
        title = {id(parser._positionals): "arguments", id(parser._optionals): "options"}.get(
            id(group), group.title)  # the two default groups' titles differ between Pythons
        out += [f"**{title}**" + (f": {_cell(group.description)}" if group.description else ""),
                "", "| option | value | what |", "|---|---|---|"]
        for action in rows:
            names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
            value = _value(formatter, action)
            text = formatter._expand_help(action) if action.help else ""
            out.append(f"| {names} | {_cell(f'`{value}`') if value else ''} | {_cell(text)} |")
        out.append("")
    return out


def render() -> str:
    lines = [HEADER]
    root = build_parser()
    for name, summary, parser in _subcommands(root):
        if name == "lang":  # parses its own two forms (streamdec/cli/lang.py)
            lines += _section("streamdec lang", summary, parser)
            lines += _section("streamdec lang OUT_DIR", None, lang._dir_parser())
            lines += _section("streamdec lang lm", None, lang._lm_parser())
            continue
        lines += _section(f"streamdec {name}", summary, parser)
        for child_name, child_summary, child in _subcommands(parser):
            lines += _section(f"streamdec {name} {child_name}", child_summary, child)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write (or --check) docs/reference/cli.md.")
    p.add_argument("--check", action="store_true", help="exit 1 if the page is not what this writes")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python scripts/cli_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

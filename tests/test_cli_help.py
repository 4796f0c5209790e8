"""Every option of every ``streamdec`` command says its default in ``--help`` (a flag, a
positional argument and a required option have none to say), and metavars are plain words
(no ``|``, which the CLI reference's table would have to escape)."""

from __future__ import annotations

import argparse

import pytest

from streamdec.cli import lang
from streamdec.cli.main import build_parser


def commands(parser: argparse.ArgumentParser, prefix: str = "streamdec"):
    """(name, parser) of the command and every subcommand under it, depth first."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, f"{prefix} {name}")


# (``streamdec lang`` parses its own two forms, as the CLI reference shows them)
ALL = {**dict(commands(build_parser())), "streamdec lang OUT_DIR": lang._dir_parser(),
       "streamdec lang lm": lang._lm_parser()}
NO_DEFAULT = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def test_the_commands_are_all_walked():
    assert sorted(ALL) == sorted([
        "streamdec", "streamdec transcribe", "streamdec mic", "streamdec serve",
        "streamdec lang", "streamdec lang OUT_DIR", "streamdec lang lm", "streamdec models",
        "streamdec models list", "streamdec models get", "streamdec models path",
        "streamdec models repair"])


@pytest.mark.parametrize("command", sorted(ALL))
def test_every_option_states_its_default(command):
    parser = ALL[command]
    one_of = {a for g in parser._mutually_exclusive_groups if g.required
              for a in g._group_actions}  # one of them is required
    missing = []
    for action in parser._actions:
        if (isinstance(action, NO_DEFAULT) or not action.option_strings or action.required
                or action.nargs == 0 or action in one_of):
            continue
        text = parser._get_formatter()._expand_help(action)
        if "default" not in text:
            missing.append(action.option_strings[-1])
    assert not missing, f"{command}: no default stated for {', '.join(missing)}"


@pytest.mark.parametrize("command", sorted(ALL))
def test_metavars_are_plain(command):
    """An option's value is one plain word (``N``, ``FILE``, ``MODEL``) or its choices."""
    parser = ALL[command]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.option_strings and action.nargs != 0:
            value = formatter._format_args(
                action, formatter._get_default_metavar_for_optional(action))
            assert "|" not in value and "_" not in value, (command, action.option_strings)

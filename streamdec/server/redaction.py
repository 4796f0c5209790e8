"""The server's redaction: its rules (``[server] redact``, ``redact_patterns_file``) and a
connection's or a call's own kinds on top, applied to every result before it leaves the
server or is stored (``streamdec.textfmt.redact``: the pure function).

    base = server_rules(config)                # at start: ConfigError for a bad file
    result = redacted(result, base, extra)     # each result, partials too
"""

from __future__ import annotations

from pathlib import Path

from ..core.results import Result
from ..errors import ConfigError
from ..textfmt.redact import RedactionRules, parse_kinds, redact_result

__all__ = ["server_rules", "redacted", "NONE"]

NONE = RedactionRules(cards=False, ssn=False)


def read_patterns(path: str | Path) -> tuple[str, ...]:
    """Regular expressions of a file: one per line; blank lines and ``#`` comments skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError(f"server.redact_patterns_file {path}: {e.strerror or e}") from None
    return tuple(line for line in lines if line.strip() and not line.lstrip().startswith("#"))


def server_rules(config) -> RedactionRules:
    """The rules of a ``ServerConfig``; ConfigError (naming the file) for a bad pattern."""
    patterns = read_patterns(config.redact_patterns_file) if config.redact_patterns_file else ()
    try:
        return RedactionRules.of(parse_kinds(config.redact, "server.redact"), patterns)
    except ConfigError as e:
        raise ConfigError(f"server.redact_patterns_file {config.redact_patterns_file}: "
                          f"{e}") from None


def redacted(result: Result, base: RedactionRules, extra: frozenset[str] = frozenset()
             ) -> Result:
    """``result`` under ``base`` plus the kinds ``extra`` (a connection's or call's)."""
    rules = base
    if extra:
        rules = RedactionRules(cards=base.cards or "cards" in extra,
                               ssn=base.ssn or "ssn" in extra, patterns=base.patterns,
                               marker=base.marker)
    return redact_result(result, rules) if rules.active else result

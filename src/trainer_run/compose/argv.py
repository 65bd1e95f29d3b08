"""The command line's ``key=value`` overrides, read before Hydra composes anything."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

from trainer_run.errors import ConfigError

MULTIRUN_FLAGS = ("-m", "--multirun")
OTHER_CONFIG_FLAGS = ("-cp", "--config-path", "-cn", "--config-name", "--experimental-rerun", "-sc",
                      "--shell-completion")
"""Hydra flags that compose another config (or none): its keys are then left to Hydra."""
CONFIG_DIR_FLAGS = ("-cd", "--config-dir")
"""Hydra's flag adding a folder of the user's config files to ours."""
HELP_FLAGS = ("--help", "-h")
SHOW_FLAGS = ("--cfg", "-c", "--info", "-i")
"""Hydra's flags that show a config instead of running it."""
VALUED_FLAGS = ("--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                "--config-dir", "-cd", "--experimental-rerun")
"""Hydra flags followed by a value (``--config-dir DIR``)."""
INFO_FLAGS, INFO_VALUES = ("--info", "-i"), ("all", "config", "defaults", "defaults-tree",
                                              "plugins", "searchpath", "devices")
"""Hydra's ``--info``, whose value is optional; ``devices`` is ours (the devices alone)."""


def check_grammar(argv: list[str]) -> None:
    """Refuses (ConfigError, one line) the first override Hydra's grammar cannot parse,
    e.g. ``'optimizer.learning_rate=[1,'``, or a number Python will not convert (more than
    4300 digits), with the quoting that works. Flags (``-m``, ``--cfg job``) are Hydra's own."""
    parser = OverridesParser.create()
    for argument in argv:
        if not is_override(argument):
            continue
        try:
            parser.parse_overrides([argument])
        except OverrideParseException as e:
            reason = e.message.splitlines()[0].strip()
            raise ConfigError(f"cannot parse {argument!r}: {reason}; {_how_to_write(argument)}"
                              ) from None
        except ValueError as e:  # int() of a number too long to convert
            raise ConfigError(f"cannot parse {argument[:60]!r}...: {str(e).split(';')[0]}; give "
                              "the value in fewer digits (1e300, not 1000...0)") from None


def _how_to_write(argument: str) -> str:
    """How to write ``argument`` so that Hydra parses it: a value with spaces or characters
    beyond ASCII letters needs Hydra's quotes, inside the shell's."""
    name, _, given = argument.partition("=")
    if given and given[0] not in "'\"[{(" and not PLAIN.fullmatch(given):
        return "quote the value for Hydra, inside quotes for the shell: " + pasteable(name, given)
    return ("write overrides as key=value (quote lists and strings with spaces for the shell, "
            "see https://hydra.cc/docs/advanced/override_grammar/basic)")


def key(argument: str) -> str:
    return argument.split("=", 1)[0]


def value(argv: list[str], name: str):
    """The value of the last ``name=value`` argument, unquoted as Hydra reads a quoted string
    (None if absent)."""
    values = [a.split("=", 1)[1] for a in argv if "=" in a and key(a).lstrip("+~") == name]
    return unquote(values[-1]) if values else None


def boolean(argument: str) -> bool:
    """The value of the override ``argument`` (``key=value``) as Hydra reads it, which must be
    a boolean: ``true`` or ``false`` in any case (``True``, ``FALSE``); anything else
    (``yes``, ``1``, ``'true'``, nothing) is a ConfigError naming the key, in the words the
    config's type check uses, so that every command reads ``trust=`` alike."""
    name, _, text = argument.partition("=")
    try:
        parsed = OverridesParser.create().parse_overrides([f"k={text}"])[0].value()
    except OverrideParseException:
        parsed = text
    if not isinstance(parsed, bool):
        raise ConfigError(f"{name.lstrip('+~')} must be true or false, got {parsed!r}")
    return parsed


def unquote(text: str) -> str:
    """``text``, a value of an override, without Hydra's quotes and escapes when it is one
    quoted string (``'a\\'b'`` is ``a'b``); otherwise with any quotes at its ends stripped."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            parsed = OverridesParser.create().parse_overrides([f"k={text}"])[0].value()
        except OverrideParseException:
            parsed = None
        if isinstance(parsed, str):
            return parsed
    return text.strip("'\"")


def without(argv: list[str], *names: str) -> list[str]:
    """``argv`` without its ``name=...`` arguments."""
    return [a for a in argv if key(a).lstrip("+~") not in names]


def with_overrides(argv: list[str], *overrides: str) -> list[str]:
    """``argv`` with ``overrides`` placed just before its first override (at the end when it
    has none): Hydra reads the overrides as one run of arguments, so they must not be split
    by a flag (``optimizer=sgd --cfg job`` stays one run)."""
    first = next((i for i, a in enumerate(argv) if is_override(a)), len(argv))
    return [*argv[:first], *overrides, *argv[first:]]


def flags_first(argv: list[str]) -> list[str]:
    """``argv`` with Hydra's flags (and their values) before every override, in their order:
    Hydra reads the overrides as one run of arguments at the end, so ``a=1 --config-dir d b=2``
    is ``--config-dir d a=1 b=2``; a bare ``--info`` gets Hydra's default value, ``all``."""
    flags, overrides, rest = [], [], list(argv)
    while rest:
        argument = rest.pop(0)
        takes = argument in VALUED_FLAGS or (argument in INFO_FLAGS and rest[:1]
                                            and rest[0] in INFO_VALUES)
        if argument in INFO_FLAGS and not takes:  # Hydra's own value for a bare --info, so that
            flags += [argument, "all"]            # the overrides placed after it are not read as one
        elif argument.startswith("-"):
            flags += [argument, rest.pop(0)] if takes and rest else [argument]
        else:
            overrides.append(argument)
    return [*flags, *overrides]


def info(argv: list[str]) -> str | None:
    """The value of ``--info`` in ``argv`` (after :func:`flags_first`: ``all`` for a bare
    ``--info``); None without the flag."""
    for flag, following in zip(argv, [*argv[1:], None]):
        if flag in INFO_FLAGS:
            return following if following in INFO_VALUES else "all"
    return None


def is_override(argument: str) -> bool:
    """Whether ``argument`` is an override (``key=value``, ``~key``), not a flag."""
    return not argument.startswith("-") and ("=" in argument or argument.startswith("~"))


def composes_other_config(argv: list[str]) -> bool:
    """Whether a Hydra flag (:data:`OTHER_CONFIG_FLAGS`) makes Hydra compose another config."""
    return any(a.split("=", 1)[0] in OTHER_CONFIG_FLAGS for a in argv)


def config_dirs(argv: list[str]) -> list[Path]:
    """The folders ``--config-dir DIR`` (or ``-cd DIR``, ``--config-dir=DIR``) adds."""
    found = []
    for i, argument in enumerate(argv):
        flag, _, given = argument.partition("=")
        if flag in CONFIG_DIR_FLAGS:
            given = given or (argv[i + 1] if i + 1 < len(argv) else "")
            if given:
                found.append(Path(given).expanduser().absolute())
    return found


def asks_help(argv: list[str]) -> bool:
    """Whether the command line asks for our help (``--help`` or ``-h``)."""
    return any(a in HELP_FLAGS for a in argv)


def is_multirun(argv: list[str]) -> bool:
    return any(a in MULTIRUN_FLAGS for a in argv)


def is_null(text) -> bool:
    return text in (None, "null", "")


PLAIN = re.compile(r"[A-Za-z0-9_\-./+@%:]+")
DOUBLE = '"'
"""Characters a value may hold unquoted, for Hydra's grammar and the shell alike."""


def quote(text, mark: str = "'") -> str:
    """``text`` (a path, any characters) as one quoted string of Hydra's override grammar,
    within ``mark`` quotes: the quote is escaped with a backslash, and so is each backslash of
    a run that comes before a quote or the closing one (Hydra reads other backslashes as
    they are)."""
    escaped = re.sub(r"(\\*)(" + mark + r"|$)",
                     lambda m: m.group(1) * 2 + ("\\" + m.group(2) if m.group(2) else ""),
                     str(text))
    return mark + escaped + mark


def pasteable(name: str, text) -> str:
    """The argument ``name=<text>`` as a shell command line must hold it for Hydra to read
    ``text`` back exactly: as it is when plain (:data:`PLAIN`), else Hydra-quoted inside shell
    quotes (``resume='"/tmp/my runs/x"'``)."""
    if PLAIN.fullmatch(str(text)):
        return f"{name}={text}"
    return f"{name}={shlex.quote(quote(text, mark=DOUBLE))}"

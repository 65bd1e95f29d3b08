"""The ``trainer-generate`` command: text sampled from a finished language model's run
(``dataset=text`` with ``model=gpt`` or ``model=lstm_lm``), as nanoGPT's ``sample.py``.

``trainer-generate RUN [prompt=TEXT] [max_new_tokens=200] [temperature=0.8] [top_k=40]
[seed=0] [checkpoint=best|last|PATH] [samples=N] [trust=true]`` rebuilds the run's model and
tokenizer (:func:`trainer_run.load_model`: best weights by default when the run has them) and
prints the prompt followed by ``max_new_tokens`` sampled tokens; ``samples=N`` prints ``N``
texts, each after a ``--- sample i`` line. The same seed gives the same text. A run from
someone else is data, read as ``trainer-eval`` reads it (:mod:`trainer_run.runs.trust`); a
model outside trainer-run needs ``trust=true``. Nothing is written.
Bad input is one ``error:`` line, exit 2 (a prompt with a character outside a ``char``
vocabulary names it); Ctrl-C exit 130.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import commands

DESCRIPTION = """\
Sample text from a finished language model's run (dataset=text): the prompt, then
max_new_tokens tokens drawn at the given temperature from the top_k most likely ones."""

EPILOG = """\
examples:
  trainer-generate RUN prompt="ROMEO:" max_new_tokens=200 temperature=0.8 top_k=40 seed=0
  trainer-generate RUN samples=3 checkpoint=last

exit status: 0 once the text is printed, 2 for bad input (one error: line), 1 when your
model's code raises, 130 on Ctrl-C."""

KEYS = {"prompt": str, "max_new_tokens": int, "temperature": float, "top_k": int, "seed": int,
        "samples": int, "checkpoint": str, "trust": bool}
"""The keys the command takes, with their types (``top_k=null``: every token)."""


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="trainer-generate", description=DESCRIPTION,
                                   epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("run", type=Path, metavar="RUN", help="the run directory")
    made.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                      help="prompt=TEXT, max_new_tokens=N, temperature=T, top_k=K, seed=S, "
                           "samples=N, checkpoint=best|last|PATH, trust=true")
    return made


def main(argv: list[str] | None = None) -> None:
    """Runs the command (the console script's entry point)."""
    commands.main(parser(), run, argv)


def run(options: argparse.Namespace) -> int:
    """Samples and prints; the exit status."""
    import warnings

    from trainer_run.console import show_cause, warn
    from trainer_run.errors import ConfigError, UserCodeError
    from trainer_run.runner.trained import load_model

    from .failure import fail

    try:
        given = parsed(options.overrides)
        with warnings.catch_warnings(record=True) as told:  # a run that did not complete
            warnings.simplefilter("always")
            trained = load_model(options.run, given.pop("checkpoint", None),
                                 trust=given.pop("trust", False))
        for warning in told:
            warn(str(warning.message))
        texts = trained.generate(**{"prompt": "\n", "max_new_tokens": 200, **given,
                                    "samples": given.get("samples", 1)})
    except ConfigError as e:
        fail(e)
    except UserCodeError as e:
        show_cause(e)
        fail(f"{e}; nothing was generated", e.exit_code)
    for i, text in enumerate(texts):
        if len(texts) > 1:
            print(f"--- sample {i + 1}")
        print(text)
    return 0


def parsed(overrides: list[str]) -> dict:
    """``KEY=VALUE`` arguments by key, each of its type in :data:`KEYS` (``prompt`` and
    ``checkpoint`` as written; ``top_k`` may be ``null``); anything else one ConfigError line."""
    import yaml

    from trainer_run.compose import argv as args
    from trainer_run.errors import ConfigError

    given: dict = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise ConfigError(f"{item!r} is not a KEY=VALUE this command takes; give "
                              f"{', '.join(f'{k}=' for k in KEYS)}")
        kind = KEYS[key]
        if kind is str:
            given[key] = value
            continue
        if kind is bool:
            given[key] = args.boolean(item)
            continue
        try:
            number = yaml.safe_load(value)
        except yaml.YAMLError:
            number = value
        if key == "top_k" and number is None:
            given[key] = None
            continue
        fits = isinstance(number, kind) or (kind is float and isinstance(number, int))
        if isinstance(number, bool) or not fits:
            raise ConfigError(f"{key}={value} must be {'an integer' if kind is int else 'a number'}"
                              f", e.g. {key}={'0.8' if kind is float else '40'}")
        given[key] = number
    return given


if __name__ == "__main__":
    main()

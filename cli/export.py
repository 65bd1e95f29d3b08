"""The ``trainer-export`` command: a finished run's model written for use outside trainer-run.

``trainer-export RUN [checkpoint=best|last|PATH] [format=npz|onnx] [out=FILE] [trust=true]``
rebuilds the run's model with the weights ``checkpoint`` names (:func:`trainer_run.load_model`:
best by default when the run has one) and writes it (:mod:`trainer_run.export`): ``npz``, the
default, its arrays by name with the input normalization; ``onnx``, its inference graph with
the normalization at its head (the ``export`` extra). The file is ``out``, or
``RUN/export/model_<best|last|file>[_iter<N>].<format>``. A run from someone else whose config
names code is refused unless ``trust=true`` (:mod:`trainer_run.runs.trust`); the user's own modules
import from the current folder, as for ``trainer-run``. Bad input is one ``error:`` line,
exit 2; a refused write exit 4; Ctrl-C exit 130.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import commands

KEYS = ("checkpoint", "format", "out", "trust")

DESCRIPTION = """\
Export a finished run's model: its arrays by name with the input normalization (format=npz,
the default), or its inference graph as ONNX (format=onnx, pip install "trainer-run[export]"),
which takes the raw inputs predict takes."""

EPILOG = """\
examples:
  trainer-export runs/2026-11-26/10-00-00                       best weights, RUN/export/*.npz
  trainer-export runs/2026-11-26/10-00-00 format=onnx out=model.onnx
  trainer-export RUN checkpoint=last format=onnx

exit status: 0 once the file is written, 2 for bad input (one error: line), 4 when the disk
refuses the write, 130 on Ctrl-C."""

EMPTY = {"checkpoint": "checkpoint=best, checkpoint=last, a checkpoint directory or an .npz file "
                        "(left out: best when the run has one)",
         "format": "format=npz or format=onnx (left out: npz)",
         "out": "out=FILE, the file to write (left out: RUN/export/...)",
         "trust": "trust=true or trust=false (left out: false)"}
"""What each key takes, said when it is given empty (``format=``)."""


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="trainer-export", description=DESCRIPTION, epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("run", type=Path, metavar="RUN", help="the run directory")
    made.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                      help="checkpoint=best|last|PATH, format=npz|onnx, out=FILE, trust=true")
    return made


def main(argv: list[str] | None = None) -> None:
    """Runs the command (the console script's entry point)."""
    commands.main(parser(), run, argv)


def run(options: argparse.Namespace) -> int:
    """Exports, says where; the exit status."""
    from trainer_run.errors import ConfigError, StorageError

    from .failure import fail

    try:
        path, weights = export(options.run, options.overrides)
    except StorageError as e:
        fail(e, e.exit_code)
    except ConfigError as e:
        fail(e)
    at = (f"iteration {weights['iteration']}" if weights["iteration"] is not None
          else Path(weights["path"]).name)  # a file's weights: which file, their iteration unknown
    print(f"written: {path} ({weights['checkpoint']} weights, {at})")
    return 0


def export(run_dir: Path, overrides: list[str]) -> tuple[Path, dict]:
    """Writes the export ``overrides`` ask of the run in ``run_dir``; the file and the weights
    exported (:meth:`trainer_run.runs.weights.Weights.as_json`)."""
    import warnings

    from trainer_run import export as exporting
    from trainer_run.console import warn
    from trainer_run.errors import check
    from trainer_run.runner.trained import load_model

    given = _parsed(overrides)
    form = given.get("format", "npz")
    check(form in exporting.FORMATS,
          f"format={form} is unknown; choose one of {', '.join(exporting.FORMATS)}")
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        trained = load_model(run_dir, given.get("checkpoint"), trust=given.get("trust", False))
    for warning in told:
        warn(str(warning.message))
    if "out" in given:
        path = exporting.save(trained, form, Path(given["out"]))
    else:
        path = exporting.save(trained, form, exporting.default_path(run_dir, trained.weights, form),
                              run=run_dir)
    return path, trained.weights.as_json()


def _parsed(overrides: list[str]) -> dict:
    """``KEY=VALUE`` arguments by key, ``trust`` a boolean (:func:`.argv.boolean`); an empty
    value, or a key this command does not take, is refused saying what it takes."""
    from trainer_run.compose import argv as args
    from trainer_run.errors import ConfigError

    given: dict = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise ConfigError(f"{item!r} is not a KEY=VALUE this command takes; give "
                              "checkpoint=, format=, out= or trust=")
        if not value.strip():
            raise ConfigError(f"{key}= is empty; give {EMPTY[key]}")
        given[key] = args.boolean(item) if key == "trust" else value
    return given


if __name__ == "__main__":
    main()

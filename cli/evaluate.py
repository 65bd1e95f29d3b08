"""The ``trainer-eval`` command: a finished run's model measured on a split of its data or of
another dataset, after training (the lightning-hydra-template's ``eval.py ckpt_path=...``).

``trainer-eval RUN [checkpoint=best|last|PATH] [split=test|val|train|all] [dataset=NAME]
[dataset.KEY=VALUE ...] [metrics=[...]] [trust=true]`` rebuilds the run's model with the weights
``checkpoint`` names (:func:`trainer_run.load_model`: best by default when the run has one),
builds the data from the run's saved ``dataset`` section, or from the option ``dataset=NAME``
of our config files, with the ``dataset.KEY=VALUE`` overrides on top, and evaluates the
model on ``split`` with the run's own normalization (never one fitted on the new data) and
its task. The data is drawn with the run's seed, so ``split=val`` is the run's validation
split. Beside the model's own metrics it computes the run's ``metrics`` (the config key,
:mod:`trainer_run.metrics`), or those ``metrics=[...]`` names instead. The metrics are printed
as a table and written to ``<run>/eval/<time>.json`` (a name of its own:
:func:`trainer_run.runner.evaluation.write`, where the evaluation itself lives),
with the confusion matrix's data when one was asked for and its picture beside
(``<time>_confusion.png``, with matplotlib); nothing else in the run is touched. A run from
someone else whose config names code is refused unless ``trust=true``
(:mod:`trainer_run.runs.trust`). The user's own modules import from the current folder, as for
``trainer-run`` (:func:`trainer_run.targets.locate`).
Bad input is one ``error:`` line, exit 2; the user's code that raises (the loader, the
dataset, the model) its traceback and one line, exit 1; a refused write exit 4; Ctrl-C exit
130.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import commands

DESCRIPTION = """\
Evaluate a finished run's model on its test split (or another split, or another dataset given
as when training: dataset=NAME and dataset.KEY=VALUE), with the run's normalization and seed.
Prints the metrics and writes them to RUN/eval/<time>.json."""

EPILOG = """\
examples:
  trainer-eval runs/2026-11-26/10-00-00                        test split, best weights
  trainer-eval runs/2026-11-26/10-00-00 checkpoint=last split=val
  trainer-eval RUN dataset=npz dataset.path=new.npz split=all  every example of another file
  trainer-eval RUN 'metrics=[f1_macro,top_5,confusion_matrix]'  metrics besides the run's own

exit status: 0 once the metrics are printed and written, 2 for bad input (one error: line),
1 when your code (loader, dataset, model) raises (its traceback, then one error: line),
4 when the disk refuses the write, 130 on Ctrl-C."""


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="trainer-eval", description=DESCRIPTION, epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("run", type=Path, metavar="RUN", help="the run directory")
    made.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                      help="checkpoint=best|last|PATH, split=test|val|train|all, trust=true, "
                           "dataset=NAME, dataset.KEY=VALUE, metrics=[NAME,...]")
    return made


def main(argv: list[str] | None = None) -> None:
    """Runs the command (the console script's entry point)."""
    commands.main(parser(), run, argv)


def run(options: argparse.Namespace) -> int:
    """Evaluates, prints, writes; the exit status."""
    from trainer_run import memory
    from trainer_run.console import show_cause
    from trainer_run.errors import ConfigError, StorageError, UserCodeError

    from .failure import fail

    memory.reuse_freed_blocks()
    from trainer_run.runner import evaluation  # the allocator is set before the library loads

    try:
        result = evaluation.evaluate(options.run, options.overrides)
    except ConfigError as e:
        fail(e)
    except UserCodeError as e:  # the user's loader, dataset or model: its traceback, then why
        show_cause(e)
        fail(f"{e}; nothing was evaluated", e.exit_code)
    _show(result)
    try:
        path = evaluation.write(options.run, result)
    except (StorageError, ConfigError) as e:  # a full disk (4), or eval/ a link (2)
        fail(f"{e}; the metrics above were not saved", getattr(e, "exit_code", 2))
    print(f"written: {path}")
    return 0


def _show(result: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    from trainer_run.console import console

    weights = result["checkpoint"]
    shown = console()
    at = "" if weights["iteration"] is None else f", iteration {weights['iteration']}"  # a file's: unknown
    shown.print(f"{result['split']} split: {result['examples']} examples; {weights['checkpoint']} "
                f"weights{at} ({weights['path']})",
                highlight=False, soft_wrap=True, markup=False)
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in sorted(result["metrics"].items()):
        table.add_row(escape(name), f"{value:.6g}")
    shown.print(table)


if __name__ == "__main__":
    main()

"""``trainer-run debug=lr_find`` (``trainer.lr_find.enabled: true``): the learning-rate range
test of :mod:`trainer_run.training.lr_find` as the command's job, instead of a run.

It is a mode of the run's build (:func:`trainer_run.runner.lifecycle.build`,
:class:`RangeTestMode`): what a new run of the same config builds (backend, data, model,
iterator, optimizer and updater; with ``init_from``, those weights), so the same training
batches (``dataset.transforms`` and ``dataset.workers`` included), with three changes: no
scheduler (the test sets the rate of each step itself), a non-finite loss ends the test
instead of the command (``updater.nan_policy`` skip, no limit), and no extension but the
test's: no log, no evaluation, no checkpoint, no record. Its folder
(``lr_find/<date>/<time>`` by the preset, or a new ``hydra.run.dir``) receives
:data:`VALUES` (the settings, each step's rate, loss and smoothed loss, the suggestion, the
command) and :data:`PICTURE` (the smoothed loss against the rate, the suggestion marked;
with matplotlib, the ``plot`` extra). Rank 0 prints the suggested rate and the command line
that trains with it: the same overrides without ``debug=lr_find`` and the test's settings,
with ``optimizer.learning_rate=<suggestion>``.

Refused in one line before anything is built: a ``hydra.run.dir`` that is a run
(:func:`refuse_run`), ``resume=``, a sweep (``-m``), ``kvstore=dist_async`` (its server
applies the optimizer). A loss that is not finite at the first step is one line too (exit
status 3), and nothing is written.
"""

from __future__ import annotations

import contextlib
import math
import shlex
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from trainer_run.compose import argv as args
from trainer_run.compose import config_dirs
from trainer_run.console import inform, say, show_cause, warn
from trainer_run.errors import ConfigError, Diverged, JobFailed, RunStopped, UserCodeError, check
from trainer_run.runner import closing, fine_tune
from trainer_run.runs import directory as run_directory
from trainer_run.storage import files, strict_json
from trainer_run.training import StopTrigger, Trainer, lr_find

VALUES = "lr_find.json"
PICTURE = "lr_find.png"
PRESET = "debug=lr_find"


def requested(cfg: DictConfig) -> bool:
    """Whether the composed ``cfg`` asks for the range test (``trainer.lr_find.enabled``)."""
    return OmegaConf.select(cfg, f"{lr_find.KEY}.enabled", default=False) is True


def refuse_run(directory: Path) -> None:
    """Refuses (ConfigError) a ``directory`` for the test's files that is a run of
    trainer-run's (:func:`trainer_run.runs.directory.is_run`)."""
    if Path(directory).is_dir() and run_directory.is_run(Path(directory)):
        raise ConfigError(f"hydra.run.dir={directory} is a run; {PRESET} never writes into one: "
                          "leave hydra.run.dir out (its folder is then lr_find/<date>/<time>) or "
                          "name a new folder")


def run(job, cfg: DictConfig, build) -> None:
    """Runs the test of ``job`` (a :class:`trainer_run.runner.lifecycle.Job`) with config
    ``cfg``, built by ``build`` (:func:`trainer_run.runner.lifecycle.build`, the run's build,
    given :class:`RangeTestMode`); any failure is a :class:`~trainer_run.errors.JobFailed`
    (see the module docstring)."""
    with _failures("nothing was tested"):
        mode = RangeTestMode(lr_find.settings(OmegaConf.to_container(cfg.trainer.lr_find,
                                                                     resolve=True)))
        _check_job(job, cfg)
        cfg, taken = fine_tune.source_model(cfg, job.overrides)
        if taken and job.rank_0:
            say(taken)
        trainer, built = build(job, cfg, taken is not None, mode)
        if job.rank_0:
            test = mode.test
            say(f"backend: {built.backend.describe()}")
            inform(built.data.note)
            say(f"learning-rate range test: up to {test.num_training} steps, the rate from "
                f"{test.min_lr:g} to {test.max_lr:g} ({test.mode})")
    _train(trainer)
    trace = mode.range_test.trace
    _check_first_loss(trace)
    if job.rank_0:
        with _failures("nothing was written"):  # a refused write: one line, exit status 4
            _report(job, trace)


class RangeTestMode:
    """The range test as a mode of the run's build (:func:`trainer_run.runner.lifecycle.build`):
    the parts of a new run of the same config (backend, data, model, iterator, optimizer and
    updater, so the same training batches) with the changes of the module docstring, for the
    test of ``test`` (:class:`trainer_run.training.lr_find.Settings`)."""

    def __init__(self, test: lr_find.Settings):
        self.test = test
        self.range_test: lr_find.RangeTest | None = None

    @staticmethod
    def configure(config: dict) -> dict:
        """The run's ``config`` without its scheduler (the test sets the rate of each step), a
        non-finite loss skipped (``updater.nan_policy`` skip, no limit)."""
        return {**config, "scheduler": None, "updater": {**config["updater"], "nan_policy": "skip",
                                                         "max_skipped_in_a_row": None}}

    @staticmethod
    def check(built) -> None:
        """Refuses a run whose kvstore's server applies the optimizer (``dist_async``)."""
        check(not built.asynchronous, f"{PRESET} sets the learning rate of each step in the "
              "worker; kvstore=dist_async applies the optimizer on its server: choose "
              "kvstore=dist_sync")

    def trainer(self, built, updater, out: Path) -> Trainer:
        """The trainer of the test: the test's stop trigger and the test as its only
        extension."""
        trainer = Trainer(updater, StopTrigger(self.test.num_training), out=str(out))
        self.range_test = lr_find.RangeTest(self.test, built.optimizer)
        trainer.extend(self.range_test)
        return trainer


@contextlib.contextmanager
def _failures(outcome: str):
    """A mistake, an error of the user's code (its cause shown, ``outcome`` said after it) or a
    stop signal in the block, as the job's failure."""
    try:
        yield
    except ConfigError as e:
        raise JobFailed(e) from None
    except UserCodeError as e:
        show_cause(e)
        raise JobFailed(f"{e}; {outcome}", e.exit_code) from None
    except RunStopped as e:
        raise JobFailed(e, e.exit_code) from None


def _check_job(job, cfg: DictConfig) -> None:
    check(not job.sweeping, f"{PRESET} runs one test; drop -m/--multirun")
    check(not cfg.get("resume"), f"{PRESET} tests a new model; drop resume= (init_from= starts "
          "it from saved weights)")
    refuse_run(job.out)


def _train(trainer: Trainer) -> None:
    """Trains the test; an error, or a stop signal, is the job's failure."""
    with _failures("the range test stopped and wrote nothing"):
        trainer.run()
    if trainer.status == "interrupted":
        raise JobFailed(f"the range test was interrupted after {trainer.updater.iteration} steps; "
                        "nothing was written", 128 + (trainer.stop_signal or 2))


def _check_first_loss(trace: lr_find.Trace) -> None:
    """Refuses a test whose first loss, before any update, is not finite: no rate helps."""
    if trace.losses and not math.isfinite(trace.losses[0]):
        raise JobFailed(f"the loss is {trace.losses[0]} at the first step of the range test, "
                        f"before any update (learning rate {trace.rates[0]:g}): the model or the "
                        "data give no finite loss, so no rate can be suggested; check the data "
                        "for NaN or infinite values and the model's loss", Diverged.exit_code)


def _report(job, trace: lr_find.Trace) -> None:
    """Writes the values and the picture into the job's folder and prints the suggestion."""
    index = trace.suggestion()
    rate = trace.rates[index] if index is not None else None
    line = command_line(job, rate) if rate is not None else None
    values = job.out / VALUES
    files.write_atomic(values, strict_json.dumps(_record(trace, index, line), indent=2),
                       run=job.out)
    drawn = draw(job.out / PICTURE, trace, index)
    steps = len(trace.rates)
    if trace.stopped is not None:
        why = ("a loss that is not finite" if trace.stopped == "non-finite" else
               f"the smoothed loss rose above early_stop_threshold="
               f"{trace.test.early_stop_threshold:g} times its best")
        say(f"the range test stopped after {steps} of {trace.test.num_training} steps: {why}")
    if rate is None:
        warn(f"no learning rate suggested: the test's {steps} steps leave fewer than 2 finite "
             f"points once skip_begin={trace.test.skip_begin} and skip_end="
             f"{trace.test.skip_end} are left out; lower {lr_find.KEY}.min_lr or max_lr, or "
             f"raise {lr_find.KEY}.early_stop_threshold")
    else:
        say(f"suggested learning rate: {rate:.3g} (step {index + 1} of {steps}, the steepest "
            f"descent of the smoothed loss, {trace.smoothed[index]:.4g})")
        say(f"train with it: {line}")
    if not drawn:
        warn('no picture: drawing it needs matplotlib (pip install "trainer-run[plot]")')
    say(f"range test folder: {job.out} ({VALUES}{', ' + PICTURE if drawn else ''})")


def command_line(job, rate: float) -> str:
    """The command that trains ``job``'s config at ``rate``: its command, its
    ``--config-dir`` folders and overrides, less ``debug=lr_find``, the test's settings and
    any ``optimizer.learning_rate``, plus ``optimizer.learning_rate=<rate>``; for a test
    started from Python, the ``trainer_run.train`` call with them."""
    sources = (job.hydra.get("runtime") or {}).get("config_sources") or []
    given = config_dirs.given(sources)
    kept = [o for o in job.overrides if not _tests(o)] + [f"optimizer.learning_rate={rate:.3g}"]
    if job.command == closing.PYTHON:
        return f"trainer_run.train({kept!r}{f', config_dir={given[0]!r}' if given else ''})"
    folders = [f"--config-dir {shlex.quote(folder)}" for folder in given]
    return " ".join([job.command, *folders, *map(shlex.quote, kept)])


def _tests(override: str) -> bool:
    """Whether ``override`` belongs to the test, not to the training it is for."""
    key = args.key(override).lstrip("+~")
    return (override == PRESET or key == "optimizer.learning_rate" or key == lr_find.KEY
            or key.startswith(f"{lr_find.KEY}."))


def _record(trace: lr_find.Trace, index: int | None, line: str | None) -> dict:
    test = trace.test
    return {
        "settings": {name: getattr(test, name) for name in lr_find.Settings.__dataclass_fields__},
        "beta": lr_find.BETA,
        "suggestion": None if index is None else {"learning_rate": trace.rates[index],
                                                  "step": index + 1, "command": line},
        "stopped": trace.stopped,
        "steps": [{"step": i + 1, "learning_rate": r, "loss": loss, "smoothed_loss": s}
                  for i, (r, loss, s) in enumerate(zip(trace.rates, trace.losses, trace.smoothed))],
    }


def draw(path: Path, trace: lr_find.Trace, index: int | None) -> bool:
    """Draws the smoothed loss against the rate (a log axis for ``exponential``), the
    suggested point ``index`` marked in red, into ``path`` (PNG, matplotlib's Agg canvas);
    False without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    figure = Figure(figsize=(6.4, 4.4), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.plot(trace.rates, trace.smoothed, label="smoothed loss")
    if trace.test.mode == "exponential":
        ax.set_xscale("log")
    if index is not None:
        ax.plot(trace.rates[index], trace.smoothed[index], marker="o", markersize=10,
                color="red", linestyle="none", label=f"suggested {trace.rates[index]:.3g}")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("smoothed loss")
    ax.set_title("learning-rate range test")
    ax.legend()
    files.write_atomic(path, lambda f: figure.savefig(f, format="png"), run=path.parent)
    return True

"""Training and resuming from Python, as the command does: ``trainer_run.train`` and
``trainer_run.resume``.

``train(["optimizer=sgd", "trainer.max_epochs=2"])`` is ``trainer-run optimizer=sgd
trainer.max_epochs=2``: the same checks before anything is composed, the same config (Hydra's
compose over our configs and the user's ``config_dir``), the same lifecycle
(:func:`trainer_run.runner.lifecycle.run`: claim the folder, build, record and sign, train), the
same console output and the same files, bit for bit. It returns a :class:`Run`. Stop signals
are handled as the command handles them for the call's duration (in the main thread): Ctrl-C
finishes the iteration, writes a checkpoint and returns a run whose status is
``interrupted``, which :func:`resume` continues (the last line says
``resume with: trainer_run.resume('<run>')``). A flag of the command (``-m``) or ``run_dir``
beside ``hydra.run.dir`` is refused in one line.

What would end the command with an error raises :class:`~trainer_run.errors.JobFailed`
instead (its message is the command's ``error:`` line, its ``exit_code`` the command's
status); a new run that fails before training leaves nothing behind, as in the command.
Sweeps (``-m``), launchers and several processes stay the command's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from trainer_run import stop_signals
from trainer_run.compose import argv as args
from trainer_run.compose import composer, user_targets
from trainer_run.errors import ConfigError, JobFailed
from trainer_run.runner import closing, lifecycle, preflight
from trainer_run.runner.lifecycle import Job
from trainer_run.runs import summary as run_summary


@dataclass(frozen=True)
class Run:
    """A run directory of trainer-run's, as the Python API returns it."""

    dir: Path

    @property
    def summary(self) -> dict:
        """``summary.json`` (empty for a run that has none yet: killed, or still running)."""
        return run_summary.recorded(self.dir)

    @property
    def status(self) -> str | None:
        """How the run ended: ``completed``, ``interrupted``, ``diverged``, ``failed`` (None: no
        summary)."""
        return self.summary.get("status")

    def load_model(self, checkpoint=None, trust: bool = False):
        """The run's trained model, ready to ``predict`` (:func:`trainer_run.runner.trained.load_model`:
        ``checkpoint`` is ``"best"``, ``"last"``, a checkpoint directory or an ``.npz``)."""
        from trainer_run.runner.trained import load_model

        return load_model(self.dir, checkpoint, trust)


def train(overrides=(), run_dir=None, config_dir=None) -> Run:
    """Trains a new run as ``trainer-run <overrides>`` does (``run_dir``: its
    ``hydra.run.dir``, by default ``runs/<date>/<time>``; ``config_dir``: a folder of config
    options of the user's, the command's ``--config-dir``); returns it."""
    argv = [str(o) for o in overrides]
    _check_one_run(argv, run_dir)
    if run_dir is not None:
        argv.append(f"hydra.run.dir={args.quote(Path(run_dir))}")
    if config_dir is not None:
        argv = [f"--config-dir={Path(config_dir)}", *argv]
    return _run(argv)


def resume(run_dir, overrides=(), config_dir=None) -> Run:
    """Continues the run in ``run_dir`` (or from a checkpoint directory) bit for bit, as
    ``trainer-run resume=<run_dir> <overrides>`` does; returns it."""
    return train([*overrides, f"resume={args.quote(Path(run_dir))}"], config_dir=config_dir)


def _check_one_run(argv: list[str], run_dir) -> None:
    """Refuses (JobFailed, one line) what the call cannot do as asked: a flag of the command
    (``-m``: a sweep is the command's; ``--config-dir`` is ``config_dir=``), or ``run_dir``
    beside a ``hydra.run.dir`` override, two folders for one run."""
    flag = next((a for a in argv if a.startswith("-")), None)
    if flag in args.MULTIRUN_FLAGS:
        raise JobFailed(ConfigError(f"trainer_run.train runs one run and takes no {flag}: run a "
                                    "sweep with the command (trainer-run -m ...), or call "
                                    "train once for each setting"))
    if flag is not None:
        raise JobFailed(ConfigError(f"trainer_run.train takes overrides (key=value), not the "
                                    f"command's flag {flag}; give a config folder as "
                                    "config_dir=, the run's folder as run_dir="))
    given = args.value(argv, "hydra.run.dir")
    if run_dir is not None and given is not None:
        raise JobFailed(ConfigError(f"run_dir={str(run_dir)!r} and hydra.run.dir={given} both name "
                                    "the run's folder; give one of them"))


def _run(argv: list[str]) -> Run:
    restore = stop_signals.handle()
    try:
        argv = _checked(argv)
        out = Path(args.value(argv, "hydra.run.dir"))
        kept = preflight.nearest_existing(out)
        cfg = _composed(argv, out)
        job = Job.composed(cfg.hydra, record=preflight.record_folder(argv), kept=kept,
                           resume=_given_resume(argv), command=closing.PYTHON)
        out.mkdir(parents=True, exist_ok=True)
        lifecycle.run(job, user_targets.apply(composer.task(cfg), job.overrides))
        return Run(job.out)
    finally:
        restore()
        stop_signals.clear()


def _checked(argv: list[str]) -> list[str]:
    try:
        return preflight.one_run(preflight.checked(argv))
    except ConfigError as e:
        raise JobFailed(e) from None


def _composed(argv: list[str], out: Path):
    overrides = [a for a in argv if args.is_override(a)]
    try:
        return composer.compose(overrides, args.config_dirs(argv), out)
    except (HydraException, OmegaConfBaseException) as e:
        raise JobFailed(preflight.explained(overrides, e)) from None


def _given_resume(argv: list[str]) -> str | None:
    value = args.value(argv, "resume")
    return None if args.is_null(value) else value

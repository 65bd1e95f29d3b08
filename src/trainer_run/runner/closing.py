"""The last lines of a run on stdout: its directory and, when the run can go on (interrupted,
or ended by ``trainer.max_time``), where it stopped and the command that continues it; a run
stopped before its limit by early stopping or a callback's ``trainer.request_stop(reason)``
says so and why (its ``summary.json`` holds the reason as ``stop_reason``); the checkpoint a
diverged run leaves; the line of a resumed run that has nothing left to do."""

from __future__ import annotations

from pathlib import Path

from trainer_run.compose import argv as args
from trainer_run.console import say
from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint
from trainer_run.training import time_limit

PYTHON = "trainer_run"
"""The ``command`` of a run started from Python (``trainer_run.train`` or ``resume``): its
resume line is the call that continues it."""


def resume_line(command: str, out: Path) -> str:
    """The line that tells how to resume the run in ``out``: ``command resume=<out>``, or for a
    run started from Python (:data:`PYTHON`) ``trainer_run.resume('<out>')``."""
    if command == PYTHON:
        return f"resume with: trainer_run.resume({str(out)!r})"
    return f"resume with: {command} {args.pasteable('resume', out)}"


def last_lines(role, out: Path, command: str = "trainer-run", sweeping: bool = False) -> None:
    """The run directory, then after an interruption or a time limit the checkpoint it left
    and how to resume it (:func:`resume_line`; ``command``: the one that starts the processes,
    ``mpiexec -n N trainer-run`` or ``trainer-run --hosts FILE``, or :data:`PYTHON`; a sweep
    prints the command that continues it instead)."""
    early = stopped_early(role)
    if early is not None:
        say(early)
    say(f"run directory: {out}")
    timed_out = getattr(role, "stop_reason", None) == time_limit.REASON
    if sweeping or not (role.status == "interrupted" or timed_out):
        return
    try:
        found = checkpoint.find(out)
    except ConfigError:
        return
    updater = role.updater
    if timed_out:
        limit = time_limit.written(role.max_time)
        say(f"time limit reached: trainer.max_time={limit} of training in this session, stopped "
            f"after iteration {updater.iteration} (epoch {updater.epoch_detail:.2f}); "
            f"checkpoint {found}")
        say(resume_line(command, out))
        say("(the resumed session may train for trainer.max_time again, counted from its start; "
            "add trainer.max_time=<seconds or DD:HH:MM:SS> to change that, or trainer.max_time=null "
            "to train to the run's iteration or epoch limit)")
        return
    say(f"interrupted at iteration {updater.iteration}; checkpoint {found}")
    say(resume_line(command, out))


LIMITS = ("max_iterations", "max_epochs", "stop_trigger", time_limit.REASON)
"""The stop reasons of a run that ran to a limit (``max_time``'s line is :func:`last_lines`')."""


def stopped_early(trainer) -> str | None:
    """The line of a completed run that an extension stopped before its limits (early
    stopping, or a callback's ``request_stop``): where, which limit it did not reach, and
    why; None for any other run."""
    reason = getattr(trainer, "stop_reason", None)
    if trainer.status != "completed" or reason in LIMITS or reason is None:
        return None
    updater = trainer.updater
    where = (f"stopped early after iteration {updater.iteration} (epoch "
             f"{updater.epoch_detail:.2f}), before {_limits(trainer.stop_trigger)}")
    if reason != "early_stopping":
        return f"{where}: a callback asked to stop ({reason})"
    stopping = trainer.get_extension("early_stopping")
    goal = stopping.objective
    best = "" if goal.best is None else (f"; best {goal.metric} {goal.best:.6g} at iteration "
                                          f"{goal.best_iteration}")
    return (f"{where}: early stopping, {goal.metric} did not improve by more than "
            f"trainer.early_stopping.min_delta={stopping.min_delta:g} in "
            f"trainer.early_stopping.patience={stopping.patience} evaluations in a row{best}")


def _limits(stop) -> str:
    """The limits of the stop trigger ``stop``, as the config names them."""
    limits = [f"trainer.max_iterations={stop.max_iterations}"] if stop.max_iterations else []
    limits += [f"trainer.max_epochs={stop.max_epochs:g}"] if stop.max_epochs else []
    return " or ".join(limits)


def nothing_to_do(trainer, rank_0: bool = True) -> None:
    """A resumed run that has already reached its limit: says so (on ``rank_0``) and leaves
    its files as they are (the summary keeps the speed of the session that trained)."""
    trainer.updater.finalize()
    stop = trainer.stop_trigger
    limits = [f"trainer.max_iterations={stop.max_iterations}"] if stop.max_iterations else []
    limits += [f"trainer.max_epochs={stop.max_epochs}"] if stop.max_epochs else []
    if rank_0:
        print(f"nothing to do: the run is at iteration {trainer.updater.iteration} (epoch "
              f"{trainer.updater.epoch_detail:.2f}), which reaches {' or '.join(limits)}; raise the "
              "limit to train further")


def kept(run_dir: Path) -> str:
    """Which checkpoint a stopped run leaves to resume from."""
    try:
        found = checkpoint.find(run_dir)
    except ConfigError:
        return "No checkpoint was written before it"
    return f"The last good checkpoint is {found}; resume={run_dir} continues from it"


def after_error(run_dir: Path, sweeping: bool = False) -> str:
    """What a run stopped by an error of the user's code keeps, and how to go on once the code
    is fixed: from its last good checkpoint, or from the start with its saved config (a job of
    a sweep: by running the sweep again)."""
    try:
        found = checkpoint.find(run_dir)
    except ConfigError:
        found = None
    how = ("the same sweep run again continues it" if sweeping else
           f"resume={run_dir} {'continues from it' if found else 'starts the run again'}")
    if found is None:
        return f"No checkpoint was written before it; once it is fixed, {how}"
    return f"The last good checkpoint is {found}; once it is fixed, {how}"

"""A run's lifecycle, the same from the command, a sweep's job and Python: claim its folder,
build it (new, resumed or fine-tuned), record it, train.

A job takes the run directory's lock (rank 0 only, for several processes), then builds the
run, which checks every value; only then does it write the run's record (``.hydra/``: the
composed config, Hydra's config and the overrides, signed) and train.

A new run that fails before training removes the directory it created, so a mistake, an early
stop signal or a full disk leaves nothing behind. Whatever stops a run is a
:class:`~trainer_run.errors.JobFailed`: one line and the exit status the command ends with.
A job of a sweep is different: its folder may already hold its run (:attr:`Job.existing`
decides what then), and a failed job is recorded by the sweep, which goes on.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from trainer_run import memory, module, stop_signals
from trainer_run.compose import places, schema, user_targets
from trainer_run.console import failed_file, inform, late_signal, say, show_cause, show_model, warn
from trainer_run.data import description as data_description
from trainer_run.errors import (
    ConfigError,
    Diverged,
    JobFailed,
    RunStopped,
    StorageError,
    UserCodeError,
)
from trainer_run.runner import closing, fine_tune, lr_find_job, slurm_requeue
from trainer_run.runner.build import Run, build_run, build_server, trainer_of
from trainer_run.runs import checkpoint_tree, trust
from trainer_run.runs import directory as run_directory
from trainer_run.runs import record as run_record
from trainer_run.runs import resume as resumes
from trainer_run.storage import checkpoint
from trainer_run.training import Trainer
from trainer_run.training.parameter_server import ParameterServer


@dataclass
class Job:
    """One run to carry out: its folder, what composed its config, and how it was launched."""

    out: Path                   # the run directory
    overrides: list[str]        # the overrides as given (``${...}`` unresolved)
    choices: dict               # the option chosen in each config group (Hydra's runtime choices)
    hydra: dict = field(default_factory=dict)  # Hydra's own config, kept in the record
    comm: object = None         # MPI's world communicator of a multi-process run, else None
    record: str | None = run_directory.RECORD  # where in a new run directory its record goes (None: none)
    kept: Path | None = None    # the run directory, or its nearest folder, that existed before
    resume: str | None = None   # resume= as the user gave it (a run or a checkpoint), if any
    command: str = "trainer-run"  # what starts the run's processes, in the line that resumes it
    sweeping: bool = False      # a job of a sweep (``-m``)
    existing: Callable | None = None
    """For a sweep's job whose folder holds a run: ``existing(cfg, out)`` gives the config that
    continues it, or raises :class:`Finished` with that run's value."""

    @classmethod
    def composed(cls, hydra, **launch) -> Job:
        """The job whose config Hydra composed with the node ``hydra`` (a composed config's
        ``hydra``, or :class:`~hydra.core.hydra_config.HydraConfig`'s): its output directory,
        the task's overrides as given, the group choices; ``launch``: the other fields."""
        return cls(out=Path(hydra.runtime.output_dir),
                   overrides=OmegaConf.to_container(hydra.overrides.task, resolve=False),
                   choices=dict(hydra.runtime.choices), hydra=OmegaConf.to_container(hydra),
                   **launch)

    @property
    def rank_0(self) -> bool:
        return self.comm is None or self.comm.rank == 0


class Finished(Exception):
    """The job's folder holds its run, already finished: ``value`` is its objective's best."""

    def __init__(self, value: float | None):
        super().__init__(value)
        self.value = value


def on_rank_0(comm, action):
    """``action()`` on rank 0 only, its result (or its ConfigError) shared with every rank of
    ``comm``; with no ``comm`` (one process), ``action()``."""
    if comm is None:
        return action()
    outcome = None
    if comm.rank == 0:
        try:
            outcome = ("ok", action())
        except ConfigError as e:
            outcome = ("error", (type(e), str(e)))
    kind, value = comm.bcast(outcome, root=0)
    if kind == "error":
        raise value[0](value[1])
    return value


def run(job: Job, cfg: DictConfig) -> Trainer | ParameterServer | None:
    """Claims the run directory, builds, records and trains (or serves); returns the role
    played. With ``trainer.lr_find.enabled`` (``debug=lr_find``) the job is the learning-rate
    range test of :mod:`.lr_find_job` instead, which returns None, and a test that fails
    leaves no folder it created behind. This process's memory is bounded by what the machine
    has available (see :func:`trainer_run.memory.limit_to_available`): an allocation beyond it
    ends the job with one line instead of the kernel killing the process. Freed blocks are
    kept for reuse (:func:`trainer_run.memory.reuse_freed_blocks`)."""
    memory.reuse_freed_blocks()
    restore = memory.limit_to_available()
    try:
        if lr_find_job.requested(cfg):
            return _range_test(job, cfg)
        return _bounded(job, cfg)
    except MemoryError as e:
        raise JobFailed(memory.out_of_memory(e)) from None
    finally:
        restore()


def _range_test(job: Job, cfg: DictConfig) -> None:
    try:
        lr_find_job.run(job, cfg, build)
    except BaseException:
        if job.rank_0:
            _remove_new(job, None)  # the empty folders it created, if it wrote nothing
        raise


def _bounded(job: Job, cfg: DictConfig) -> Trainer | ParameterServer:
    out = job.out
    fresh = not run_directory.holds_run(out)
    lock = None
    try:
        lock = _claim(job, resuming=bool(cfg.resume) or not fresh and job.existing is not None)
        if not fresh and job.existing is not None:
            cfg = job.existing(cfg, out)
            fresh = not run_directory.holds_run(out)
        role = _start(job, cfg, fresh)
    except BaseException as e:
        if fresh and job.rank_0 and not job.sweeping:
            _remove_new(job, lock)
        elif lock is not None:
            lock.release()
        if isinstance(e, (OSError, StorageError)):
            raise JobFailed(*failed_file(e, out)) from None
        raise
    try:
        _play(job, role)
    finally:
        if lock is not None:
            lock.release()
    return role


def _claim(job: Job, resuming: bool) -> run_directory.RunLock | None:
    """Rank 0's lock on the run directory (None on the other ranks). A directory in use, or
    one that is not new for a new run, is refused on every rank."""
    lock = None

    def claim() -> None:
        nonlocal lock
        lock = run_directory.RunLock(job.out).acquire()
        try:
            run_directory.check_no_links(job.out)  # a planted link: refused before any work
        except ConfigError:
            lock.release()
            raise
        if not resuming:
            try:
                run_directory.check_empty(job.out)
            except ConfigError:
                lock.release()
                raise

    try:
        on_rank_0(job.comm, claim)
    except ConfigError as e:
        raise JobFailed(e) from None
    return lock


def _start(job: Job, cfg: DictConfig, fresh: bool):
    """The built trainer (or server), once the config is valid and no stop signal came (with
    ``init_from``, the model section is the source run's unless the command names one:
    :mod:`.fine_tune`); then
    rank 0 says the backend and its device (:meth:`~trainer_run.backend.Backend.describe`) and
    what the run trains on (a line, unless ``trainer.progress`` is off, and a hint if there is
    one; a warning for a compute dtype the backend runs slowly), and a new run
    directory gets Hydra's record and the data's (:mod:`trainer_run.data.description`)."""
    try:
        cfg, taken = fine_tune.source_model(cfg, job.overrides)
        if taken and job.rank_0:
            say(taken)
        role, built = build(job, cfg, model_taken=taken is not None)
    except trust.UntrustedRun as e:  # a sweep records nothing in a run it may not load
        raise JobFailed(e, record=False) from None
    except ConfigError as e:
        raise JobFailed(e) from None
    except UserCodeError as e:  # the user's model, loader, logger or callback, while built
        show_cause(e)
        raise JobFailed(f"{e}; nothing was trained", e.exit_code) from None
    except RunStopped as e:  # a stop signal during a download, before training
        raise JobFailed(e, e.exit_code) from None
    _stop_if_signalled()
    if job.rank_0:
        say(f"run directory: {job.out}")
        say(f"backend: {built.backend.describe()}")  # what backend=auto chose, too
        inform(built.data.note)
        inform("\n".join(getattr(built.backend, "notes", ())))  # a slow dtype, the BLAS's threads
        if isinstance(role, Trainer):
            show_model(module.summary(role.updater.get_model("main")))
            if built.limit_note:
                say(built.limit_note)
    if fresh and job.rank_0:
        run_record.write(job.out, cfg, job.record, job.hydra, job.overrides)
        data_description.write(built.data, job.out)
    return role


def _stop_if_signalled() -> None:
    """Ends the job (128 + the signal's number) when a stop signal came before training."""
    signum = stop_signals.requested()
    if signum is not None:
        raise JobFailed(stop_signals.before_training(signum), 128 + signum)


def _remove_new(job: Job, lock: run_directory.RunLock | None) -> None:
    """Removes the run directory this job created (its lock file, and Hydra's record if the
    disk cut it short, are all it holds) and the folders created for it, up to the nearest
    one that existed before the command. Without the lock (another process holds the
    directory) only empty folders are removed."""
    if lock is not None:
        if job.record is not None:
            shutil.rmtree(job.out / job.record, ignore_errors=True)  # cut short by the disk
        for name in data_description.FILES:
            (job.out / name).unlink(missing_ok=True)
        lock.release(remove=True)
    folder = job.out.resolve()
    while folder != job.kept and folder != folder.parent and job.kept in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _play(job: Job, role: Trainer | ParameterServer) -> None:
    """Trains, or serves the workers; a stop or a failure ends the command with its status.

    An error of the user's code (:mod:`trainer_run.user_code`: a callback, logger, model or
    hook raised, whatever the exception, an ``OSError`` included) shows its traceback, then
    one line naming the object, the checkpoint kept and how to resume; exit 1. Only our own
    writes that the disk refuses (a StorageError, or an ``OSError`` on a file of the run
    directory) are exit 4. A ``SystemExit`` from anywhere in training is an error too, so
    that the exit status and the summary's ``failed`` agree."""
    if isinstance(role, Trainer) and role.stop_trigger(role):
        closing.nothing_to_do(role, job.rank_0)
        return
    try:
        role.run()
    except ConfigError as e:
        raise JobFailed(e) from None
    except Diverged as e:
        raise JobFailed(f"{e}. {closing.kept(job.out)}", e.exit_code) from None
    except UserCodeError as e:
        show_cause(e)
        raise JobFailed(f"{e}. {closing.after_error(job.out, job.sweeping)}",
                        e.exit_code) from None
    except RunStopped as e:
        raise JobFailed(e, e.exit_code) from None
    except OSError as e:
        message, code = failed_file(e, job.out)
        if code != 4:  # not a write of ours into the run directory: code that raised it
            raise
        raise JobFailed(message + ", then resume", code) from None
    except SystemExit as e:
        raise JobFailed(f"training raised SystemExit({e.code!r}); the run ended failed. "
                        f"{closing.after_error(job.out, job.sweeping)}", 1) from e
    if job.rank_0:
        closing.last_lines(role, job.out, job.command, job.sweeping)
        late_signal(role.status)
    if role.status == "interrupted":
        if job.rank_0:
            slurm_requeue.requeue(role.stop_signal)


def build(job: Job, cfg: DictConfig, model_taken: bool = False, mode=None
          ) -> tuple[Trainer | ParameterServer, Run]:
    """This process's part of the job: the trainer of a new run or of the resumed one with its
    state restored, or on the server rank of a ``dist_async`` run the parameter server; and
    what it was built from (the data it trains on, its limits). ``model_taken``: the model
    section is ``init_from``'s source run's (:func:`.fine_tune.source_model`), so no group
    choice is recorded for it (as for a user's ``+model._target_``). ``mode``: another use of
    a new run's parts (:class:`.lr_find_job.RangeTestMode`), which changes the config
    (``configure``), checks the built parts (``check``) and makes the trainer
    (:func:`.build.trainer_of`); nothing is signed for it."""
    gone = user_targets.replaced(job.overrides) + (["model"] if model_taken else [])
    choices = {k: v for k, v in job.choices.items()
               if not k.startswith("hydra") and v is not None and k not in gone}
    state, stored, node = None, None, cfg
    again = bool(cfg.resume) and Path(cfg.resume).name == resumes.RECORD_CONFIG.name
    if again:  # a run killed before its first checkpoint, started again
        stored = on_rank_0(job.comm, lambda: resumes.from_record(Path(cfg.resume)))
    elif cfg.resume:
        state = checkpoint.load(Path(cfg.resume), checkpoint.RUN_STATE)
        stored = resumes.from_checkpoint(state, cfg.resume)
    mine = stored is None or on_rank_0(job.comm, stored.mine)  # rank 0 holds the key
    vouched = mine or bool(cfg.get("trust"))
    if stored is not None:
        node = resumes.config(stored, cfg, job.overrides, choices, vouched)
    saved = OmegaConf.to_container(node, resolve=False)
    command = resumes.command_keys(job.overrides, choices)
    resolved = resumes.resolved(node, stored, vouched, command)  # each rank, with its environment
    if not mine:  # trust=true admits a stranger's code, not its places
        places.bounded(resolved, stored.folder, stored.source, command)
    schema.check_types(resolved)
    resolved = mode.configure(resolved) if mode is not None else resolved
    if state is not None and (resolved["kvstore"].get("compression") or {}).get("type"):
        warn("gradient compression residuals are not in checkpoints (nor in MXNet's): they restart "
             "from zero, so this resumed run is not bit-identical to an uninterrupted one")
    built = build_run(resolved, job.out)
    if mode is not None:
        mode.check(built)
    started_from = state.get("init_from") if state is not None else None
    if state is None and resolved.get("init_from") is not None:
        started_from = fine_tune.load_weights(built, resolved["init_from"],
                                              resolved["init_from_strict"], job.rank_0)
    if built.serves:  # the server's state comes from worker 0 when training starts
        return build_server(built), built
    given = (state.get("overrides", []) if state is not None
             else resumes.recorded_overrides(Path(cfg.resume)) if again else [])
    extra = {"config": saved, "choices": choices,
             "overrides": resumes.merged(given, job.overrides, choices if cfg.resume else {})}
    if started_from is not None:
        extra["init_from"] = started_from
    if mode is None:
        extra[trust.SIGNATURE] = trust.sign(trust.checkpoint_data(extra)) if mine else None
    trainer = trainer_of(built, resolved, job.out, extra, mode)
    if state is not None:
        resume = _fitting(job, Path(cfg.resume), built.model)
        if resume != Path(cfg.resume):
            state = checkpoint.load(resume, checkpoint.RUN_STATE)
        checkpoint_tree.check_averages(state, resume)
        _restore(trainer, state["trainer"], resume)
    return trainer, built


def _fitting(job: Job, resume: Path, model) -> Path:
    """The checkpoint to restore: ``resume`` when its main model's arrays are ``model``'s
    (each parameter present, of its shape and dtype:
    :func:`trainer_run.runs.checkpoint_tree.check_fits`, from the arrays' headers). Else, when the
    user named a run (:attr:`Job.resume`), the previous checkpoint that fits, with a
    warning naming each passed over, as :func:`.resume.prepare` falls back past a damaged one;
    a checkpoint named directly is refused in one line.

    This is the check :func:`.resume.prepare` cannot make: only the built model knows the
    shapes. It runs before anything is loaded, so the trainer receives exactly one state,
    that of the checkpoint chosen, and the resume stays bit-identical. The run is built from
    the config of the checkpoint ``prepare`` chose; a fallback loads an older checkpoint of
    the same run, whose model and data a resume cannot change (:data:`.resume.FIXED`).
    Rank 0 decides, every rank loads the checkpoint it chose."""
    fits = checkpoint_tree.check_fits(model)

    def choose() -> Path:
        try:
            return checkpoint.find(resume, require=checkpoint.RUN_STATE, check=fits)
        except checkpoint.NewerFormatError:
            raise
        except checkpoint.CheckpointError:
            if job.resume is None:
                raise
        given = Path(job.resume).expanduser()
        return checkpoint.find(given, report=warn, require=checkpoint.RUN_STATE, check=fits)

    return on_rank_0(job.comm, choose)


def _restore(trainer: Trainer, state: dict, resume: str) -> None:
    """Loads a checkpoint's training state into the newly built ``trainer``."""
    try:
        trainer.load_state_dict(state)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError) as e:
        reason = e.args[0] if e.args else e  # a state of another run, or malformed inside
        raise ConfigError(f"checkpoint {resume} does not fit this run: {reason}") from None
    if trainer.updater.rank == 0:
        say(resumes.resumed(trainer.updater.iteration, resume))
    change = trainer.updater.workers_change()
    if change is not None and trainer.updater.rank == 0:
        warn(change)


"""One job of the command: claim its run directory, build the run, record it, train.

Each job (one run, or one run of a sweep) takes the run directory's lock (rank 0 only, for
several processes), then builds the run, which checks every value; only then does it write
Hydra's record of the run (``.hydra/``: the composed config, Hydra's config and the
overrides) and train. It returns the run's best objective value, which is what a Hydra sweeper
optimises.

A single run that fails before training removes the directory it created, so a mistake, an
early stop signal or a full disk leaves nothing behind; its error is one line and the exit
status says why. A job of a sweep is different (:mod:`.sweep_job`): its failure is recorded
in its folder and the sweep goes on, and a job folder that already holds this job's run is
skipped when it finished or resumed when it did not.
"""

from __future__ import annotations

import os
import shutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from trainer_run import memory, module, run_directory, trust
from trainer_run.data import record as data_record
from trainer_run.errors import (
    ConfigError,
    Diverged,
    RunStopped,
    StorageError,
    UserCodeError,
)
from trainer_run.kvstore import mpi_job
from trainer_run.storage import checkpoint
from trainer_run.training import Trainer
from trainer_run.training.parameter_server import ParameterServer
from trainer_run.updaters import saved as saved_state

from . import closing, fine_tune, run_record, schema, slurm_requeue, sweep_job, sweep_record, user_targets
from . import resume as resumes
from .build import Run, build_run, build_server, trainer_of
from .report import (
    fail,
    failed_file,
    inform,
    late_signal,
    say,
    show_cause,
    show_model,
    stop_if_signalled,
    warn,
)
from .sweep_job import JobFailed

RECORD = ".hydra"


@dataclass
class Launch:
    """What the command decided before Hydra runs, for the job(s) it starts."""

    comm: object = None          # MPI's world communicator of a multi-process run, else None
    record: str | None = RECORD  # where in a new run directory Hydra's record goes (None: none)
    kept: Path | None = None     # the run directory, or its nearest folder, that existed before
    resume: str | None = None    # resume= as the user gave it (a run or a checkpoint), if any
    pid: int | None = None       # the command's process; a launcher may run jobs in others


launch = Launch()
"""Set by :func:`trainer_run.cli.main.main` before Hydra runs."""


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


def run(cfg: DictConfig) -> float | None:
    """One job: claim the run directory, build, record, train; returns the best objective
    value (the worst possible one for a job that failed or never evaluated, see
    :func:`.sweep_job.value`)."""
    out = Path(HydraConfig.get().runtime.output_dir)
    cfg = user_targets.apply(cfg, overrides())
    if not sweep_job.sweeping():
        try:
            return _run(cfg, out)
        except JobFailed as e:
            fail(e, e.exit_code)
    try:
        if _is_rank_0():
            sweep_record.mark(Path(HydraConfig.get().sweep.dir))
        return _run(cfg, out)
    except JobFailed as e:
        return sweep_job.failed(out, cfg, overrides(), e)
    except Exception as e:  # the user's code: the traceback to read, the sweep goes on
        traceback.print_exc()
        return sweep_job.failed(out, cfg, overrides(), f"{type(e).__name__}: {e}")


def _run(cfg: DictConfig, out: Path) -> float | None:
    """The job, with this process's memory bounded by what the machine has available (see
    :func:`trainer_run.memory.limit_to_available`): an allocation beyond it ends the job with
    one line instead of the kernel killing the process. Freed blocks are kept for reuse
    (:func:`trainer_run.memory.reuse_freed_blocks`)."""
    memory.reuse_freed_blocks()
    restore = memory.limit_to_available()
    try:
        return _bounded(cfg, out)
    except MemoryError as e:
        raise JobFailed(memory.out_of_memory(e)) from None
    finally:
        restore()


def _bounded(cfg: DictConfig, out: Path) -> float | None:
    fresh = not run_directory.holds_run(out)
    lock = None
    try:
        lock = _claim(out, resuming=bool(cfg.resume) or not fresh and sweep_job.sweeping())
        if not fresh and sweep_job.sweeping():
            cfg, done = sweep_job.continued(cfg, out, overrides())
            if done is not None:
                if lock is not None:
                    lock.release()
                return done
            fresh = not run_directory.holds_run(out)
        role = _start(cfg, out, fresh)
    except BaseException as e:
        if fresh and _is_rank_0() and not sweep_job.sweeping():
            _remove_new(out, lock)
        elif lock is not None:
            lock.release()
        if isinstance(e, (OSError, StorageError)):
            raise JobFailed(*failed_file(e, out)) from None
        raise
    try:
        _play(role, out)
    finally:
        if lock is not None:
            lock.release()
    return sweep_job.value(role)


def overrides() -> list[str]:
    """This job's command-line overrides as given (``${...}`` in them unresolved)."""
    return OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)


def _claim(out: Path, resuming: bool) -> run_directory.RunLock | None:
    """Rank 0's lock on the run directory (None on the other ranks). A directory in use, or
    one that is not new for a new run, is refused on every rank."""
    lock = None

    def claim() -> None:
        nonlocal lock
        lock = run_directory.RunLock(out).acquire()
        try:
            run_directory.check_no_links(out)  # a planted link: refused before any work
        except ConfigError:
            lock.release()
            raise
        if not resuming:
            try:
                run_directory.check_empty(out)
            except ConfigError:
                lock.release()
                raise

    try:
        on_rank_0(launch.comm, claim)
    except ConfigError as e:
        raise JobFailed(e) from None
    return lock


def _start(cfg: DictConfig, out: Path, fresh: bool):
    """The built trainer (or server), once the config is valid and no stop signal came (with
    ``init_from``, the model section is the source run's unless the command names one:
    :mod:`.fine_tune`); then
    rank 0 says the backend and its device (:meth:`~trainer_run.backend.Backend.describe`) and
    what the run trains on (a line, unless ``trainer.progress`` is off, and a hint if there is
    one; a warning for a compute dtype the backend runs slowly), and a new run
    directory gets Hydra's record and the data's (:mod:`trainer_run.data.record`)."""
    try:
        cfg, taken = fine_tune.source_model(cfg, overrides())
        if taken and _is_rank_0():
            say(taken)
        role, built = build(cfg, out, model_taken=taken is not None)
    except trust.UntrustedRun as e:  # a sweep records nothing in a run it may not load
        raise JobFailed(e, record=False) from None
    except ConfigError as e:
        raise JobFailed(e) from None
    except UserCodeError as e:  # the user's model, loader, logger or callback, while built
        show_cause(e)
        raise JobFailed(f"{e}; nothing was trained", e.exit_code) from None
    except RunStopped as e:  # a stop signal during a download, before training
        raise JobFailed(e, e.exit_code) from None
    stop_if_signalled()
    if _is_rank_0():
        say(f"run directory: {out}")
        say(f"backend: {built.backend.describe()}")  # what backend=auto chose, too
        inform(built.data.note)
        inform("\n".join(getattr(built.backend, "notes", ())))  # a slow dtype, the BLAS's threads
        if isinstance(role, Trainer):
            show_model(module.summary(role.updater.get_model("main")))
            if built.limit_note:
                say(built.limit_note)
    if fresh and _is_rank_0():
        run_record.write(out, cfg, launch.record)
        data_record.write(built.data, out)
    return role


def _is_rank_0() -> bool:
    return launch.comm is None or launch.comm.rank == 0


def _remove_new(out: Path, lock: run_directory.RunLock | None) -> None:
    """Removes the run directory this job created (its lock file, and Hydra's record if the
    disk cut it short, are all it holds) and the folders created for it, up to the nearest
    one that existed before the command. Without the lock (another process holds the
    directory) only empty folders are removed."""
    if lock is not None:
        if launch.record is not None:
            shutil.rmtree(out / launch.record, ignore_errors=True)  # cut short by the disk
        for name in data_record.FILES:
            (out / name).unlink(missing_ok=True)
        lock.release(remove=True)
    folder = out.resolve()
    while folder != launch.kept and folder != folder.parent and launch.kept in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _play(role: Trainer | ParameterServer, out: Path) -> None:
    """Trains, or serves the workers; a stop or a failure ends the command with its status.

    An error of the user's code (:mod:`trainer_run.user_code`: a callback, logger, model or
    hook raised, whatever the exception, an ``OSError`` included) shows its traceback, then
    one line naming the object, the checkpoint kept and how to resume; exit 1. Only our own
    writes that the disk refuses (a StorageError, or an ``OSError`` on a file of the run
    directory) are exit 4. A ``SystemExit`` from anywhere in training is an error too, so
    that the exit status and the summary's ``failed`` agree."""
    if isinstance(role, Trainer) and role.stop_trigger(role):
        closing.nothing_to_do(role, _is_rank_0())
        return
    try:
        role.run()
    except ConfigError as e:
        raise JobFailed(e) from None
    except Diverged as e:
        raise JobFailed(f"{e}. {closing.kept(out)}", e.exit_code) from None
    except UserCodeError as e:
        show_cause(e)
        raise JobFailed(f"{e}. {closing.after_error(out, sweep_job.sweeping())}",
                        e.exit_code) from None
    except RunStopped as e:
        raise JobFailed(e, e.exit_code) from None
    except OSError as e:
        message, code = failed_file(e, out)
        if code != 4:  # not a write of ours into the run directory: code that raised it
            raise
        raise JobFailed(message + ", then resume", code) from None
    except SystemExit as e:
        raise JobFailed(f"training raised SystemExit({e.code!r}); the run ended failed. "
                        f"{closing.after_error(out, sweep_job.sweeping())}", 1) from e
    if _is_rank_0():
        closing.last_lines(role, out, closing.command(launch.comm), sweep_job.sweeping())
        late_signal(role.status)
    if role.status == "interrupted":
        if _is_rank_0():
            slurm_requeue.requeue(role.stop_signal)
        if launch.pid == os.getpid():  # a job in a launcher's process ends with its value instead
            sys.exit(128 + (role.stop_signal or 2))


def build(cfg: DictConfig, out: Path, model_taken: bool = False
          ) -> tuple[Trainer | ParameterServer, Run]:
    """This process's part of the job: the trainer of a new run or of the resumed one with its
    state restored, or on the server rank of a ``dist_async`` run the parameter server; and
    what it was built from (the data it trains on, its limits). ``model_taken``: the model
    section is ``init_from``'s source run's (:func:`.fine_tune.source_model`), so no group
    choice is recorded for it (as for a user's ``+model._target_``)."""
    hydra_cfg = HydraConfig.get()
    gone = user_targets.replaced(overrides()) + (["model"] if model_taken else [])
    choices = {k: v for k, v in hydra_cfg.runtime.choices.items()
               if not k.startswith("hydra") and v is not None and k not in gone}
    state, stored, node = None, None, cfg
    again = bool(cfg.resume) and Path(cfg.resume).name == resumes.RECORD_CONFIG.name
    if again:  # a run killed before its first checkpoint, started again
        stored = on_rank_0(launch.comm, lambda: resumes.from_record(Path(cfg.resume)))
    elif cfg.resume:
        state = checkpoint.load(Path(cfg.resume), checkpoint.RUN_STATE)
        stored = resumes.from_checkpoint(state, cfg.resume)
    mine = stored is None or on_rank_0(launch.comm, stored.mine)  # rank 0 holds the key
    vouched = mine or bool(cfg.get("trust"))
    if stored is not None:
        node = resumes.config(stored, cfg, overrides(), choices, vouched)
    saved = OmegaConf.to_container(node, resolve=False)
    command = resumes.command_keys(overrides(), choices)
    resolved = resumes.resolved(node, stored, vouched, command)  # each rank, with its environment
    schema.check_types(resolved)
    if state is not None and (resolved["kvstore"].get("compression") or {}).get("type"):
        warn("gradient compression residuals are not in checkpoints (nor in MXNet's): they restart "
             "from zero, so this resumed run is not bit-identical to an uninterrupted one")
    built = build_run(resolved)
    _warn_single_process(getattr(built.kvstore, "type", None) or "")
    started_from = state.get("init_from") if state is not None else None
    if state is None and resolved.get("init_from") is not None:
        started_from = fine_tune.load_weights(built, resolved["init_from"],
                                              resolved["init_from_strict"], _is_rank_0())
    if built.serves:  # the server's state comes from worker 0 when training starts
        return build_server(built), built
    given = (state.get("overrides", []) if state is not None
             else resumes.recorded_overrides(Path(cfg.resume)) if again else [])
    extra = {"config": saved, "choices": choices,
             "overrides": resumes.merged(given, overrides(), choices if cfg.resume else {})}
    if started_from is not None:
        extra["init_from"] = started_from
    extra[trust.SIGNATURE] = trust.sign(trust.checkpoint_data(extra)) if mine else None
    trainer = trainer_of(built, resolved, out, extra)
    if state is not None:
        resume = _fitting(Path(cfg.resume), built.model)
        if resume != Path(cfg.resume):
            state = checkpoint.load(resume, checkpoint.RUN_STATE)
        _restore(trainer, state["trainer"], resume)
    return trainer, built


def _fitting(resume: Path, model) -> Path:
    """The checkpoint to restore: ``resume`` when its main model's arrays are ``model``'s
    (each parameter present, of its shape and dtype:
    :func:`trainer_run.updaters.saved.check_fits`, from the arrays' headers). Else, when the
    user named a run (:attr:`Launch.resume`), the previous checkpoint that fits, with a
    warning naming each passed over, as :func:`.resume.prepare` falls back past a damaged one;
    a checkpoint named directly is refused in one line.

    This is the check :func:`.resume.prepare` cannot make: only the built model knows the
    shapes. It runs before anything is loaded, so the trainer receives exactly one state,
    that of the checkpoint chosen, and the resume stays bit-identical. The run is built from
    the config of the checkpoint ``prepare`` chose; a fallback loads an older checkpoint of
    the same run, whose model and data a resume cannot change (:data:`.resume.FIXED`).
    Rank 0 decides, every rank loads the checkpoint it chose."""
    fits = saved_state.check_fits(model)

    def choose() -> Path:
        try:
            return checkpoint.find(resume, require=checkpoint.RUN_STATE, check=fits)
        except checkpoint.NewerFormatError:
            raise
        except checkpoint.CheckpointError:
            if launch.resume is None:
                raise
        given = Path(launch.resume).expanduser()
        return checkpoint.find(given, report=warn, require=checkpoint.RUN_STATE, check=fits)

    return on_rank_0(launch.comm, choose)


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


def _warn_single_process(store: str) -> None:
    """A ``kvstore=dist_*`` run that no launcher started has one process: says how to start more."""
    if store.startswith("dist") and not mpi_job.launched():
        warn(f"kvstore={store}: this run has a single process because it was not started by "
             f"mpiexec; to train on N processes, start it with mpiexec -n N trainer-run "
             f"kvstore={store} ...")

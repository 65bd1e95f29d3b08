"""The ``trainer-run`` command: Hydra composes the config, :mod:`.build` turns it into a run.

Before Hydra runs, the arguments are checked (grammar, group options, keys), a sweep
directory that is not new is refused, and a resume is resolved (:mod:`.resume`). Each job
then claims its run directory (:class:`~trainer_run.run_directory.RunLock`; only rank 0 of
several processes) and builds the run; only once the config is valid does it write Hydra's
record of the run (``.hydra/``: the composed config, Hydra's config and the overrides) and
train. A job that fails before training removes the directory it created, so a mistake
leaves nothing behind.

Mistakes a user can fix (unknown names, bad values, unparsable overrides, missing or corrupt
files, a directory in use) print one line and exit with status 2. A run that stops on its
own prints one line too: a diverged loss exits with 3, a disk that refuses a write with 4.
SIGINT (Ctrl-C) or SIGTERM, from the first line of the command on, stop it cleanly: before
training nothing is written and the exit status is 130 or 143 (128 + the signal number);
during training the current iteration finishes and a checkpoint is saved (see
:mod:`trainer_run.training.stop_signals`).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from rich.console import Console
from rich.markup import escape

from trainer_run import checkpoint, files, run_directory
from trainer_run.errors import ConfigError, Diverged, RunStopped, StorageError
from trainer_run.kvstore import mpi_job
from trainer_run.training import stop_signals

from . import argv as args
from . import resume as resumes
from . import schema
from .build import build_trainer

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
RECORD = ".hydra"


@dataclass
class Launch:
    """What the command decided before Hydra runs, for the job(s) it starts."""

    comm: object = None          # MPI's world communicator of a multi-process run, else None
    record: str | None = RECORD  # where in a new run directory Hydra's record goes (None: none)
    kept: Path | None = None     # the run directory, or its nearest folder, that existed before


_launch = Launch()


def main(argv: list[str] | None = None) -> None:
    """Runs the command (the console script enters through :mod:`.entry`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    comm = _world(argv)
    try:
        argv = prepare(argv) if comm is None else prepare_on_rank_0(comm, argv)
    except ConfigError as e:
        fail(e)
    stop_if_signalled()
    subdir = args.value(argv, "hydra.output_subdir")
    given = args.value(argv, "hydra.run.dir")
    _launch.comm = comm
    _launch.record = RECORD if subdir is None else None if args.is_null(subdir) else subdir
    _launch.kept = _nearest_existing(Path(given)) if given else None
    sys.argv = [sys.argv[0], *args.without(argv, "hydra.output_subdir"), "hydra.output_subdir=null"]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises its errors; they are printed as one line
    try:
        run_hydra()
    except (HydraException, OmegaConfBaseException) as e:
        fail(describe(e))
    except OSError as e:
        fail(cannot_write(e), 4)


def cannot_write(error: OSError | StorageError) -> str:
    """One line for a write the disk refused, and what to do about it."""
    if isinstance(error, StorageError):
        return f"{error}; free some space or choose a writable hydra.run.dir"
    return (f"cannot write {error.filename or 'the run directory'}: {error.strerror or error}; free "
            "some space or choose a writable hydra.run.dir")


def _world(argv: list[str]):
    """MPI's world communicator when this is one of several processes of a ``kvstore=dist_*``
    run started by ``mpiexec`` (for a resume, the store the run chose unless the command names
    one); None otherwise (MPI is then never initialised)."""
    if not mpi_job.launched():
        return None
    store = args.value(argv, "kvstore") or _resumed_store(args.value(argv, "resume")) or ""
    if not store.startswith("dist"):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        fail(f"kvstore={store} needs mpi4py and an MPI; install them with "
             "pip install 'trainer-run[mpi]'")
    return MPI.COMM_WORLD if MPI.COMM_WORLD.size > 1 else None


def _resumed_store(resume: str | None) -> str | None:
    """The kvstore choice saved with the checkpoint ``resume`` names (None when there is none
    to read: :func:`prepare` then says why)."""
    if args.is_null(resume):
        return None
    try:
        found = checkpoint.find(Path(resume).expanduser(), require=checkpoint.RUN_STATE)
        return checkpoint.load_tree(found, checkpoint.RUN_STATE)["choices"].get("kvstore")
    except ConfigError:
        return None


def on_rank_0(comm, action):
    """``action()`` on rank 0 only, its result (or its ConfigError) shared with every rank."""
    outcome = None
    if comm.rank == 0:
        try:
            outcome = ("ok", action())
        except ConfigError as e:
            outcome = ("error", str(e))
    kind, value = comm.bcast(outcome, root=0)
    if kind == "error":
        raise ConfigError(value)
    return value


def prepare_on_rank_0(comm, argv: list[str]) -> list[str]:
    """:func:`prepare` on rank 0 only, shared with every rank: one run directory for all."""
    return on_rank_0(comm, lambda: prepare(argv))


def name_run_dir(argv: list[str]) -> list[str]:
    """``argv`` with ``hydra.run.dir`` naming the default run directory of now, for a single
    new run with our config that names none (the command then knows the directory, and
    every process of a multi-process run gets the same one)."""
    config_flags = any(a.split("=")[0] in schema.OTHER_CONFIG_FLAGS for a in argv)
    if (args.value(argv, "hydra.run.dir") is not None or args.is_multirun(argv) or config_flags
            or not args.is_null(args.value(argv, "resume"))):
        return argv
    pattern = OmegaConf.load(CONFIGS / "config.yaml").hydra.run._get_node("dir")._value()
    named = re.sub(r"\$\{now:([^}]*)\}", lambda m: time.strftime(m.group(1)), pattern)
    return [*argv, f"hydra.run.dir={args.quote(Path(named))}"]


def fail(error, code: int = 2) -> None:
    """Prints ``error`` as one ``error:`` line and exits with ``code``."""
    text = " ".join(line.strip() for line in str(error).splitlines())
    Console(stderr=True).print(f"[bold red]error:[/] {escape(text)}", highlight=False,
                              soft_wrap=True)
    sys.exit(code)


def warn(message: str) -> None:
    Console(stderr=True).print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False,
                              soft_wrap=True)


def describe(error: Exception) -> str:
    """One line for an error Hydra or OmegaConf raised while composing the config."""
    if isinstance(error, OmegaConfBaseException):
        where = getattr(error, "full_key", None)
        message = str(error).splitlines()[0]
        return f"the config does not resolve: {message}" + (f" (at {where})" if where else "")
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines) or type(error).__name__


def stop_if_signalled() -> None:
    """Exits with 128 + the signal's number when a stop signal came before training started."""
    signum = stop_signals.requested()
    if signum is not None:
        fail(f"stopped by {signal.Signals(signum).name} before training started; nothing was "
             "trained", 128 + signum)


def check_choices(argv: list[str]) -> None:
    """Refuses an unknown option of a config group (``optimizer=nosuchopt``) with the list
    of available ones, before Hydra composes anything. Sweeps (``a,b``) are checked item by item."""
    for argument in argv:
        group = args.key(argument).lstrip("+~")
        if "=" not in argument or not (CONFIGS / group).is_dir() or "(" in argument:
            continue
        options = sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))
        for choice in argument.split("=", 1)[1].split(","):
            if choice.strip("'\"") not in options:
                raise ConfigError(f"{group}={choice} is not available; choose one of "
                                  f"{', '.join(options)}")


def prepare(argv: list[str]) -> list[str]:
    """Checks the arguments and rewrites those of a resume; refuses to start a new run or
    sweep in a directory that is not new."""
    args.check_grammar(argv)
    check_choices(argv)
    schema.check_overrides(argv)
    argv = name_run_dir(argv)
    resume, multirun = args.value(argv, "resume"), args.is_multirun(argv)
    if not args.is_null(resume):
        if multirun:
            raise ConfigError("resume continues one run; drop -m/--multirun")
        argv = resumes.prepare(argv, resume, report=warn)
        _check_writable(Path(args.value(argv, "hydra.run.dir")))
        return argv
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = args.value(argv, key)
    if given:
        run_directory.check_unused(Path(given), key)
    _check_writable(Path(given) if given else Path("runs"))
    return argv


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def run_hydra(cfg: DictConfig) -> None:
    """One job: claim the run directory, build, record, train."""
    out = Path(HydraConfig.get().runtime.output_dir)
    fresh = not run_directory.holds_run(out)
    lock = None
    try:
        lock = _claim(out, resuming=bool(cfg.resume))
        trainer = _start(cfg, out, fresh)
    except BaseException as e:
        if fresh and _is_rank_0():
            _remove_new(out, lock)
        if isinstance(e, (OSError, StorageError)):
            fail(cannot_write(e), 4)
        raise
    try:
        _train(trainer, out)
    finally:
        if lock is not None:
            lock.release()


def _claim(out: Path, resuming: bool) -> run_directory.RunLock | None:
    """Rank 0's lock on the run directory (None on the other ranks). A directory in use, or
    one that is not new for a new run, is refused on every rank."""
    lock = None

    def claim() -> None:
        nonlocal lock
        lock = run_directory.RunLock(out).acquire()
        if not resuming:
            try:
                run_directory.check_empty(out)
            except ConfigError:
                lock.release()
                raise

    try:
        if _launch.comm is None:
            claim()
        else:
            on_rank_0(_launch.comm, claim)
    except ConfigError as e:
        fail(e)
    return lock


def _start(cfg: DictConfig, out: Path, fresh: bool):
    """The built trainer, once the config is valid and no stop signal came; a new run
    directory gets Hydra's record then."""
    try:
        trainer = build(cfg, out)
    except ConfigError as e:
        fail(e)
    stop_if_signalled()
    if fresh and _is_rank_0():
        _write_record(out, cfg)
    return trainer


def _is_rank_0() -> bool:
    return _launch.comm is None or _launch.comm.rank == 0


def _remove_new(out: Path, lock: run_directory.RunLock | None) -> None:
    """Removes the run directory this job created (its lock file, and Hydra's record if the
    disk cut it short, are all it holds) and the folders created for it, up to the nearest
    one that existed before the command. Without the lock (another process holds the
    directory) only empty folders are removed."""
    if lock is not None:
        if _launch.record is not None:
            shutil.rmtree(out / _launch.record, ignore_errors=True)  # cut short by the disk
        lock.release(remove=True)
    folder = out.resolve()
    while folder != _launch.kept and folder != folder.parent and _launch.kept in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _nearest_existing(directory: Path) -> Path:
    """``directory`` (absolute) if it exists, else its nearest existing parent."""
    directory = directory.expanduser().absolute()
    while not directory.exists():
        directory = directory.parent
    return directory.resolve()


def _write_record(out: Path, cfg: DictConfig) -> None:
    """Hydra's record of the run in ``<out>/.hydra/`` (as Hydra writes it itself)."""
    if _launch.record is None:
        return
    hydra_cfg = OmegaConf.create({"hydra": OmegaConf.to_container(HydraConfig.get())})
    OmegaConf.update(hydra_cfg, "hydra.output_subdir", _launch.record)
    folder = out / _launch.record
    folder.mkdir(parents=True, exist_ok=True)
    for name, node in (("config.yaml", cfg), ("hydra.yaml", hydra_cfg),
                       ("overrides.yaml", HydraConfig.get().overrides.task)):
        files.write_atomic(folder / name, OmegaConf.to_yaml(node))


def _train(trainer, out: Path) -> None:
    if getattr(trainer, "stop_trigger", None) is not None and trainer.stop_trigger(trainer):
        _nothing_to_do(trainer)
        return
    try:
        trainer.run()
    except ConfigError as e:
        fail(e)
    except Diverged as e:
        fail(f"{e}. {_kept(out)}", e.exit_code)
    except RunStopped as e:
        fail(e, e.exit_code)
    except OSError as e:
        fail(cannot_write(e) + ", then resume", 4)
    if trainer.status == "interrupted":
        sys.exit(128 + (trainer.stop_signal or 2))


def _nothing_to_do(trainer) -> None:
    """A resumed run that has already reached its limit: says so and leaves its files as they
    are (the summary keeps the speed of the session that trained)."""
    trainer.updater.finalize()
    stop = trainer.stop_trigger
    limits = [f"trainer.max_iterations={stop.max_iterations}"] if stop.max_iterations else []
    limits += [f"trainer.max_epochs={stop.max_epochs}"] if stop.max_epochs else []
    if _is_rank_0():
        print(f"nothing to do: the run is at iteration {trainer.updater.iteration} (epoch "
              f"{trainer.updater.epoch_detail:.2f}), which reaches {' or '.join(limits)}; raise the "
              "limit to train further")


def build(cfg: DictConfig, out: Path):
    """The trainer for this job: a new run, or the resumed one with its state restored."""
    hydra_cfg = HydraConfig.get()
    choices = {k: v for k, v in hydra_cfg.runtime.choices.items()
               if not k.startswith("hydra") and v is not None}
    state = None
    node = cfg
    if cfg.resume:
        state = checkpoint.load(Path(cfg.resume), checkpoint.RUN_STATE)
        node = resumes.config(state["config"], cfg, list(hydra_cfg.overrides.task), choices)
    saved = OmegaConf.to_container(node, resolve=False)
    try:
        resolved = OmegaConf.to_container(node, resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(describe(e)) from None
    schema.check_types(resolved)
    if state is not None and (resolved["kvstore"].get("compression") or {}).get("type"):
        warn("gradient compression residuals are not in checkpoints (nor in MXNet's): they restart "
             "from zero, so this resumed run is not bit-identical to an uninterrupted one")
    saved_state = {"config": saved, "choices": choices}
    trainer = build_trainer(resolved, out, saved_state)
    _warn_single_process(resolved["kvstore"]["name"])
    if state is not None and hasattr(trainer, "load_state_dict"):  # a dist_async server: none
        try:
            trainer.load_state_dict(state["trainer"])
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as e:
            reason = e.args[0] if e.args else e  # a state of another run, or malformed inside
            raise ConfigError(f"checkpoint {cfg.resume} does not fit this run: {reason}") from None
        change = trainer.updater.workers_change()
        if change is not None and trainer.updater.rank == 0:
            warn(change)
    return trainer


def _warn_single_process(store: str) -> None:
    """A ``kvstore=dist_*`` run that no launcher started has one process: says how to start more."""
    if store.startswith("dist") and not mpi_job.launched():
        warn(f"kvstore={store}: this run has a single process because it was not started by "
             f"mpiexec; to train on N processes, start it with mpiexec -n N trainer-run "
             f"kvstore={store} ...")


def _kept(run_dir: Path) -> str:
    """Which checkpoint a stopped run leaves to resume from."""
    try:
        found = checkpoint.find(run_dir)
    except ConfigError:
        return "No checkpoint was written before it"
    return f"The last good checkpoint is {found}; resume={run_dir} continues from it"


def _check_writable(directory: Path) -> None:
    """Refuses a run directory that could not be created or written, before anything is
    created: its nearest existing folder must be a writable directory."""
    existing = _nearest_existing(directory)
    reason = None
    if not existing.is_dir():
        reason = errno.ENOTDIR
    elif os.statvfs(existing).f_flag & os.ST_RDONLY:
        reason = errno.EROFS
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = errno.EACCES
    if reason is not None:
        raise ConfigError(f"cannot write to {directory}: {os.strerror(reason)}; choose a writable "
                          "hydra.run.dir (or hydra.sweep.dir for -m)")

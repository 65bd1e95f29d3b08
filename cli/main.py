"""The ``trainer-run`` command: Hydra composes the config, :mod:`.build` turns it into a run.

Before Hydra runs, the arguments are checked (grammar, group options, keys), a run or sweep
directory that is not new is refused, and a resume is resolved (:mod:`.resume`). Hydra then
runs each job (:mod:`.job`): claim the run directory, build, record, train.

Mistakes a user can fix (unknown names, bad values, unparsable overrides, missing or corrupt
files, a directory in use) print one line and exit with status 2. A run that stops on its
own prints one line too: a diverged loss exits with 3, a disk that refuses a write with 4.
SIGINT (Ctrl-C) or SIGTERM, from the first line of the command on, stop it cleanly: before
training nothing is written and the exit status is 130 or 143 (128 + the signal number);
during training the current iteration finishes and a checkpoint is saved (see
:mod:`trainer_run.stop_signals`).

A sweep (``-m``) runs in a folder the command names before Hydra starts (``hydra.sweep.dir``,
by default ``runs/multirun/<date>/<time>``) and ends, however it ends, with the jobs ranked
by their objective (:mod:`.results`: a table, ``results.csv`` and ``results.md`` in the
folder). A job that fails does not stop the sweep (:mod:`.sweep_job`); the command then exits
with status 1. Naming the folder of an earlier sweep of ours (:mod:`.sweep_record`) continues
it: finished jobs are skipped, the others resumed; any other folder that is not empty is
refused.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import hydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from trainer_run import config_upgrade, devices
from trainer_run.compose import argv as args
from trainer_run.compose import override_keys, saved_choices, user_targets
from trainer_run.console import cannot_write, describe, warn
from trainer_run.errors import ConfigError
from trainer_run.kvstore import mpi_job
from trainer_run.kvstore.mpi import import_mpi
from trainer_run.runner import preflight
from trainer_run.runner.lifecycle import on_rank_0
from trainer_run.runs import directory as run_directory

from . import hosts, job, slurm_check, sweep_record, sweeps
from .failure import fail, stop_if_signalled

COMPLETION_FLAGS = ("-sc", "--shell-completion")


def version() -> str:
    """``trainer-run <version> (Hydra <version>)``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        ours = installed("trainer-run")
    except PackageNotFoundError:  # run from a source tree that is not installed
        ours = "(not installed)"
    return f"trainer-run {ours} (Hydra {hydra.__version__})"


def main(argv: list[str] | None = None) -> None:
    """Runs the command (the console script enters through :mod:`.entry`)."""
    try:
        host_file, argv = hosts.take(list(sys.argv[1:] if argv is None else argv))
    except ConfigError as e:
        fail(e)
    argv = args.flags_first(argv)
    typed = list(argv)
    if "--version" in argv:
        print(version())
        return
    if args.info(argv) == "devices":  # ours alone: Hydra has no such section
        show_devices()
        return
    if args.asks_help(argv):
        _help(argv)
        return
    if any(a in COMPLETION_FLAGS for a in argv):  # Hydra's shell completion: nothing to check or write
        run_hydra()
        return
    if host_file is not None:
        _on_hosts(Path(host_file).expanduser(), argv)
    comm = _world(argv)
    try:
        argv = prepare_on_rank_0(comm, argv)
    except ConfigError as e:
        fail(e)
    except OSError as e:  # a path the arguments name that the system refuses to look at
        fail(f"cannot use {e.filename}: {e.strerror or e}"
             + ("; a folder name has at most 255 bytes" if e.errno == errno.ENAMETOOLONG else ""))
    stop_if_signalled()
    given = args.value(argv, "hydra.run.dir")
    job.launch.comm = comm
    job.launch.pid = os.getpid()
    given_resume = args.value(typed, "resume")
    job.launch.resume = None if args.is_null(given_resume) else given_resume
    job.launch.record = preflight.record_folder(argv)
    job.launch.kept = preflight.nearest_existing(Path(given)) if given else None
    sys.argv = [sys.argv[0], *args.with_overrides(args.without(argv, "hydra.output_subdir"),
                                                  "hydra.output_subdir=null")]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises its errors; they are printed as one line
    sweep = args.value(argv, "hydra.sweep.dir") if args.is_multirun(argv) else None
    try:
        run_hydra()
    except (HydraException, OmegaConfBaseException) as e:
        fail(_explained(typed, e))
    except subprocess.CalledProcessError as e:  # a launcher's command (sbatch) refused the jobs
        fail(f"{Path(str(e.cmd[0])).name} failed with exit status {e.returncode} (its own message "
             f"is above); nothing more was submitted")
    except YAMLError as e:  # a config file of the user's that is not YAML
        fail(f"a config file does not parse: {describe(e)}")
    except UnicodeDecodeError:
        fail(_not_text(argv))
    except OSError as e:
        fail(cannot_write(e), 4)
    except SystemExit as e:
        if sweep is not None and e.code not in (0, None, 2):
            sweeps.report(Path(sweep), typed, stopped=True)
        raise
    if sweep is not None and (comm is None or comm.rank == 0):
        sys.exit(sweeps.report(Path(sweep), typed))
    if args.info(typed) == "all":  # after Hydra's own sections
        show_devices()


def show_devices() -> None:
    """``--info``'s section on the devices: NumPy's, CuPy's and CUDA's versions, and the GPUs
    seen (:func:`trainer_run.devices.info_lines`); needs no GPU."""
    print("Devices\n*******")
    print("\n".join(devices.info_lines()))


def _on_hosts(path: Path, argv: list[str]) -> None:
    """``--hosts FILE``: checks the run and the hosts, then becomes ``mpiexec`` on them
    (:mod:`.hosts`); a check that fails is one line."""
    try:
        listed = hosts.read(path)
        hosts.check_store(_store(argv))
        prepare(argv)
        hosts.launch(path, listed, argv)
    except ConfigError as e:
        fail(e)
    except OSError as e:
        fail(f"cannot use {e.filename}: {e.strerror or e}")


def _explained(typed: list[str], error: Exception) -> str:
    """Hydra's ``error`` in one line; when an argument names a key the config does not have,
    our line instead, with the closest key (a single run's keys are checked here, after
    Hydra refused them, so that a valid command composes its config once)."""
    return preflight.explained(user_targets.rewrite(config_upgrade.renamed(typed)[0]), error)


def _help(argv: list[str]) -> None:
    """``--help``: the options it names must exist (:func:`check_choices`) and their files
    parse."""
    from . import help as helps  # imported when asked: a run does without it

    try:
        preflight.check_choices(argv)
        helps.show(argv)
    except (ConfigError, OmegaConfBaseException, YAMLError) as e:
        fail(describe(e))
    except UnicodeDecodeError:
        fail(_not_text(argv))


def _not_text(argv: list[str]) -> str:
    """One line naming the config file of a ``--config-dir`` that is not UTF-8 text."""
    for folder in args.config_dirs(argv):
        for path in sorted(folder.rglob("*.yaml")):
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                return (f"config file {path} is not UTF-8 text (byte {e.start}); save it as "
                        "UTF-8")
    return "a config file is not UTF-8 text; save the config files as UTF-8"


def _world(argv: list[str]):
    """MPI's world communicator when this is one of several processes of a ``kvstore=dist_*``
    run started by ``mpiexec`` (for a resume, the store the run chose unless the command names
    one); None otherwise (MPI is then never initialised)."""
    if not mpi_job.launched():
        return None
    store = _store(argv)
    if not store.startswith("dist"):
        return None
    try:
        MPI = import_mpi(store)
    except ConfigError as e:
        fail(e)
    return MPI.COMM_WORLD if MPI.COMM_WORLD.size > 1 else None


def _store(argv: list[str]) -> str:
    """The kvstore the command chooses: the one it names, else the resumed run's, else ``""``
    (the config's default, ``local``)."""
    saved = saved_choices.read(args.value(argv, "resume")) or {}
    return args.value(argv, "kvstore") or saved.get("kvstore") or ""


def prepare_on_rank_0(comm, argv: list[str]) -> list[str]:
    """:func:`prepare` on rank 0 only, shared with every rank: one run directory for all."""
    return on_rank_0(comm, lambda: prepare(argv))


def prepare(argv: list[str]) -> list[str]:
    """Checks the arguments and rewrites those of a resume (:mod:`trainer_run.runner.preflight`);
    refuses to start a new run or sweep in a directory that is not new."""
    args.check_grammar(argv)
    multirun = args.is_multirun(argv)
    if args.value(argv, "hparams_search") is not None and not multirun:
        raise ConfigError("hparams_search runs a sweep: add -m (trainer-run -m hparams_search=...)")
    if multirun and args.value(argv, "debug") == "lr_find":
        raise ConfigError("debug=lr_find runs one range test: drop -m/--multirun")
    if multirun and any(a in args.SHOW_FLAGS for a in argv):
        raise ConfigError("--cfg and --info show the config of one run: drop -m/--multirun")
    argv = preflight.checked(argv)
    if not multirun:
        return preflight.one_run(argv)
    if not args.is_null(args.value(argv, "resume")):
        raise ConfigError("resume continues one run; drop -m/--multirun")
    override_keys.check_overrides(argv)  # a single run's keys are checked if Hydra refuses them
    slurm_check.check(argv)
    argv = preflight.name_run_dir(argv)
    given = args.value(argv, "hydra.sweep.dir")
    if given and sweep_record.is_ours(Path(given)):
        sweeps.check_same_overrides(Path(given), argv)
        warn(f"continuing the sweep in {given}: finished jobs are skipped, the others resumed")
    elif given:
        run_directory.check_unused(Path(given), "hydra.sweep.dir")
    preflight.check_writable(Path(given) if given else Path("runs"))
    return argv


OmegaConf.register_new_resolver(  # an Optuna direction for objective.mode (hparams_search)
    "trainer_run.direction", lambda mode: {"min": "minimize", "max": "maximize"}.get(mode, mode),
    replace=True)


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def run_hydra(cfg: DictConfig) -> float | None:
    """Hydra's task: one job (:func:`.job.run`); its value is what a sweeper optimises."""
    return job.run(cfg)



"""The ``trainer-run`` command: Hydra composes the config, :mod:`.build` turns it into a run.

Resume: ``trainer-run resume=<run or checkpoint dir> [overrides]`` finds the checkpoint
(the run's latest complete one, or the one named), re-selects the run's config-group
choices, writes into the run's own directory without touching its ``.hydra/``, rebuilds
the run from the config saved in the checkpoint with the given overrides applied on top,
and restores the full training state. Changing a group (``optimizer=sgd``) on resume is
refused: it would not be the same run.

Mistakes a user can fix (unknown names, bad values, missing or corrupt files) print one
message and exit with status 2; Hydra's own composition errors exit with status 1. A run
that stops on its own prints one message too: a diverged loss exits with 3, a disk that
refuses a write with 4. SIGINT (Ctrl-C) or SIGTERM finish the current iteration, save a
checkpoint and exit with 130 or 143 (128 + the signal number); a second one aborts at once
(the last complete checkpoint stays valid).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from rich.console import Console
from rich.markup import escape

from trainer_run import checkpoint
from trainer_run.errors import ConfigError, Diverged, RunStopped

from . import schema
from .build import build_trainer

MULTIRUN_FLAGS = ("-m", "--multirun")
CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    comm = _world(argv)
    try:
        argv = prepare(argv) if comm is None else prepare_on_rank_0(comm, argv)
    except ConfigError as e:
        fail(e)
    sys.argv = [sys.argv[0], *argv]
    run_hydra()


def _world(argv: list[str]):
    """MPI's world communicator when this is one of several processes of a ``kvstore=dist_*``
    run started by ``mpiexec``; None otherwise (MPI is then never initialised)."""
    store = _value(argv, "kvstore") or ""
    launched = any(v in os.environ for v in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"))
    if not (store.startswith("dist") and launched):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        fail(f"kvstore={store} needs mpi4py and an MPI; install them with "
             "pip install 'trainer-run[mpi]'")
    return MPI.COMM_WORLD if MPI.COMM_WORLD.size > 1 else None


def prepare_on_rank_0(comm, argv: list[str]) -> list[str]:
    """:func:`prepare` on rank 0 only, shared with every rank: one run directory for all (rank 0
    names it when the command does not), and only rank 0 writes Hydra's ``.hydra/`` record."""
    outcome = None
    if comm.rank == 0:
        if _value(argv, "hydra.run.dir") is None and _value(argv, "resume") in (None, "null", ""):
            argv = [*argv, f"hydra.run.dir=runs/{time.strftime('%Y-%m-%d/%H-%M-%S')}"]
        try:
            outcome = ("ok", prepare(argv))
        except ConfigError as e:
            outcome = ("error", str(e))
    kind, value = comm.bcast(outcome, root=0)
    if kind == "error":
        raise ConfigError(value)
    if comm.rank != 0 and _value(value, "hydra.output_subdir") is None:
        value = [*value, "hydra.output_subdir=null"]
    return value


def fail(error, code: int = 2) -> None:
    """Prints ``error`` as one ``error:`` line and exits with ``code``."""
    Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False,
                              soft_wrap=True)
    sys.exit(code)


def warn(message: str) -> None:
    Console(stderr=True).print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False,
                              soft_wrap=True)


def check_choices(argv: list[str]) -> None:
    """Refuses an unknown option of a config group (``optimizer=nosuchopt``) with the list
    of available ones, before Hydra composes anything. Sweeps (``a,b``) are checked item by item."""
    for argument in argv:
        group = _key(argument).lstrip("+~")
        if "=" not in argument or not (CONFIGS / group).is_dir() or "(" in argument:
            continue
        options = sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))
        for choice in argument.split("=", 1)[1].split(","):
            if choice.strip("'\"") not in options:
                raise ConfigError(f"{group}={choice} is not available; choose one of "
                                  f"{', '.join(options)}")


def prepare(argv: list[str]) -> list[str]:
    """Rewrites the arguments of a resume; refuses to start a new run over an old one."""
    check_choices(argv)
    schema.check_overrides(argv)
    resume = _value(argv, "resume")
    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    if resume in (None, "null", ""):
        run_dir = _value(argv, "hydra.sweep.dir" if multirun else "hydra.run.dir")
        if run_dir and not multirun:
            _refuse_existing(Path(run_dir))
        _check_writable(Path(run_dir) if run_dir else Path("runs"))
        return argv
    if multirun:
        raise ConfigError("resume continues one run; drop -m/--multirun")
    found = checkpoint.find(Path(resume).expanduser(), report=warn)
    _check_writable(checkpoint.run_dir_of(found))
    tree = checkpoint.load_tree(found)
    choices = tree.get("choices", {})
    rest = [a for a in argv if _key(a) not in ("resume", "hydra.run.dir", "hydra.output_subdir")]
    for group, choice in choices.items():
        given = _value(rest, group)
        if given is not None and given != choice:
            raise ConfigError(f"resume keeps the run's {group}={choice}; {group}={given} would be "
                              "a different run, so start a new one instead")
    pinned = [f"{g}={c}" for g, c in choices.items() if _value(rest, g) is None]
    return [*pinned, *rest, f"resume={_quote(found.resolve())}",
            f"hydra.run.dir={_quote(checkpoint.run_dir_of(found))}", "hydra.output_subdir=null"]


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def run_hydra(cfg: DictConfig) -> None:
    try:
        trainer = build(cfg)
        trainer.run()
    except ConfigError as e:
        fail(e)
    except Diverged as e:
        fail(f"{e}. {_kept(Path(trainer.out))}", e.exit_code)
    except RunStopped as e:
        fail(e, e.exit_code)
    except OSError as e:
        fail(f"cannot write {e.filename or 'the run directory'}: {e.strerror or e}; free some space "
             "or choose a writable hydra.run.dir, then resume", 4)
    if trainer.status == "interrupted":
        sys.exit(128 + (trainer.stop_signal or 2))


def build(cfg: DictConfig):
    """The trainer for this job: a new run, or the resumed one with its state restored."""
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    choices = {k: v for k, v in hydra_cfg.runtime.choices.items()
               if not k.startswith("hydra") and v is not None}
    state = None
    if cfg.resume:
        state = checkpoint.load(Path(cfg.resume))
        node = OmegaConf.create(state["config"])
        for override in hydra_cfg.overrides.task:
            key = _key(override).lstrip("+~")
            if key in ("resume",) or key.startswith("hydra.") or key in choices:
                continue
            OmegaConf.update(node, key, OmegaConf.select(cfg, key), force_add=True)
    else:
        if hydra_cfg.output_subdir is not None:  # rank 0 (or the only process)
            _refuse_existing(out)
        node = cfg
    saved = OmegaConf.to_container(node, resolve=False)
    try:
        resolved = OmegaConf.to_container(node, resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(f"the config does not resolve: {e}") from None
    schema.check_types(resolved)
    if state is not None and (resolved["kvstore"].get("compression") or {}).get("type"):
        warn("gradient compression residuals are not in checkpoints (nor in MXNet's): they restart "
             "from zero, so this resumed run is not bit-identical to an uninterrupted one")
    saved_state = {"config": saved, "choices": choices}
    trainer = build_trainer(resolved, out, saved_state)
    if state is not None and hasattr(trainer, "load_state_dict"):  # a dist_async server: none
        try:
            trainer.load_state_dict(state["trainer"])
        except (KeyError, ValueError) as e:
            reason = e.args[0] if e.args else e
            raise ConfigError(f"checkpoint {cfg.resume} does not fit this run: {reason}") from None
    return trainer


def _kept(run_dir: Path) -> str:
    """Which checkpoint a stopped run leaves to resume from."""
    try:
        found = checkpoint.find(run_dir)
    except ConfigError:
        return "No checkpoint was written before it"
    return f"The last good checkpoint is {found}; resume={run_dir} continues from it"


def _check_writable(directory: Path) -> None:
    """Refuses a run directory that cannot be created or written, before any work starts."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise ConfigError(f"cannot write to {directory}: {e.strerror or e}; choose a writable "
                          "hydra.run.dir (or hydra.sweep.dir for -m)") from None


def _refuse_existing(run_dir: Path) -> None:
    if (run_dir / "checkpoints").exists() or (run_dir / "metrics.jsonl").exists():
        raise ConfigError(f"{run_dir} already holds a run; continue it with resume={run_dir} "
                          "or choose another hydra.run.dir")


def _key(argument: str) -> str:
    return argument.split("=", 1)[0]


def _value(argv: list[str], key: str):
    """The value of the last ``key=value`` argument, unquoted (None if absent)."""
    values = [a.split("=", 1)[1] for a in argv if "=" in a and _key(a).lstrip("+~") == key]
    return values[-1].strip("'\"") if values else None


def _quote(path: Path) -> str:
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"

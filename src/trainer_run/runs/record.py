"""A new run's record: what it was started with, in ``<run>/.hydra/``, written once the run
is built (so a mistake leaves no record) and only by rank 0.

Hydra's three files as Hydra writes them itself (``config.yaml``, the composed config;
``hydra.yaml``; ``overrides.yaml``), the mark that makes the folder a run of trainer-run's
(:func:`trainer_run.runs.directory.mark`), ``config.sig`` (the config's signature with this
user's key, :mod:`trainer_run.runs.trust`; none when no key can be made) and, in a SLURM job, the
job's id (:func:`.slurm_record.record`). Every file is written without following a link.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from trainer_run.runs import directory as run_directory
from trainer_run.runs import slurm_record, trust
from trainer_run.storage import files, run_files


def write(out: Path, cfg: DictConfig, record: str | None, hydra: dict, overrides: list[str]) -> None:
    """The record of the run in ``out`` with the config ``cfg``, composed by Hydra's config
    ``hydra`` from the ``overrides``, in the folder ``record`` (``.hydra``; None: no record)."""
    if record is None:
        return
    hydra_cfg = OmegaConf.create({"hydra": hydra})
    OmegaConf.update(hydra_cfg, "hydra.output_subdir", record)
    folder = out / record
    files.make_folder(folder, out)
    for name, node in ((run_files.CONFIG, cfg), (run_files.HYDRA, hydra_cfg),
                       (run_files.OVERRIDES, OmegaConf.create(list(overrides)))):
        files.write_atomic(folder / name, OmegaConf.to_yaml(node), run=out)
    run_directory.mark(folder)
    signature = trust.sign((folder / run_files.CONFIG).read_bytes())
    if signature is not None:
        files.write_atomic(folder / trust.RECORD_SIGNATURE, signature + "\n", run=out)
    slurm_record.record(folder, out)

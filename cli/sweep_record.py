"""Which folder holds a sweep of ours: Hydra's ``multirun.yaml`` and our mark beside it.

Hydra writes ``multirun.yaml`` (the sweep's config and its command-line overrides) when a
grid sweep starts. Each job of a sweep marks it as trainer-run's (:func:`mark`):
``multirun.sig`` holds the signature, with this user's key (:mod:`trainer_run.runs.trust`), of
the overrides ``multirun.yaml`` records. A folder continues as a sweep (:func:`is_ours`) only
when both are there and the signature is this user's: a folder of notes, of another tool's
or Hydra app's output, or holding one run, is not a sweep to continue, and the command treats
it as any other folder a new sweep may not start in.
"""

from __future__ import annotations

from pathlib import Path

from trainer_run.runs import trust
from trainer_run.storage import files, reading, yaml_files

RECORD = "multirun.yaml"
MARK = "multirun.sig"


def recorded_overrides(folder: Path) -> list[str] | None:
    """The command-line overrides ``<folder>/multirun.yaml`` records, or None when there is
    no such file or it is not a Hydra multirun record."""
    try:
        task = yaml_files.read_run(Path(folder) / RECORD, folder)["hydra"]["overrides"]["task"]
        return [str(item) for item in task]
    except Exception:  # missing, not YAML, not Hydra's layout: no record of a sweep
        return None


def mark(folder: Path) -> None:
    """Marks the sweep in ``folder`` as ours (see the module docstring); nothing when Hydra
    wrote no ``multirun.yaml`` there (a sweeper that keeps none) or no key can sign."""
    overrides = recorded_overrides(folder)
    signature = trust.sign(trust.canonical({"overrides": overrides})) if overrides is not None else None
    if signature is not None:
        files.write_atomic(Path(folder) / MARK, signature + "\n", run=folder)


def is_ours(folder: Path) -> bool:
    """Whether ``folder`` holds a sweep of ours that may continue (see the module docstring)."""
    overrides = recorded_overrides(folder)
    try:
        signature = reading.read_text(Path(folder) / MARK, reading.MARKER_BYTES, folder).strip()
    except (OSError, ValueError):
        return False
    return overrides is not None and trust.signed_by_me(trust.canonical({"overrides": overrides}), signature)

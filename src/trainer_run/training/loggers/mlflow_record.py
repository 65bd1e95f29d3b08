"""A run folder's record of its MLflow run, ``mlflow.json``: the tracking URI, the experiment
and the MLflow run's id, signed with this user's key (:func:`trainer_run.runs.trust.sign`) together
with the run folder's absolute path.

A resumed run continues the MLflow run its record names only when the record is :func:`mine`:
signed by this user, for this folder, at the tracking URI it names. A folder copied
(``cp -r run run2``) or moved, or one from someone else, names an MLflow run that was not
made for it: logging into that run would add steps to its metrics and replace its artifacts.
Such a folder's run is logged to a new MLflow run instead. A record that is not JSON, or not
a record, is no record of this user's either; one that is no regular file (a link) is refused
as every file of a run is (:mod:`trainer_run.storage.reading`).
"""

from __future__ import annotations

import json
from pathlib import Path

from trainer_run.runs import trust
from trainer_run.storage import run_files

from ...errors import ConfigError
from ...storage import files, reading

FILE = run_files.MLFLOW
FIELDS = ("tracking_uri", "experiment_id", "run_id")
"""The record's fields, each text; its ``signature`` covers them and the run folder."""
PURPOSE = "trainer-run mlflow.json"
"""Part of what the signature covers, so that no other signature of this user's fits it."""


def signed_bytes(out: Path, record: dict) -> bytes:
    """What the signature of ``record`` (its :data:`FIELDS`) covers, for the run folder ``out``."""
    content = {name: record[name] for name in FIELDS}
    return json.dumps({"purpose": PURPOSE, "run_dir": str(Path(out).resolve()), **content},
                      sort_keys=True).encode()


def write(out: Path, tracking_uri: str, experiment_id: str, run_id: str) -> None:
    """Records (atomically) the MLflow run made for the run folder ``out``, signed (unsigned
    where this user has no key and none can be made: it is then never continued)."""
    record = {"tracking_uri": tracking_uri, "experiment_id": str(experiment_id), "run_id": run_id}
    record["signature"] = trust.sign(signed_bytes(out, record))
    files.write_atomic(Path(out) / FILE, json.dumps(record, indent=2) + "\n", run=out)


def read(out: Path) -> dict | None:
    """The record in ``out`` (None without one); ``{}`` for a file that holds no record (not
    JSON, or not text fields); ConfigError for a file that cannot be read as a run's file."""
    try:
        data = reading.read_bytes(Path(out) / FILE, reading.MARKER_BYTES, out)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{Path(out) / FILE} cannot be read ({e}); remove it to log this run "
                          "to a new MLflow run") from None
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError:
        return {}
    if not isinstance(record, dict) or not all(isinstance(record.get(n), str) for n in FIELDS):
        return {}
    return record


def mine(out: Path, record: dict) -> bool:
    """Whether ``record`` (from :func:`read`) is this user's, signed for the run folder ``out``
    and its tracking URI."""
    return bool(record) and trust.signed_by_me(signed_bytes(out, record), record.get("signature"))

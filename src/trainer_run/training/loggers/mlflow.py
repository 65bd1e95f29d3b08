"""An MLflow run on a tracking server or a local store: the run's params, every row's metrics,
its summary and plot as artifacts and how it ended; a resumed run continues the same MLflow run.

MLflow is reached through its client (mlflow-skinny, the ``mlflow`` extra), imported only when
the logger is chosen, with its usage telemetry off unless ``MLFLOW_DISABLE_TELEMETRY`` says
otherwise: a training run sends nothing but what it logs. A local store (``file:``) is MLflow's
file store, which MLflow 3 refuses unless ``MLFLOW_ALLOW_FILE_STORE`` is true: choosing one
(or the default ``./mlruns``) sets that, unless the environment already says.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

from trainer_run.storage import run_files

from ...console import inform, warn
from ...errors import ConfigError, RunStopped
from ...storage import reading
from .base import NOT_METRICS, Logger, RunInfo, is_number

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # read when MLflow is imported
try:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.exceptions import MlflowException
except ImportError:
    raise ConfigError('logger=mlflow needs mlflow-skinny: pip install "trainer-run[mlflow]"'
                      ) from None
from . import mlflow_record, mlflow_server  # noqa: E402  (they import MLflow: after the check)
from .mlflow_server import said  # noqa: E402

FILE = run_files.MLFLOW
ARTIFACTS = {run_files.SUMMARY: reading.RECORD_BYTES, run_files.PLOT: reading.RECORD_BYTES,
             **{f"{run_files.CONFUSION}/{split}.{kind}": reading.RECORD_BYTES
                for split in ("val", "test") for kind in ("json", "png")},
             **dict.fromkeys((run_files.MODEL, run_files.BEST_MODEL, run_files.EMA_MODEL,
                              run_files.SWA_MODEL))}
"""The run's files sent as artifacts when it ends, each when it is there, with its size limit
(None: an archive of weights, copied as it is); the config record (``.hydra/config.yaml``)
goes too, as ``config.yaml``."""
STATUS = {"completed": "FINISHED", "interrupted": "KILLED"}
"""The MLflow status of a run that ended so; any other (diverged, failed) is ``FAILED``."""
CLOCK = ("elapsed_s",)
"""Row metrics a repeated row may differ in (see :class:`MLflow`)."""
RUN_DIR = "trainer-run.run_dir"
"""The tag holding the run folder's absolute path."""
KEY_LENGTH, PARAM_LENGTH, TAG_LENGTH = 250, 6000, 8000
"""MLflow's limits on a key's, a param value's and a tag value's length."""
PARAMS_PER_CALL, METRICS_PER_CALL = 100, 1000
"""MLflow's limits on the params (or tags) and the metrics of one ``log_batch``."""
NOT_IN_A_NAME = re.compile(r"[^/\w.\- :]")
"""What MLflow refuses in a param's, metric's or tag's name (each becomes ``_``)."""


class TrackingError(RunStopped):
    """MLflow's tracking server (or store) refused a call or could not be reached once the run
    had started; the message names it, says what MLflow said, and how to go on."""


class MLflow(Logger):
    """Logs the run to an MLflow run in ``experiment_name`` (made when missing) at
    ``tracking_uri`` (null: ``$MLFLOW_TRACKING_URI``, else ``file:./mlruns`` of the current
    folder; a local path is made absolute), named ``run_name`` (null: the run folder's last
    two parts, as ``plot.png``'s title names the run) and tagged with ``tags`` and
    ``trainer-run.run_dir``, the run folder.

    - **params**: the run's hyper-parameters (:meth:`~.base.RunInfo.hyperparameters`, the
      config's scalars by dotted key, internal keys left out, a value written with a resolver
      as written; a boolean as ``true``/``false``, a list as its text), a value longer than
      MLflow's 6000 characters cut there, ending in ``...`` (the whole config is the
      ``config.yaml`` artifact);
    - **metrics**: every numeric value of every row (``epoch``, ``elapsed_s``, ``lr``, the
      ``train/`` and ``val/`` metrics, ...) at step ``iteration``, stamped with the row's
      ``time``; when training ends, the ``test/<metric>`` values at the iteration of the
      weights they measured and ``best/<metric>``, the objective's best, at its iteration;
    - **artifacts**, once the summary is written (:meth:`finish`): ``summary.json``,
      ``config.yaml``, the weights (``model.npz``, and ``model_best.npz``, ``model_ema.npz``,
      ``model_swa.npz`` when the run has them), ``plot.png`` (``logger=plot``) and the
      confusion matrices (``confusion/``, ``metrics=[confusion_matrix]``) when it has them;
    - **status**: ``FINISHED`` (completed, a time limit included), ``KILLED`` (Ctrl-C,
      SIGTERM: interrupted) or ``FAILED``.

    A name MLflow refuses has each refused character replaced by ``_``. The MLflow run's id is
    kept in the run folder's ``mlflow.json``, signed for this folder (:mod:`.mlflow_record`); a
    resumed run whose record is this user's for this folder and whose tracking URI is the one
    recorded continues that MLflow run (status ``RUNNING`` again); any other record (a copied
    or moved folder, someone else's run) gives a new MLflow run, with a ``note:`` line, and
    the recorded MLflow run is not touched. MLflow keeps every value
    logged at a step and cannot drop one, so a row (or an end value) MLflow already holds, the
    same value of each metric at the same step, ``elapsed_s`` aside, is not sent again: the
    rows before the checkpoint the resume starts from, and the rows the stopped run logged
    after it, which a resume recomputes bit for bit. A recomputed row that differs (an
    override that changes the training) is sent, so MLflow holds both at that step, the
    resumed one latest. Rows MLflow lacks (a failed call, a run logged without it) are sent
    when the resumed run starts. Params cannot change either: a value the resume's config
    changes (``trainer.max_iterations``) is kept in the tag ``resumed.<key>``. A recorded run
    that MLflow no longer has, or one at another tracking URI, gives a new MLflow run with the
    whole history, and a warning.

    The client is made, and the server asked for the experiment, when the logger is built,
    before anything is written or trained (:func:`.mlflow_server.client`: at most 10 s, stop
    signals live): a URI MLflow cannot use, a server it cannot reach or that does not answer
    in time, or a deleted experiment is a :class:`~trainer_run.errors.ConfigError`. Once the
    run started, a failed call is a :class:`TrackingError` that stops it; at the end
    (:meth:`finish`) it is a warning."""

    run_id: str | None = None
    out: Path

    def __init__(self, tracking_uri: str | None = None, experiment_name: str = "trainer-run",
                 run_name: str | None = None, tags: dict | None = None,
                 run: RunInfo | None = None):
        super().__init__(run)
        if not isinstance(experiment_name, str) or not experiment_name.strip():
            raise ConfigError(f"logger.mlflow.experiment_name must be a name, got {experiment_name!r}")
        if run_name is not None and not isinstance(run_name, str):
            raise ConfigError(f"logger.mlflow.run_name must be text or null, got {run_name!r}")
        if not isinstance(tags, (dict, type(None))):
            raise ConfigError(f"logger.mlflow.tags must be a mapping (tags={{team: vision}}), got {tags!r}")
        self.uri, source = mlflow_server.resolved(tracking_uri)
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tags = {name(str(k)): clipped(text(v), TAG_LENGTH) for k, v in (tags or {}).items()}
        self.held: dict[str, dict[int, list[float]]] = {}
        """The values the MLflow run held when this session started, by metric and step."""
        self.last_step: int | None = None
        self.broken = False
        self.client = mlflow_server.client(self.uri, source, experiment_name)

    def start(self, out: Path, rows: list[dict]) -> None:
        self.out = Path(out)
        with self._calling():
            params = self._continued() if self._recorded() else None
            if params is None:
                params = {}
                self._create()
            self._log_params(params)
            self._send([m for row in rows if not self._holds_row(row) for m in metrics(row)])
        if rows:
            self.last_step = int(rows[-1]["iteration"])

    def write(self, row: dict) -> None:
        self.last_step = int(row["iteration"])
        if not self._holds_row(row):
            with self._calling():
                self._send(metrics(row))

    def close(self) -> None:
        if self.run_id is None or self.broken:
            return
        now, ending = int(time.time() * 1000), []
        held_out, objective = self.run.held_out, self.run.objective
        if held_out is not None and held_out.metrics:
            step = (held_out.weights or {}).get("iteration", self.last_step) or 0
            ending += [Metric(name(key), float(value), now, int(step))
                       for key, value in held_out.metrics.items() if is_number(value)]
        if objective is not None and objective.best is not None:
            ending.append(Metric(name(f"best/{objective.metric}"), float(objective.best), now,
                                 int(objective.best_iteration or 0)))
        with self._calling():
            self._send([m for m in ending if not self._holds(m)])

    def finish(self, status: str) -> None:
        """Sends the run's files (see the class) and sets the MLflow run's status; a file that
        cannot be read as a run's file (a link) is left out, and raised after."""
        if self.run_id is None or self.broken:
            return
        with tempfile.TemporaryDirectory(prefix="trainer-run-mlflow-") as folder:
            refused = self._artifacts(Path(folder))
            with self._calling():
                if any(Path(folder).iterdir()):
                    self.client.log_artifacts(self.run_id, folder)
                self.client.set_terminated(self.run_id, STATUS.get(status, "FAILED"))
        if refused is not None:
            raise refused

    def _recorded(self) -> str | None:
        """The MLflow run id ``mlflow.json`` records for this tracking URI, when the record is
        this user's for this run folder (:func:`.mlflow_record.mine`); None without the file,
        and None with a ``note:`` line for a record that is not (a copied or moved folder,
        someone else's run) or a ``warning:`` line for one at another URI."""
        record = mlflow_record.read(self.out)
        if record is None:
            return None
        if not mlflow_record.mine(self.out, record):
            inform(f"note: logger.mlflow: {FILE} was not recorded by you for this run folder (it "
                   "was copied or moved, or is someone else's), so its MLflow run is left "
                   f"untouched; this run logs to a new MLflow run at {self.uri}, which gets its "
                   "whole history")
            return None
        if record["tracking_uri"] != self.uri:
            warn(f"logger.mlflow: this run was logged to MLflow run {record['run_id']} at "
                 f"{record.get('tracking_uri')}; it now logs to {self.uri}, in a new MLflow run "
                 "that gets its whole history")
            return None
        self.run_id = record["run_id"]
        return self.run_id

    def _continued(self) -> dict | None:
        """Continues the recorded run: its params, with what it holds of each metric in
        :attr:`held`; None (and a warning) when MLflow no longer has it."""
        try:
            found = self.client.get_run(self.run_id)
        except MlflowException as e:
            if e.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            found = None
        if found is None or found.info.lifecycle_stage != "active":
            warn(f"logger.mlflow: MLflow run {self.run_id} of this run is gone from {self.uri}; "
                 "a new MLflow run gets its whole history")
            return None
        for key in found.data.metrics:
            for metric in self.client.get_metric_history(self.run_id, key):
                self.held.setdefault(key, {}).setdefault(metric.step, []).append(metric.value)
        self.client.update_run(self.run_id, status="RUNNING")
        return dict(found.data.params)

    def _create(self) -> None:
        """A new MLflow run, recorded in ``mlflow.json`` (:func:`.mlflow_record.write`)."""
        experiment = self.client.get_experiment_by_name(self.experiment_name)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            try:
                experiment_id = self.client.create_experiment(self.experiment_name)
            except MlflowException as e:  # another job of the sweep made it first
                if e.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment_id = self.client.get_experiment_by_name(self.experiment_name).experiment_id
        tags = {**self.tags, RUN_DIR: str(self.out.resolve())}
        created = self.client.create_run(experiment_id, tags=tags, run_name=self.run_name or
                                         "/".join(self.out.resolve().parts[-2:]))
        self.run_id = created.info.run_id
        mlflow_record.write(self.out, self.uri, experiment_id, self.run_id)

    def _log_params(self, logged: dict) -> None:
        """The hyper-parameters MLflow does not hold yet as params; a changed one as a tag."""
        params, changed = [], []
        for key, value in self.run.hyperparameters().items():
            key, value = name(key), clipped(text(value), PARAM_LENGTH)
            if key not in logged:
                params.append(Param(key, value))
            elif logged[key] != value:
                changed.append(RunTag(name(f"resumed.{key}"), clipped(value, TAG_LENGTH)))
        for i in range(0, len(params), PARAMS_PER_CALL):
            self.client.log_batch(self.run_id, params=params[i:i + PARAMS_PER_CALL])
        for i in range(0, len(changed), PARAMS_PER_CALL):
            self.client.log_batch(self.run_id, tags=changed[i:i + PARAMS_PER_CALL])

    def _send(self, values: list) -> None:
        for i in range(0, len(values), METRICS_PER_CALL):
            self.client.log_batch(self.run_id, metrics=values[i:i + METRICS_PER_CALL])

    def _holds(self, metric) -> bool:
        """Whether MLflow held ``metric``'s value at its step when this session started."""
        return any(same(v, metric.value) for v in self.held.get(metric.key, {}).get(metric.step, ()))

    def _holds_row(self, row: dict) -> bool:
        """Whether MLflow holds ``row``: each of its metrics, :data:`CLOCK` aside."""
        checked = [m for m in metrics(row) if m.key not in CLOCK]
        return bool(checked) and all(self._holds(m) for m in checked)

    def _artifacts(self, folder: Path) -> ConfigError | None:
        """Copies the run's files that are there into ``folder``, each read as a run's files
        are (not through a link, of a bounded size); the first refusal, if any."""
        sources = {n: (self.out / n, limit) for n, limit in ARTIFACTS.items()}
        config = self.out / run_files.RECORD / run_files.CONFIG
        sources[run_files.CONFIG] = (config, reading.CONFIG_BYTES)
        refused = None
        for artifact, (path, limit) in sources.items():
            try:
                with reading.open_file(path, limit, self.out) as source:
                    (folder / artifact).parent.mkdir(exist_ok=True)
                    with open(folder / artifact, "wb") as copy:
                        shutil.copyfileobj(source, copy)
            except FileNotFoundError:
                continue
            except ConfigError as e:
                refused = refused or ConfigError(f"logger.mlflow: {artifact} is not sent: {e}")
        return refused

    @contextlib.contextmanager
    def _calling(self):
        """MLflow's errors (and a connection's, an OSError) as one :class:`TrackingError`."""
        try:
            yield
        except (MlflowException, OSError) as e:
            self.broken = True
            raise TrackingError(f"logger.mlflow: MLflow at {self.uri} failed: {said(e)}; resume the "
                                "run once it answers, and the rows MLflow lacks are sent then"
                                ) from None


def metrics(row: dict) -> list:
    """The row's numeric values as MLflow metrics at step ``iteration``, stamped with its
    ``time`` (else now)."""
    stamp = row.get("time")
    seconds = datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else time.time()
    step = int(row["iteration"])
    return [Metric(name(key), float(value), int(seconds * 1000), step) for key, value in row.items()
            if key not in NOT_METRICS and is_number(value)]


def name(key: str) -> str:
    """``key`` as MLflow takes a name: a refused character as ``_``, at most 250 characters."""
    return NOT_IN_A_NAME.sub("_", key)[:KEY_LENGTH]


def text(value) -> str:
    """A param's or tag's text: a boolean as YAML writes it (``true``), else ``str``."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def clipped(value: str, length: int) -> str:
    """``value`` cut to ``length`` characters, ending in ``...`` when it was longer."""
    return value if len(value) <= length else value[:length - 3] + "..."


def same(a: float, b: float) -> bool:
    """Equal, a NaN equal to a NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))

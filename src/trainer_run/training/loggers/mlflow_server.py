"""Where the MLflow logger logs, and the first answer of its server.

The tracking URI comes from the logger's own argument (``logger.mlflow.tracking_uri``), else
``$MLFLOW_TRACKING_URI``, else the local store ``./mlruns`` (:func:`resolved`); nothing else
chooses it. :func:`client` asks the server for the experiment before anything is written or
trained, and waits for its answer at most :data:`FIRST_ANSWER` seconds: the call runs on a
thread while this one polls the stop signals (:mod:`trainer_run.stop_signals`), so
Ctrl-C or SIGTERM during the wait ends the command at once. For that first call only, MLflow
tries once (:data:`FIRST_CALL`, where the environment does not set those variables): a server
that refuses the connection is said at once, one that accepts and never answers after
:data:`FIRST_ANSWER` seconds, instead of MLflow's minutes of retries.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from trainer_run import stop_signals

from ...errors import ConfigError, Interrupted

DEFAULT_STORE = "mlruns"
"""The local store of a run without a tracking URI, in the current folder (MLflow's own
``./mlruns``; MLflow 3's default, ``sqlite:///mlflow.db``, needs SQLAlchemy, which
mlflow-skinny does not install)."""
FIRST_ANSWER = 10.0
"""Seconds the first call waits for the server before the run is refused."""
FIRST_CALL = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
              "MLFLOW_HTTP_REQUEST_TIMEOUT": f"{FIRST_ANSWER + 5:g}"}
"""MLflow's settings for the first call (one try; its own timeout after :data:`FIRST_ANSWER`,
so the wait's line is the one said), each where the environment does not set it."""
POLL = 0.05
"""Seconds between two looks at the stop signals while waiting."""


def resolved(setting: str | None) -> tuple[str, str]:
    """The tracking URI (a local store's made an absolute ``file:`` URI) and where it comes
    from: ``setting``, else ``$MLFLOW_TRACKING_URI``, else :data:`DEFAULT_STORE` here. A local
    store allows MLflow's file store (``MLFLOW_ALLOW_FILE_STORE``) unless the environment says."""
    if setting is not None and (not isinstance(setting, str) or not setting.strip()):
        raise ConfigError(f"logger.mlflow.tracking_uri must be a URI (http://host:5000, "
                          f"file:/path) or null, got {setting!r}")
    source = "logger.mlflow.tracking_uri"
    uri = setting
    if uri is None:
        uri, source = os.environ.get("MLFLOW_TRACKING_URI"), "MLFLOW_TRACKING_URI"
    if not uri:
        uri, source = DEFAULT_STORE, "the default logger.mlflow.tracking_uri"
    parts = urlparse(uri)
    if parts.scheme in ("", "file") and not parts.netloc:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = Path(url2pathname(parts.path)).resolve().as_uri()
    return uri, source


def client(uri: str, source: str, experiment: str) -> MlflowClient:
    """MLflow's client at ``uri`` (from ``source``), once its server answered for
    ``experiment`` (not deleted), within :data:`FIRST_ANSWER` seconds: ConfigError otherwise,
    :class:`~trainer_run.errors.Interrupted` for a stop signal during the wait."""

    def made() -> MlflowClient:
        try:
            return MlflowClient(tracking_uri=uri)
        except (MlflowException, OSError) as e:
            raise ConfigError(f"{source}={uri} is not a tracking URI MLflow can use ({said(e)}); "
                              "give http(s)://host:port for a tracking server or file:/path for "
                              "a local store") from None

    def asked() -> tuple:
        mlflow = made()
        try:
            return mlflow, mlflow.get_experiment_by_name(experiment)
        except (MlflowException, OSError) as e:
            raise ConfigError(f"logger.mlflow: cannot reach MLflow at {uri} ({source}): "
                              f"{said(e)}; start the server or correct {source}") from None

    mlflow, found = answered(asked, f"MLflow at {uri}", f"logger.mlflow: cannot reach MLflow at "
                             f"{uri} ({source}): no answer in {FIRST_ANSWER:g} s; start the "
                             f"server or correct {source}")
    if found is not None and found.lifecycle_stage != "active":
        raise ConfigError(f"logger.mlflow.experiment_name={experiment} is deleted at {uri}; "
                          "restore it (mlflow experiments restore) or choose another name")
    return mlflow


def answered(call, waited_for: str, late: str):
    """What ``call()`` returns (or raises), called on a thread under :data:`FIRST_CALL`'s
    settings; ConfigError ``late`` after :data:`FIRST_ANSWER` seconds without an answer, and
    :class:`~trainer_run.errors.Interrupted` at the first stop signal (the thread is left to
    end on its own: it only waits for ``waited_for``)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as e:  # handed to the waiting thread
            outcome["error"] = e

    thread = threading.Thread(target=run, name="trainer-run-mlflow", daemon=True)
    deadline = time.monotonic() + FIRST_ANSWER
    with _first_call():
        thread.start()
        while thread.is_alive():
            signum = stop_signals.requested()
            if signum is not None:
                raise Interrupted(f"stopped by {signal.Signals(signum).name} while waiting for "
                                  f"{waited_for}; nothing was trained", signum)
            if time.monotonic() >= deadline:
                raise ConfigError(late)
            thread.join(POLL)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def _first_call():
    """:data:`FIRST_CALL`'s settings where the environment has none, for the block."""
    added = [name for name in FIRST_CALL if name not in os.environ]
    for name in added:
        os.environ[name] = FIRST_CALL[name]
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def said(error: BaseException) -> str:
    """What an error says, on one line."""
    return " ".join(str(error).split()) or type(error).__name__

"""The MLflow logger's first call to its server (training/loggers/mlflow_server.py) is bounded
and leaves the stop signals live: a server that accepts and never answers, or a closed port,
is one ``error:`` line within 15 s (not MLflow's minutes of retries); SIGTERM or SIGINT during
the wait ends the command within 2 s with 128 + the signal, nothing trained or written."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from run_folders import environment

ERROR_AFTER = 15.0
"""Seconds from the command's first connection to its error line, at most."""


@contextlib.contextmanager
def silent_server():
    """A listener on 127.0.0.1 that accepts connections and never answers; yields its port and
    an Event set at the first connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    connected, held = threading.Event(), []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])
                connected.set()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1], connected
    finally:
        listener.close()
        for connection in held:
            connection.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _started(tmp_path, port: int):
    """The command logging to MLflow at ``port``, killed if the test leaves it running."""
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer_run.cli", "logger=[jsonl,mlflow]",
         f"logger.mlflow.tracking_uri=http://127.0.0.1:{port}", "dataset.size=200",
         "trainer.progress=false", f"hydra.run.dir={tmp_path / 'run'}"],
        env=environment(tmp_path / "keys"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_server_that_never_answers_is_one_line_after_10_s(tmp_path):
    with silent_server() as (port, connected), _started(tmp_path, port) as process:
        assert connected.wait(60)
        since = time.monotonic()
        _, stderr = process.communicate(timeout=60)
        waited = time.monotonic() - since
    assert process.returncode == 2
    assert _errors(stderr) == [
        f"error: logger.mlflow: cannot reach MLflow at http://127.0.0.1:{port} "
        "(logger.mlflow.tracking_uri): no answer in 10 s; start the server or correct "
        "logger.mlflow.tracking_uri"]
    assert 9.5 < waited < ERROR_AFTER
    assert not (tmp_path / "run").exists()


def test_a_closed_port_is_one_line_at_once(tmp_path):
    port = closed_port()
    since = time.monotonic()
    with _started(tmp_path, port) as process:
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    [line] = _errors(stderr)
    said = (f"error: logger.mlflow: cannot reach MLflow at http://127.0.0.1:{port} "
            "(logger.mlflow.tracking_uri): ")
    assert line.startswith(said + f"API request to http://127.0.0.1:{port}/api/")
    assert "Connection refused" in line
    assert line.endswith("; start the server or correct logger.mlflow.tracking_uri")
    assert time.monotonic() - since < ERROR_AFTER  # start-up included
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_during_the_wait_ends_the_command_at_once(tmp_path, signum):
    with silent_server() as (port, connected), _started(tmp_path, port) as process:
        assert connected.wait(60)
        time.sleep(1.0)
        process.send_signal(signum)
        since = time.monotonic()
        _, stderr = process.communicate(timeout=60)
        ended = time.monotonic() - since
    assert process.returncode == 128 + signum
    assert ended < 2.0
    assert _errors(stderr) == [f"error: stopped by {signal.Signals(signum).name} while waiting for "
                               f"MLflow at http://127.0.0.1:{port}; nothing was trained"]
    assert not (tmp_path / "run").exists()

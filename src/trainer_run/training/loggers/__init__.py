"""Where the log's rows go: the ``logger`` config group, one module per logger.

:class:`~trainer_run.training.extensions.LogReport` computes the rows; each logger receives
them (see :class:`.base.Logger`). Each option of the group (``configs/logger/<name>.yaml``)
holds ``<name>: {_target_: ..., <arguments>}``; a user's logger is one more such file (in a
``--config-dir``) or ``+logger.<name>._target_=...``, built the same way. ``jsonl``
(``metrics.jsonl``) and ``csv`` (``metrics.csv``) need nothing beyond the runtime;
``tensorboard`` needs tensorboardX, ``plot`` matplotlib and ``mlflow`` (a tracking server's
run) mlflow-skinny, each from the extra of its name.

A logger of the user's is built as a :class:`UsersLogger`: what its methods raise names it
(:mod:`trainer_run.user_code`), an ``OSError`` included (a server that refuses a connection is
not a full disk); ours raise :class:`~trainer_run.errors.StorageError` when the disk refuses.
"""

from __future__ import annotations

from pathlib import Path

from ...targets import Kind, instantiate
from ...user_code import blame, is_ours
from .base import Logger, RunInfo

KIND = Kind("a logger: an object with start(out, rows), write(row) and close() (see "
            "trainer_run.training.loggers.Logger)",
            fits=lambda o: all(callable(getattr(o, m, None)) for m in ("start", "write", "close")))
BEFORE_THE_GROUP = {"jsonl": {"_target_": "trainer_run.training.loggers.jsonl.JsonLines"}}
"""The loggers of a config without a ``logger`` section (a checkpoint from before the group)."""

__all__ = ["BEFORE_THE_GROUP", "KIND", "Logger", "RunInfo", "UsersLogger", "build"]


def build(sections: dict, run: RunInfo) -> list[Logger]:
    """The loggers ``sections`` (the config's ``logger``: name -> ``{_target_, arguments}``)
    name, in that order, each given ``run`` when it takes it. A target that cannot be
    imported or is not a logger, or a missing package, is a ConfigError saying what to do,
    raised before anything is written. A logger of the user's comes as a :class:`UsersLogger`."""
    built = {f"logger.{name}": instantiate(f"logger.{name}", dict(options or {}), {"run": run},
                                           kind=KIND) for name, options in sections.items()}
    return [logger if is_ours(logger) else UsersLogger(key, logger) for key, logger in built.items()]


class UsersLogger(Logger):
    """The user's ``logger`` under config key ``key``, each method called through
    :func:`~trainer_run.user_code.blame`: what it raises is a
    :class:`~trainer_run.errors.UserCodeError` naming it. Any other attribute is the logger's."""

    def __init__(self, key: str, logger):
        self.key = key
        self.logger = logger

    def start(self, out: Path, rows: list[dict]) -> None:
        with blame(self.key, self.logger, "start"):
            self.logger.start(out, rows)

    def write(self, row: dict) -> None:
        with blame(self.key, self.logger, "write"):
            self.logger.write(row)

    def close(self) -> None:
        with blame(self.key, self.logger, "close"):
            self.logger.close()

    def finish(self, status: str) -> None:
        """The logger's own ``finish(status)`` when it has one (it is optional)."""
        finish = getattr(self.logger, "finish", None)
        if callable(finish):
            with blame(self.key, self.logger, "finish"):
                finish(status)

    def __getattr__(self, name):
        if name in ("key", "logger"):  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.logger, name)
